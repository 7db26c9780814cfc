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
  // Steps come in order (a crafted log's that do not still land in a column: clamped); the span
  // in 128 bits, as two 64-bit steps may be 2^64 apart.
  out.axis.first = steps.front().step;
  const __int128 span = static_cast<__int128>(steps.back().step) - out.axis.first + 1;
  out.axis.span = static_cast<std::int64_t>(std::clamp<__int128>(span, 1, std::numeric_limits<std::int64_t>::max()));
  const std::size_t columns = std::max<std::size_t>(1, std::min(static_cast<std::size_t>(std::max<std::int64_t>(1, out.axis.span)), max_columns));
  out.histograms.assign(columns, ExponentHistogram{});
  out.first_step.assign(columns, 0);
  out.last_step.assign(columns, 0);
  out.steps.assign(columns, 0);
  out.recorded.assign(columns, 0);
  out.maxima.assign(columns, ExponentHistogram{});
  out.held.assign(columns, 0);
  out.axis.columns = columns;
  for (std::size_t i = 0; i < n; ++i) {
    // In 128 bits: a crafted log's steps span up to 2^63, times up to max_columns.
    const auto offset = static_cast<unsigned __int128>(std::max<__int128>(0, static_cast<__int128>(steps[i].step) - out.axis.first));
    const auto column = static_cast<std::size_t>(std::min<unsigned __int128>(columns - 1, offset * columns / static_cast<unsigned __int128>(out.axis.span)));
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
  for (std::size_t c = 1; c < columns; ++c) {
    if (out.steps[c] != 0) continue;
    out.held[c] = 1;
    out.histograms[c] = out.histograms[c - 1];
    out.maxima[c] = out.maxima[c - 1];
    out.first_step[c] = out.first_step[c - 1];
    out.last_step[c] = out.last_step[c - 1];
    out.steps[c] = out.steps[c - 1];
    out.recorded[c] = out.recorded[c - 1];
  }
  return out;
}

std::pair<std::int64_t, std::int64_t> HeatmapAxis::covered_steps(std::size_t column) const {
  const auto columns = static_cast<unsigned __int128>(std::max<std::size_t>(1, this->columns));
  const auto at = [&](std::size_t c) {  // the first step s with (s - first) * columns / span >= c
    return first + static_cast<std::int64_t>((static_cast<unsigned __int128>(c) * static_cast<unsigned __int128>(span) + columns - 1) / columns);
  };
  return {at(column), at(column + 1)};
}

double HeatmapColumns::value(std::size_t column, int binade, Aggregate aggregate) const {
  if (aggregate == Aggregate::max) return static_cast<double>(maxima.at(column).count(binade));
  const std::uint32_t n = recorded.at(column);
  return n == 0 ? 0.0 : static_cast<double>(histograms.at(column).count(binade)) / n;
}

}  // namespace fpscope
