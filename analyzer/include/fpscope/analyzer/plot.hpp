// Plots without a display: SVG of a histogram against a format's range, and of steps x binades.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/core/format.hpp"

namespace fpscope {

struct PlotOptions {
  Format format;           // whose ranges shade the plot
  int scale_log2 = 0;      // the values are multiplied by 2^scale_log2 before the cast
  std::string title;
  // What the values carry, for the subtitle ("at the scales the run recorded", "gradients at loss
  // scale 2^10"); empty: "values scaled by 2^scale_log2". And a note under the plot (as_stored).
  std::string scale_text;
  std::string note;
  // Binades the x-axis must span at least (first, last), beside the data's and the format's: two
  // plots given the same span share their axis (a before/after pair). Never hides data.
  std::optional<std::pair<int, int>> binades;
  // Why `format`, where it is neither the run's own nor asked for, for the subtitle after its
  // name ("the default: the run trained in float32"); empty: nothing said.
  std::string format_note;
};

// Bars: share of the values per binade (x: log2|x| of the unscaled values). Behind them the
// format's regions after scaling: flushed to zero, subnormal, normal, overflow, each with its
// count and share in the legend (range_analysis.hpp).
std::string histogram_svg(const ExponentHistogram& histogram, const PlotOptions& options);

// One column per recorded step (merged to at most 600 columns), one row per binade, shade by
// log count; lines mark the format's smallest subnormal, smallest normal and largest binade.
std::string heatmap_svg(const std::vector<std::pair<std::int64_t, ExponentHistogram>>& steps, const PlotOptions& options);

}  // namespace fpscope
