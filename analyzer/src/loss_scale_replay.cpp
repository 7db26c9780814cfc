// Dynamic loss-scaling replay.
#include "fpscope/analyzer/loss_scale_replay.hpp"

#include <algorithm>
#include <cmath>

#include "fpscope/core/exponent_histogram.hpp"

namespace fpscope {

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
