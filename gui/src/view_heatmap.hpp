// The Heatmap view: steps x binades of one tensor, with its texture and what it was built from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include "fpscope/analyzer/heatmap.hpp"

namespace fpscope::gui {

class App;

// The heatmap's texture and what it was built from.
struct HeatmapState {
  unsigned texture = 0;
  std::uint64_t built_version = ~0ull;
  std::string built_key;
  double built_at = -1;
  int columns = 0;
  HeatmapAxis axis;
  std::vector<std::uint8_t> column_held;
  std::vector<std::int64_t> column_first_step, column_last_step;
  std::vector<std::uint32_t> column_recorded;
  std::vector<double> values;  // columns x binade_count: a count, or a mean / largest count of several steps
  double top = 0;
  HeatmapColumns::Aggregate aggregate = HeatmapColumns::Aggregate::mean;  // when columns hold several steps
  int lowest_binade = 0, highest_binade = -1;  // with any count; highest < lowest when none
  // The binades shown: they only widen while the same tensor of the same run is shown, so the
  // axes hold still as the run grows and old steps are thinned.
  std::string shown_for;
  int shown_lo = 0, shown_hi = -1;
};

void draw_heatmap(App& app);

}  // namespace fpscope::gui
