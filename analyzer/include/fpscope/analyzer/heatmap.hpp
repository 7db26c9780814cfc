// A steps x binades heatmap's data: one tensor's histograms over a run, in columns of consecutive
// steps. The app's texture and export's SVG both draw from it; neither bins on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "fpscope/core/exponent_histogram.hpp"

namespace fpscope {

// One recorded step of the tensor; `histogram` is null where that step did not record it.
struct StepHistogram {
  std::int64_t step = 0;
  const ExponentHistogram* histogram = nullptr;
};

// Where a heatmap's columns sit on the step axis: `columns` columns over the steps
// [first, first + span), step s in column (s - first) * columns / span.
struct HeatmapAxis {
  std::int64_t first = 0, span = 0;
  std::size_t columns = 0;
  // The steps column `column` covers, [begin, end).
  std::pair<std::int64_t, std::int64_t> covered_steps(std::size_t column) const;
};

struct HeatmapColumns {
  std::vector<ExponentHistogram> histograms;  // each column's counts, summed (saturating at 2^64 - 1)
  std::vector<std::int64_t> first_step, last_step;
  std::vector<std::uint32_t> steps;  // recorded steps summed into each column
  std::vector<std::uint32_t> recorded;  // of those, the steps that recorded this tensor
  std::vector<ExponentHistogram> maxima;  // each column's largest count per binade over its steps
  // Columns no recorded step falls in (a run recorded every N steps, or thinned): each holds the
  // column before it (its counts and steps), so the picture has no gaps; 1 where held.
  std::vector<std::uint8_t> held;
  HeatmapAxis axis;
  std::size_t size() const { return histograms.size(); }
  // What a column shows per binade when it holds several steps: the mean over the steps that
  // recorded the tensor (sum / recorded; even columns of 2 and 3 steps then look alike, not
  // striped), or the largest.
  enum class Aggregate : std::uint8_t { mean, max };
  double value(std::size_t column, int binade, Aggregate aggregate) const;
};

// Columns over the steps' range, in step order: at most max_columns and none narrower than one
// step (at least one column when there are steps); step s of the range [first, first + span) goes
// to column (s - first) * columns / span, so a column's place on a step axis is its steps' place,
// however unevenly the steps were recorded or thinned.
HeatmapColumns heatmap_columns(std::span<const StepHistogram> steps, std::size_t max_columns);

}  // namespace fpscope
