// Summing snapshots into heatmap columns and colouring counts on a log scale.
#include "heatmap_image.hpp"

#include <algorithm>
#include <cmath>

#include "fpscope/analyzer/heatmap.hpp"
#include "palette.hpp"

namespace fpscope::gui {

namespace {
std::uint32_t pack(Rgb c) { return static_cast<std::uint32_t>(c.r) | static_cast<std::uint32_t>(c.g) << 8 | static_cast<std::uint32_t>(c.b) << 16 | 0xFF000000u; }
}  // namespace

double heat_position(double value, double top) { return std::max(1e-6, std::log1p(value) / std::log1p(std::max(top, 1.0))); }

HeatmapImage build_heatmap(const std::vector<std::shared_ptr<const Snapshot>>& snapshots, const std::string& tensor,
                           TensorKind kind, int max_columns, HeatmapColumns::Aggregate aggregate) {
  HeatmapImage image;
  std::vector<StepHistogram> steps;
  steps.reserve(snapshots.size());
  for (const auto& s : snapshots) {
    const ExponentHistogram* found = nullptr;
    for (const TensorRecord& t : s->tensors)
      if (t.kind == kind && t.name == tensor) {
        found = &t.histogram;
        break;
      }
    steps.push_back({s->step, found});
  }
  const HeatmapColumns heat = heatmap_columns(steps, static_cast<std::size_t>(std::max(1, max_columns)));
  if (heat.size() == 0) return image;
  image.columns = static_cast<int>(heat.size());
  const std::size_t columns = heat.size();
  image.axis = heat.axis;
  image.column_held = heat.held;
  image.column_first_step = heat.first_step;
  image.column_last_step = heat.last_step;
  image.column_recorded = heat.recorded;
  image.values.assign(columns * binade_count, 0.0);
  for (std::size_t column = 0; column < columns; ++column)
    for (int b = min_binade; b <= max_binade; ++b) {
      const double v = heat.value(column, b, aggregate);
      image.values[column * binade_count + static_cast<std::size_t>(b - min_binade)] = v;
      image.top = std::max(image.top, v);
    }
  image.rgba.assign(columns * binade_count, pack(palette::heat_empty));
  for (std::size_t column = 0; column < columns; ++column) {
    for (std::size_t b = 0; b < binade_count; ++b) {
      const double v = image.values[column * binade_count + b];
      if (v == 0) continue;
      image.rgba[(binade_count - 1 - b) * columns + column] = pack(palette::heat(heat_position(v, image.top)));
    }
  }
  return image;
}

}  // namespace fpscope::gui
