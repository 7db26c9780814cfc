// The steps x binades picture of one tensor: counts per (column of steps, binade), and its colours.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fpscope/analyzer/heatmap.hpp"
#include "fpscope/snapshot/snapshot.hpp"

namespace fpscope::gui {

// Up to max_columns columns over the steps' range (heatmap_columns); a column of several steps
// shows the mean or the largest count per binade of them (HeatmapColumns::Aggregate), one no
// recorded step falls in the column before it (`column_held`).
struct HeatmapImage {
  int columns = 0;
  HeatmapAxis axis;
  std::vector<std::uint8_t> column_held;
  std::vector<std::int64_t> column_first_step, column_last_step;
  std::vector<std::uint32_t> column_recorded;  // steps that recorded the tensor, per column
  std::vector<double> values;  // column-major: values[column * binade_count + (binade - min_binade)]
  double top = 0;              // the largest value: the colour bar's top
  std::vector<std::uint32_t> rgba;  // row-major, binade_count rows, top row = max_binade; RGBA8 little-endian
};

HeatmapImage build_heatmap(const std::vector<std::shared_ptr<const Snapshot>>& snapshots, const std::string& tensor,
                           TensorKind kind, int max_columns, HeatmapColumns::Aggregate aggregate);

// A value's colour: log1p(value) / log1p(top) along the ramp; never the empty colour for value > 0.
double heat_position(double value, double top);

}  // namespace fpscope::gui
