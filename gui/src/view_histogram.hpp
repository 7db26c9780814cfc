// The Histogram view: one step's exponent histogram over a format's regions, with its state.
#pragma once

#include <optional>
#include <utility>

namespace fpscope::gui {

class App;

// Histogram view state.
struct HistogramState {
  bool log_counts = true;
  // The user's zoom and pan: the binades shown, [first, last]; unset, the format's window. Wheel
  // zooms around the pointer, a drag pans, a double-click goes back to the format's window.
  std::optional<std::pair<int, int>> zoom;
  float pan_remainder = 0;  // a drag's part of a binade not yet applied
  bool table_scrolls = false;  // the regions table was wider than the view last frame
  // Where the last frame drew the plot (for --report and the screenshot tests): its screen x range
  // and the binades it spans.
  struct Geometry {
    float x_min = 0, x_max = 0;
    int binade_lo = 0, binade_end = 0;  // [binade_lo, binade_end) across x_min .. x_max
  } geometry;
};

void draw_histogram(App& app);

}  // namespace fpscope::gui
