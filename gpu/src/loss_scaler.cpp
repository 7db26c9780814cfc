// The dynamic loss-scaling rule (GradScaler; with DeepSpeed's hysteresis and a floor).
#include "fpscope/gpu/loss_scaler.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

#include "fpscope/core/printable_text.hpp"

namespace fpscope {

std::optional<double> parse_scale_factor(std::string_view text) {
  double value = 0;
  if (text.size() > 2 && text.substr(0, 2) == "2^") {
    int k = 0;
    const std::string_view digits = text.substr(2);
    const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), k);
    if (result.ec != std::errc{} || result.ptr != digits.data() + digits.size() || k < -149 || k > 127) return std::nullopt;
    value = std::ldexp(1.0, k);
  } else {
    const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || result.ec != std::errc{} || result.ptr != text.data() + text.size()) return std::nullopt;
  }
  if (!(value > 0) || value > static_cast<double>(std::numeric_limits<float>::max()) || static_cast<float>(value) == 0) return std::nullopt;
  return value;
}

LossScalerConfig parse_loss_scale(std::string_view text) {
  if (text == "none") return LossScalerConfig::none();
  if (text == "dynamic") return LossScalerConfig::pytorch();
  if (const std::optional<double> value = parse_scale_factor(text)) return LossScalerConfig::fixed(*value);
  throw std::invalid_argument("--loss-scale '" + printable_text(text) +
                              "' is not none, dynamic, 2^k or a positive number that float32 holds");
}

std::string scaling_kind_name(LossScalerConfig::Kind kind) {
  switch (kind) {
    case LossScalerConfig::Kind::none: return "none";
    case LossScalerConfig::Kind::fixed: return "static";
    case LossScalerConfig::Kind::dynamic: return "dynamic";
  }
  return "?";
}

std::string describe(const LossScalerConfig& c) {
  char text[160];
  switch (c.kind) {
    case LossScalerConfig::Kind::none: return "none";
    case LossScalerConfig::Kind::fixed: std::snprintf(text, sizeof text, "static %g", c.initial_scale); return text;
    case LossScalerConfig::Kind::dynamic:
      std::snprintf(text, sizeof text, "dynamic initial %g growth %g every %lld backoff %g min %g hysteresis %d", c.initial_scale,
                    c.growth_factor, static_cast<long long>(c.growth_interval), c.backoff_factor, c.min_scale, c.hysteresis);
      return text;
  }
  return "?";
}

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config), state_(initial_scaler_state(config)) {}

void LossScaler::set_scale(double scale) {
  state_.scale = scale;
  state_.finite_steps = 0;
}

void LossScaler::reconfigure(const LossScalerConfig& config) {
  const std::int64_t skipped = state_.skipped_steps;
  *this = LossScaler(config);
  state_.skipped_steps = skipped;
}

bool LossScaler::update(bool found_non_finite) { return apply_scaler_rule(config_, state_, found_non_finite); }

}  // namespace fpscope
