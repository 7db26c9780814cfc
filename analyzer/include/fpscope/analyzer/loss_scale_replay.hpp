// Replaying what dynamic loss scaling would have done over a run's recorded gradients. The advice
// which loss scale to use is scale_semantics.hpp's recommend_loss_scale.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fpscope/core/loss_scaling.hpp"
#include "fpscope/core/format.hpp"

namespace fpscope {

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
