// The What-if view: the preview scale on a window of recorded gradients in every target format, with its state.
#pragma once

#include <string>


namespace fpscope::gui {

class App;

// What-if state (its hypothetical scale is the shared ScalePreview).
struct WhatIfState {
  bool selected_tensor_only = false;  // else every gradient of the step
  int window = 20;  // recorded steps the predictions and the advice sum, ending at the shown step
  std::string report;  // --report: where the formats' table ends against the view's right edge
};

void draw_what_if(App& app);

}  // namespace fpscope::gui
