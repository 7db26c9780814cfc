// The loss-scale slider's range and the rule its powers of two are read by; the Training view, the
// preview and the command line share them.
#pragma once

#include <cmath>
#include <optional>

namespace fpscope::gui {

// The loss-scale slider: 2^min .. 2^max, wide enough for what runs reach and what the advice says
// (a dynamic scaler passes 2^31 on the demo; fp16 advice reaches 2^36); a static scale given on
// the command line must lie in it.
inline constexpr int slider_min_scale_log2 = -16;
inline constexpr int slider_max_scale_log2 = 48;
// A value for one of the app's power-of-two sliders: its k when `value` is exactly 2^k with
// lo <= k <= hi (the slider's range).
inline std::optional<int> slider_power(std::optional<double> value, int lo, int hi) {
  int exponent = 0;
  if (!value || std::frexp(*value, &exponent) != 0.5 || exponent - 1 < lo || exponent - 1 > hi) return std::nullopt;
  return exponent - 1;
}

}  // namespace fpscope::gui
