// The Curves view: loss, baseline and loss scale over the steps, with its state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fpscope::gui {

class App;

// The series the Curves view draws, derived from the run's step records and the baseline's: made
// again only when those or the smoothing change, not every frame (100,000 steps of logarithms
// and smoothing were a few milliseconds of each frame).
struct CurveSeries {
  // What they were made from.
  std::string run_id;
  std::size_t step_count = 0, baseline_count = 0;
  std::int64_t first_step = 0, last_step = -1;
  double last_baseline_step = 0;
  bool baseline_beside = false;
  float smoothing = -1;
  // Every step's: the step, loss, log10 loss, smoothed loss and its log10, log2 loss scale.
  std::vector<double> steps, loss, log_loss, smooth, log_smooth, scale;
  // The steps a red tick marks: those that skipped their update or did not finish; how many did not.
  std::vector<double> marked;
  std::size_t unfinished = 0;
  // The baseline's steps up to the run's last, and its smoothed loss's log10.
  std::vector<double> baseline_steps, log_baseline;
  // The extent of the finite log10 losses (the run's and the baseline's; lo > hi where there is
  // none) and of the log2 loss scales, made with the series rather than every frame.
  double log_loss_lo = 0, log_loss_hi = -1, scale_lo = 0, scale_hi = 0;
};

// Curves state: TensorBoard's smoothing (an exponential moving average, debiased at the start).
struct CurvesState {
  float smoothing = 0.6f;  // 0: the raw values
  std::string scaling_operand;  // "fc2 output_gradient": whose FP8 amax and scale are drawn (runs with --recipe fp8-*)
  CurveSeries series;
  // Where the last frame drew the scale plot: its pixels' x from `plot_left` to `plot_right` for
  // steps 0 to `plot_steps`, y from `plot_top` to `plot_bottom` (--report tells, for tests that click).
  float plot_left = 0, plot_right = 0, plot_top = 0, plot_bottom = 0;
  double plot_steps = 0;
  // The last frame's axes: the loss plot's log10 range and the scale plot's log2 range (--report).
  double loss_axis_lo = 0, loss_axis_hi = 0, scale_axis_lo = 0, scale_axis_hi = 0;
};

void draw_curves(App& app);

}  // namespace fpscope::gui
