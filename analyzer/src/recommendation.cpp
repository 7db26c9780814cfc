// Loss-scale recommendation and dynamic loss-scaling replay.
#include "fpscope/analyzer/recommendation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fpscope {

ScaleRecommendation recommend_scale(const ExponentHistogram& histogram, Format format, int margin_binades) {
  ScaleRecommendation result;
  const int highest = histogram.highest_binade();
  if (highest >= min_binade) result.scale_log2 = format.emax() - clamp_margin_binades(margin_binades) - highest;
  result.at_scale = analyze_range(histogram, format, result.scale_log2);
  result.unscaled = analyze_range(histogram, format, 0);
  return result;
}

int recommend_common_scale(std::span<const ExponentHistogram> histograms, Format format, int margin_binades) {
  int common = std::numeric_limits<int>::max();
  for (const ExponentHistogram& histogram : histograms)
    if (histogram.highest_binade() >= min_binade)
      common = std::min(common, recommend_scale(histogram, format, margin_binades).scale_log2);
  return common == std::numeric_limits<int>::max() ? 0 : common;
}

std::vector<ReplayedStep> replay_dynamic_scaling(std::span<const int> highest_binade_per_step, Format format,
                                                 const LossScalerConfig& config) {
  std::vector<ReplayedStep> steps;
  steps.reserve(highest_binade_per_step.size());
  LossScalerState state = initial_scaler_state(config);
  for (const int highest : highest_binade_per_step) {
    const bool overflow = highest >= min_binade && highest + static_cast<int>(std::floor(std::log2(state.scale))) > format.emax();
    steps.push_back({state.scale, overflow});
    apply_scaler_rule(config, state, overflow);
  }
  return steps;
}

}  // namespace fpscope
