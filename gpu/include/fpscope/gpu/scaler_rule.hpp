// The loss-scaling rule as one host/device function: LossScaler (CPU) and the CUDA backend's
// scaler-update kernel both call it, so the scale never depends on the backend.
#pragma once

#include <algorithm>

#include "fpscope/core/hd.hpp"
#include "fpscope/gpu/loss_scaler.hpp"

namespace fpscope {

// Advances `state` by one step; returns true when the step must be skipped.
FPSCOPE_HD inline bool apply_scaler_rule(const LossScalerConfig& config, LossScalerState& state, bool found_non_finite) {
  if (found_non_finite) ++state.skipped_steps;
  if (config.kind != LossScalerConfig::Kind::dynamic) return found_non_finite;
  if (found_non_finite) {
    state.finite_steps = 0;
    if (state.hysteresis_left > 1) {
      --state.hysteresis_left;  // DeepSpeed: tolerate, keep the scale
    } else {
      const double backed_off = state.scale * config.backoff_factor;
      state.scale = backed_off > config.min_scale ? backed_off : config.min_scale;
    }
    return true;
  }
  if (++state.finite_steps >= config.growth_interval) {
    const double grown = state.scale * config.growth_factor;
    if (grown <= 3.4028234663852886e38) state.scale = grown;  // the scale must stay a finite float32
    state.finite_steps = 0;
    state.hysteresis_left = config.hysteresis > 1 ? config.hysteresis : 1;
  }
  return false;
}

}  // namespace fpscope
