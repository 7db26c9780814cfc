// The dynamic loss-scaling rule (GradScaler; with DeepSpeed's hysteresis and a floor).
#include "fpscope/gpu/loss_scaler.hpp"

#include "fpscope/gpu/scaler_rule.hpp"

#include <cstdio>

namespace fpscope {

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

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config) {
  state_.scale = config.kind == LossScalerConfig::Kind::none ? 1.0 : config.initial_scale;
  state_.hysteresis_left = std::max(1, config.hysteresis);
}

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
