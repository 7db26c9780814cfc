// The counterfactual step (the loss-scale preview) on the device under test: the next step again at
// another loss scale, applying nothing, is bit for bit the step that Apply at that scale gives on
// the same device -- a trainer restored from the state before it, its scaler fixed at the scale --
// and the run is left as it was (weights, optimizer, scaler, stochastic counter, step count).
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../gpu/trainers.hpp"
#include "fpscope/gpu/training_session.hpp"
#include "verdict.hpp"

namespace fpscope::test {

// `make` gives a fresh trainer of the run's config on the device under test; `run` is at the step
// whose batch is (inputs, labels).
template <typename Make>
void check_counterfactual_on_device(const std::string& label, TrainerBackend& run, const LossScalerConfig& running_scaler, Make make,
                                    const Eigen::MatrixXf& inputs, const std::vector<int>& labels) {
  const TrainerState before = run.state();
  bool same = true, untouched = true, skips = false;
  for (const double scale : {1.0, 0x1p10, 0x1p20, 0x1p40}) {
    const StepResult preview = counterfactual_step(run, running_scaler, inputs, labels, scale);
    const std::unique_ptr<TrainerBackend> applied = make();
    applied->restore(before);
    applied->reconfigure_scaler(LossScalerConfig::fixed(scale));
    const StepResult expected = applied->step(inputs, labels, true, true);
    same = same && preview.snapshot && expected.snapshot && *preview.snapshot == *expected.snapshot &&
           std::memcmp(&preview.loss, &expected.loss, sizeof preview.loss) == 0 && preview.skipped == expected.skipped && preview.loss_scale == scale;
    skips = skips || preview.skipped;
    untouched = untouched && testing::same_state(run.state(), before);
  }
  verdict(same, label + ": the counterfactual step at 2^0, 2^10, 2^20, 2^40 is, bit for bit, the step Apply gives");
  verdict(untouched, label + ": the counterfactual steps leave the run as it was");
  // fp16's range ends at 65504: 2^40 overflows its gradients. bf16's is float32's: nothing does.
  const bool fp16_range = run.format().exponent_bits == 5;
  verdict(skips == fp16_range, label + (fp16_range ? ": a scale overflows fp16 and skips" : ": no scale overflows bf16"));
}

}  // namespace fpscope::test
