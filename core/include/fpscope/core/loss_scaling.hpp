// The loss-scaling rule, once: the engine's LossScaler, its CUDA scaler-update kernel and the
// analyzer's replay of a recorded run all call apply_scaler_rule, so a scale never depends on who
// computed it. Plain data and one FPSCOPE_HD function: usable in device code.
#pragma once

#include <cstdint>
#include <limits>

#include "fpscope/core/hd.hpp"

namespace fpscope {

struct LossScalerConfig {
  enum class Kind : std::uint8_t { none, fixed, dynamic };
  Kind kind = Kind::dynamic;
  double initial_scale = 65536.0;  // torch.cuda.amp.GradScaler: 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;  // consecutive finite steps before the scale grows
  double min_scale = 0.0;               // floor of the scale; 0 for none
  int hysteresis = 1;                   // overflows tolerated before backing off (DeepSpeed)

  // (Plain data, no strings: the CUDA backend copies it to the device.)
  static LossScalerConfig none() { return {Kind::none, 1.0, 2.0, 0.5, 2000, 0.0, 1}; }
  static LossScalerConfig fixed(double scale) { return {Kind::fixed, scale, 2.0, 0.5, 2000, 0.0, 1}; }
  // PyTorch torch.cuda.amp.GradScaler defaults.
  static LossScalerConfig pytorch() { return {}; }
  // TensorFlow LossScaleOptimizer (dynamic) defaults: 2^15, doubled every 2000 finite steps,
  // halved on overflow but never below 1.
  static LossScalerConfig tensorflow() { return {Kind::dynamic, 32768.0, 2.0, 0.5, 2000, 1.0, 1}; }
  // DeepSpeed fp16 defaults: 2^16, window 1000, hysteresis 2, minimum 1.
  static LossScalerConfig deepspeed() { return {Kind::dynamic, 65536.0, 2.0, 0.5, 1000, 1.0, 2}; }
};

// The scaler's state; part of the training state (checkpointed with it).
struct LossScalerState {
  double scale = 1.0;
  std::int64_t finite_steps = 0;  // consecutive finite steps since the last growth or overflow
  int hysteresis_left = 1;
  std::int64_t skipped_steps = 0;
  friend bool operator==(const LossScalerState&, const LossScalerState&) = default;
};

// The state a run starts in.
FPSCOPE_HD inline LossScalerState initial_scaler_state(const LossScalerConfig& config) {
  LossScalerState state;
  state.scale = config.kind == LossScalerConfig::Kind::none ? 1.0 : config.initial_scale;
  state.hysteresis_left = config.hysteresis > 1 ? config.hysteresis : 1;
  return state;
}

// Advances `state` by one step; returns true when the step must be skipped.
FPSCOPE_HD inline bool apply_scaler_rule(const LossScalerConfig& config, LossScalerState& state, bool found_non_finite) {
  if (found_non_finite) ++state.skipped_steps;
  if (config.kind != LossScalerConfig::Kind::dynamic) return found_non_finite;
  if (found_non_finite) {
    state.finite_steps = 0;
    if (state.hysteresis_left > 1) {
      --state.hysteresis_left;  // DeepSpeed: tolerate, keep the scale
    } else {
      // The scale multiplies float32 values: it must stay a normal float32 number, as a growth
      // keeps it finite. Without a floor, a run that diverges halves it through the subnormals to
      // 0 (PyTorch's GradScaler does: float32 2^-150 is 0), and a scale of 0 is no scale at all.
      const double smallest = static_cast<double>(std::numeric_limits<float>::min());
      const double floor = config.min_scale > smallest ? config.min_scale : smallest;
      const double backed_off = state.scale * config.backoff_factor;
      state.scale = backed_off > floor ? backed_off : floor;
    }
    return true;
  }
  if (++state.finite_steps >= config.growth_interval) {
    const double grown = state.scale * config.growth_factor;
    // The scale multiplies float32 values: it must stay a finite float32 (GradScaler keeps it).
    if (grown <= static_cast<double>(std::numeric_limits<float>::max())) state.scale = grown;
    state.finite_steps = 0;
    state.hysteresis_left = config.hysteresis > 1 ? config.hysteresis : 1;
  }
  return false;
}

}  // namespace fpscope
