// Summing snapshots into heatmap columns and colouring counts on a log scale.
#include "heatmap_image.hpp"

#include <algorithm>
#include <cmath>

#include "palette.hpp"

namespace fpscope::gui {

namespace {
std::uint32_t pack(Rgb c) { return static_cast<std::uint32_t>(c.r) | static_cast<std::uint32_t>(c.g) << 8 | static_cast<std::uint32_t>(c.b) << 16 | 0xFF000000u; }
}  // namespace

HeatmapImage build_heatmap(const std::vector<std::shared_ptr<const Snapshot>>& snapshots, const std::string& tensor,
                           TensorKind kind, int max_columns) {
  HeatmapImage image;
  const std::size_t n = snapshots.size();
  if (n == 0) return image;
  image.columns = static_cast<int>(std::min<std::size_t>(n, static_cast<std::size_t>(max_columns)));
  const auto columns = static_cast<std::size_t>(image.columns);
  image.counts.assign(columns * binade_count, 0);
  image.column_first_step.assign(columns, -1);
  image.column_last_step.assign(columns, -1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t column = i * columns / n;
    const Snapshot& s = *snapshots[i];
    if (image.column_first_step[column] < 0) image.column_first_step[column] = s.step;
    image.column_last_step[column] = s.step;
    for (const TensorRecord& t : s.tensors) {
      if (t.kind != kind || t.name != tensor) continue;
      std::uint64_t* out = image.counts.data() + column * binade_count;
      const auto& bins = t.histogram.bins();
      for (std::size_t b = 0; b < bins.size(); ++b) out[b] += bins[b];
      break;
    }
  }
  const std::uint64_t top = *std::max_element(image.counts.begin(), image.counts.end());
  const double log_top = std::log1p(static_cast<double>(top));
  image.rgba.assign(columns * binade_count, pack(palette::heat_empty));
  for (std::size_t column = 0; column < columns; ++column) {
    for (std::size_t b = 0; b < binade_count; ++b) {
      const std::uint64_t count = image.counts[column * binade_count + b];
      if (count == 0) continue;
      // Never the empty colour: the smallest count still gets the ramp's first stop.
      const double t = std::max(1e-6, std::log1p(static_cast<double>(count)) / log_top);
      image.rgba[(binade_count - 1 - b) * columns + column] = pack(palette::heat(t));
    }
  }
  return image;
}

}  // namespace fpscope::gui
