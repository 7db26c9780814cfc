// A steps x binades heatmap's data: one tensor's histograms over a run, in columns of consecutive
// steps. The app's texture and export's SVG both draw from it; neither bins on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fpscope/core/exponent_histogram.hpp"

namespace fpscope {

// One recorded step of the tensor; `histogram` is null where that step did not record it.
struct StepHistogram {
  std::int64_t step = 0;
  const ExponentHistogram* histogram = nullptr;
};

struct HeatmapColumns {
  std::vector<ExponentHistogram> histograms;  // each column's counts, summed (saturating at 2^64 - 1)
  std::vector<std::int64_t> first_step, last_step;
  std::vector<std::uint32_t> steps;  // recorded steps summed into each column
  std::vector<std::uint32_t> recorded;  // of those, the steps that recorded this tensor
  std::vector<ExponentHistogram> maxima;  // each column's largest count per binade over its steps
  std::size_t size() const { return histograms.size(); }
  // What a column shows per binade when it holds several steps: the mean over the steps that
  // recorded the tensor (sum / recorded; even columns of 2 and 3 steps then look alike, not
  // striped), or the largest.
  enum class Aggregate : std::uint8_t { mean, max };
  double value(std::size_t column, int binade, Aggregate aggregate) const;
};

// At most max_columns columns (at least one when there are steps); step i of n goes to column
// i * columns / n, so every column holds floor or ceil of n / columns steps.
HeatmapColumns heatmap_columns(std::span<const StepHistogram> steps, std::size_t max_columns);

}  // namespace fpscope
