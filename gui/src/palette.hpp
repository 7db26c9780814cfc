// The app's colours, in one place: views draw with them and the screenshot test looks for them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace fpscope::gui {

struct Rgb {
  std::uint8_t r, g, b;
};

namespace palette {
// What a cast into the target format does to a binade: background bands and the bars over them.
inline constexpr Rgb flushed_band{74, 30, 36};
inline constexpr Rgb subnormal_band{74, 60, 22};
inline constexpr Rgb normal_band{24, 56, 38};
inline constexpr Rgb overflow_band{64, 30, 78};
inline constexpr Rgb flushed_bar{236, 84, 84};
inline constexpr Rgb subnormal_bar{242, 182, 52};
inline constexpr Rgb normal_bar{84, 204, 124};
inline constexpr Rgb overflow_bar{194, 104, 234};
// Exact zeros, and infinities and NaNs, beside the binades; the preview's outline.
inline constexpr Rgb zero_bar{150, 160, 180};
inline constexpr Rgb non_finite_bar{255, 110, 200};
inline constexpr Rgb ghost_outline{236, 236, 255};  // not the text colour: the screenshot test finds it
// Lines over the heatmap: the smallest subnormal, the smallest normal, the overflow threshold.
// Colours the ramp (heat, below) and the text never take -- magenta, cyan, red -- each over a dark
// underlay, so a line stays visible on every cell.
inline constexpr Rgb min_subnormal_line{255, 80, 255};
inline constexpr Rgb min_normal_line{90, 240, 255};
inline constexpr Rgb overflow_line{255, 40, 40};
inline constexpr Rgb line_underlay{0, 0, 0};
// Bit cells of the float inspector.
inline constexpr Rgb sign_cell{58, 110, 200};
inline constexpr Rgb exponent_cell{40, 150, 90};
inline constexpr Rgb mantissa_cell{190, 90, 40};
// Curves.
inline constexpr Rgb loss_line{92, 172, 252};
inline constexpr Rgb baseline_line{255, 128, 160};
inline constexpr Rgb scale_line{250, 204, 84};
// A GEMM operand's FP8 scaling in Curves: its amax each step and the scale it was cast with.
inline constexpr Rgb amax_line{240, 132, 72};
inline constexpr Rgb fp8_scale_line{96, 220, 196};
inline constexpr Rgb skipped_mark{236, 60, 60};
// The training state swatch.
inline constexpr Rgb state_idle{90, 90, 90};
inline constexpr Rgb state_running{46, 170, 80};
inline constexpr Rgb state_paused{220, 150, 30};
inline constexpr Rgb state_finished{60, 120, 220};
inline constexpr Rgb state_failed{210, 50, 50};
inline constexpr Rgb heat_empty{16, 16, 22};
// Axes, tick labels and text drawn into plots.
inline constexpr Rgb axis_line{150, 150, 150};
inline constexpr Rgb label_text{200, 200, 200};
// The Training panel's line on what to do next (not a bar colour: the screenshot tests count those).
inline constexpr Rgb hint_text{250, 222, 140};
// Error messages in the panels.
inline constexpr Rgb error_text{240, 110, 110};

// The heatmap's colour ramp, t in (0, 1]: dark blue through teal and green to yellow (our own
// piecewise-linear ramp; evenly spaced stops keep it readable in greyscale too).
inline Rgb heat(double t) {
  static constexpr Rgb stops[] = {{30, 24, 90}, {36, 80, 150}, {30, 140, 140}, {90, 190, 90}, {250, 230, 60}};
  t = std::clamp(t, 0.0, 1.0) * 4.0;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  auto mix = [f](std::uint8_t a, std::uint8_t b) { return static_cast<std::uint8_t>(std::lround(a + (b - a) * f)); };
  return {mix(stops[i].r, stops[i + 1].r), mix(stops[i].g, stops[i + 1].g), mix(stops[i].b, stops[i + 1].b)};
}
}  // namespace palette

}  // namespace fpscope::gui
