// Summing a tensor's recorded steps into heatmap columns.
#include "fpscope/analyzer/heatmap.hpp"

#include <algorithm>
#include <limits>

namespace fpscope {

namespace {

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<std::uint64_t>::max() : sum;
}

}  // namespace

HeatmapColumns heatmap_columns(std::span<const StepHistogram> steps, std::size_t max_columns) {
  HeatmapColumns out;
  const std::size_t n = steps.size();
  if (n == 0) return out;
  const std::size_t columns = std::max<std::size_t>(1, std::min(n, max_columns));
  out.histograms.assign(columns, ExponentHistogram{});
  out.first_step.assign(columns, 0);
  out.last_step.assign(columns, 0);
  out.steps.assign(columns, 0);
  out.recorded.assign(columns, 0);
  out.maxima.assign(columns, ExponentHistogram{});
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t column = i * columns / n;
    if (out.steps[column]++ == 0) out.first_step[column] = steps[i].step;
    out.last_step[column] = steps[i].step;
    if (steps[i].histogram == nullptr) continue;
    ++out.recorded[column];
    // A picture, not a count: a sum past 2^64 (only a crafted log holds one) saturates.
    ExponentHistogram& h = out.histograms[column];
    ExponentHistogram& top = out.maxima[column];
    const ExponentHistogram& add = *steps[i].histogram;
    for (int b = min_binade; b <= max_binade; ++b) {
      h.set_count(b, saturating_add(h.count(b), add.count(b)));
      top.set_count(b, std::max(top.count(b), add.count(b)));
    }
    h.set_specials(saturating_add(h.zero_count(), add.zero_count()), saturating_add(h.infinity_count(), add.infinity_count()),
                   saturating_add(h.nan_count(), add.nan_count()));
  }
  return out;
}

double HeatmapColumns::value(std::size_t column, int binade, Aggregate aggregate) const {
  if (aggregate == Aggregate::max) return static_cast<double>(maxima.at(column).count(binade));
  const std::uint32_t n = recorded.at(column);
  return n == 0 ? 0.0 : static_cast<double>(histograms.at(column).count(binade)) / n;
}

}  // namespace fpscope
