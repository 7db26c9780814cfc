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
                                                 const DynamicScalerSettings& settings) {
  std::vector<ReplayedStep> steps;
  steps.reserve(highest_binade_per_step.size());
  double scale = settings.initial_scale;
  int finite_in_a_row = 0;
  for (const int highest : highest_binade_per_step) {
    const bool overflow = highest >= min_binade && highest + static_cast<int>(std::floor(std::log2(scale))) > format.emax();
    steps.push_back({scale, overflow});
    if (overflow) {
      scale = std::max(scale * settings.backoff_factor, settings.min_scale);
      finite_in_a_row = 0;
    } else if (++finite_in_a_row == settings.growth_interval) {
      const double grown = scale * settings.growth_factor;
      if (std::isfinite(grown)) scale = grown;  // GradScaler keeps the scale when growth overflows
      finite_in_a_row = 0;
    }
  }
  return steps;
}

}  // namespace fpscope
