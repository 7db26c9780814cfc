// Choosing a loss scale from histograms, and replaying what dynamic loss scaling would have done.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fpscope/analyzer/range_analysis.hpp"
#include "fpscope/core/loss_scaling.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/core/format.hpp"

namespace fpscope {

// Micikevicius et al. 2018, section 3.2: pick the scale so that the largest magnitude times the
// scale stays below the format's overflow threshold; any larger scale risks overflow and any
// smaller one flushes more small values to zero. Here: the largest 2^k with
// highest_binade + k <= emax - margin_binades. A histogram without nonzero finite values gets
// k = 0.
struct ScaleRecommendation {
  int scale_log2 = 0;
  RangeReport at_scale;    // the histogram's fate at 2^scale_log2
  RangeReport unscaled;    // ... and at 2^0, for comparison
};

ScaleRecommendation recommend_scale(const ExponentHistogram& histogram, Format format, int margin_binades = 1);

// One scale for several tensors (all the gradients of a run): the smallest of their
// recommendations, so that none of them overflows.
int recommend_common_scale(std::span<const ExponentHistogram> histograms, Format format, int margin_binades = 1);

struct ReplayedStep {
  double scale = 0;        // the scale the step ran with
  bool overflow = false;   // predicted: skipped
};

// Replays a loss scaler (the engine's own rule, core/loss_scaling.hpp: GradScaler's defaults
// unless told otherwise) over a run's recorded gradient maxima (the highest nonzero binade of the
// unscaled gradients at each step; below min_binade for a step without any). Overflow is
// predicted at binade granularity: highest_binade + log2(scale) > emax.
std::vector<ReplayedStep> replay_dynamic_scaling(std::span<const int> highest_binade_per_step, Format format,
                                                 const LossScalerConfig& config = LossScalerConfig::pytorch());

}  // namespace fpscope
