// The Curves view: loss, baseline and loss scale over the steps, with its state.
#pragma once

#include <string>

namespace fpscope::gui {

class App;

// Curves state: TensorBoard's smoothing (an exponential moving average, debiased at the start).
struct CurvesState {
  float smoothing = 0.6f;  // 0: the raw values
  std::string scaling_operand;  // "fc2 output_gradient": whose FP8 amax and scale are drawn (runs with --recipe fp8-*)
};

void draw_curves(App& app);

}  // namespace fpscope::gui
