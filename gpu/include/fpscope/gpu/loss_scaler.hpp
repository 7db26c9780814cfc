// LossScaler: the training loop's scaler over the one rule in core/loss_scaling.hpp (none, static, and
// dynamic with PyTorch GradScaler's, TensorFlow's or DeepSpeed's settings).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fpscope/core/loss_scaling.hpp"

namespace fpscope {

// A positive factor that float32 holds, as fpscope train and fpscope-gui both read one (a loss
// scale, a loss weight): a number (1024, 0.0009765625, 6.5e4) or a power of two 2^k (2^10, 2^-10).
// Empty when the text is neither.
std::optional<double> parse_scale_factor(std::string_view text);
// The loss scaling a user names: "none", "dynamic" (GradScaler's rule) or a factor as above
// (static scaling). Throws std::invalid_argument naming the text.
LossScalerConfig parse_loss_scale(std::string_view text);
// "none", "static", "dynamic": the kinds as menus name them.
inline constexpr LossScalerConfig::Kind all_scaling_kinds[] = {LossScalerConfig::Kind::none, LossScalerConfig::Kind::fixed,
                                                               LossScalerConfig::Kind::dynamic};
std::string scaling_kind_name(LossScalerConfig::Kind kind);

// "none", "fixed 1024", "dynamic (pytorch)"-style description for run log headers.
std::string describe(const LossScalerConfig& config);

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
