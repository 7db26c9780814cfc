// The dynamic loss-scaling rule (GradScaler; with DeepSpeed's hysteresis and a floor).
#include "fpscope/gpu/loss_scaler.hpp"

#include <algorithm>
#include <cmath>
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

bool LossScaler::update(bool found_non_finite) {
  if (found_non_finite) ++state_.skipped_steps;
  if (config_.kind != LossScalerConfig::Kind::dynamic) return found_non_finite;
  if (found_non_finite) {
    state_.finite_steps = 0;
    if (state_.hysteresis_left > 1) {
      --state_.hysteresis_left;  // DeepSpeed: tolerate, keep the scale
    } else {
      state_.scale = std::max(state_.scale * config_.backoff_factor, config_.min_scale);
    }
    return true;
  }
  if (++state_.finite_steps >= config_.growth_interval) {
    const double grown = state_.scale * config_.growth_factor;
    if (std::isfinite(grown) && grown <= 3.4028234663852886e38) state_.scale = grown;  // the scale must stay a finite float32
    state_.finite_steps = 0;
    state_.hysteresis_left = std::max(1, config_.hysteresis);
  }
  return false;
}

}  // namespace fpscope
