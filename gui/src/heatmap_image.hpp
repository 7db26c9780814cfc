// The steps x binades picture of one tensor: counts per (column of steps, binade), and its colours.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fpscope/snapshot/snapshot.hpp"

namespace fpscope::gui {

// Up to max_columns columns; when there are more steps, each column sums consecutive steps.
struct HeatmapImage {
  int columns = 0;
  std::vector<std::int64_t> column_first_step, column_last_step;
  std::vector<std::uint64_t> counts;  // column-major: counts[column * binade_count + (binade - min_binade)]
  std::vector<std::uint32_t> rgba;    // row-major, binade_count rows, top row = max_binade; RGBA8 little-endian
};

HeatmapImage build_heatmap(const std::vector<std::shared_ptr<const Snapshot>>& snapshots, const std::string& tensor,
                           TensorKind kind, int max_columns);

}  // namespace fpscope::gui
