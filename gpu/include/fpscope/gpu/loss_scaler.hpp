// Loss scaling: none, static, and dynamic with PyTorch GradScaler's, TensorFlow's or DeepSpeed's rules.
#pragma once

#include <cstdint>
#include <string>

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

// "none", "fixed 1024", "dynamic (pytorch)"-style description for run log headers.
std::string describe(const LossScalerConfig& config);

// The scaler's state; part of the training state (checkpointed with it).
struct LossScalerState {
  double scale = 1.0;
  std::int64_t finite_steps = 0;  // consecutive finite steps since the last growth or overflow
  int hysteresis_left = 1;
  std::int64_t skipped_steps = 0;
  friend bool operator==(const LossScalerState&, const LossScalerState&) = default;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& config = LossScalerConfig::pytorch());
  double scale() const { return state_.scale; }
  const LossScalerState& state() const { return state_; }
  void restore(const LossScalerState& state) { state_ = state; }
  const LossScalerConfig& config() const { return config_; }
  // Sets the scale directly (the app's slider); the growth count starts over.
  void set_scale(double scale);
  // Switches to another rule mid-run (the app's "static" / "dynamic" switch): the scale starts
  // at the new config's initial scale, counters start over; the skipped-step total is kept.
  void reconfigure(const LossScalerConfig& config);

  // After a backward pass: `found_non_finite` when any gradient is inf or NaN. Returns true
  // when the optimizer step must be skipped. Dynamic scaling then follows the config's rule.
  bool update(bool found_non_finite);

 private:
  LossScalerConfig config_;
  LossScalerState state_;
};

}  // namespace fpscope
