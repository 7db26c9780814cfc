// The CUDA MLP backend against the CPU reference: losses close (cuBLAS sums in another order, so
// not bit-equal), every recorded histogram counting every element, a fault-injected step skipped
// with the master weights bit-identical, stochastic rounding reproducible from its seed and its
// saved counter. Needs a device to run; prints its verdicts.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "fpscope/gpu/cuda_mlp.hpp"
#include "fpscope/gpu/training_data.hpp"

using namespace fpscope;

namespace {

int failures = 0;
void verdict(bool ok, const char* what, double value) {
  std::printf("%s %-60s %g\n", ok ? "OK  " : "FAIL", what, value);
  failures += ok ? 0 : 1;
}

bool same_bits(const MlpTrainer::State& a, const MlpTrainer::State& b) {
  for (std::size_t l = 0; l < a.weights.size(); ++l)
    if (std::memcmp(a.weights[l].data(), b.weights[l].data(), sizeof(float) * static_cast<std::size_t>(a.weights[l].size())) != 0 ||
        std::memcmp(a.biases[l].data(), b.biases[l].data(), sizeof(float) * static_cast<std::size_t>(a.biases[l].size())) != 0)
      return false;
  return true;
}

}  // namespace

int main() {
  if (!cuda_device_available()) {
    std::printf("no CUDA device: skipping the device run (this binary compiled and linked)\n");
    return 77;
  }
  for (const Precision precision : {Precision::fp32, Precision::fp16, Precision::bf16}) {
    MlpConfig config;
    config.layer_sizes = {16, 32, 32, 10};
    config.activation = Activation::tanh;
    config.precision = precision;
    config.learning_rate = 0.05f;
    if (precision == Precision::fp32) config.scaler = LossScalerConfig::none();
    MlpTrainer cpu(config);
    CudaMlpTrainer gpu(config);
    TrainingData data("synthetic", config.layer_sizes, 1);
    Eigen::MatrixXf x;
    std::vector<int> y;
    double worst = 0;
    bool counted = true;
    for (int step = 0; step < 30; ++step) {
      data.next_batch(64, x, y);
      const StepResult a = cpu.step(x, y, true);
      const StepResult b = gpu.step(x, y, true, true);
      worst = std::max(worst, std::abs(a.loss - b.loss) / std::max(1e-12, a.loss));
      for (std::size_t t = 0; t < b.snapshot->tensors.size(); ++t)
        counted = counted && b.snapshot->tensors[t].histogram.total_count() == a.snapshot->tensors[t].histogram.total_count();
    }
    const char* name = precision == Precision::fp32 ? "fp32" : precision == Precision::fp16 ? "fp16" : "bf16";
    char what[120];
    std::snprintf(what, sizeof what, "%s: loss of 30 steps within 2e-2 of the CPU backend, maxdiff", name);
    verdict(worst < 2e-2, what, worst);
    std::snprintf(what, sizeof what, "%s: every histogram counts every element", name);
    verdict(counted, what, 0);

    const MlpTrainer::State before = gpu.state();
    gpu.inject({FaultInjection::Value::nan, 2, gpu.state().steps});
    data.next_batch(64, x, y);
    const StepResult skipped = gpu.step(x, y, true, true);
    std::snprintf(what, sizeof what, "%s: injected NaN skips the step, weights bit-identical", name);
    verdict(skipped.skipped && same_bits(before, gpu.state()), what, 0);
    std::snprintf(what, sizeof what, "%s: the NaN is in fc2's weight-gradient histogram", name);
    verdict(skipped.snapshot->tensors[7].histogram.nan_count() == 1, what, 0);
  }
  // Stochastic rounding on the device: counter-based words, so the same seed gives the same
  // bits twice, a checkpointed state resumes onto them, and another seed gives other bits.
  {
    MlpConfig config;
    config.layer_sizes = {16, 32, 32, 10};
    config.precision = Precision::fp16;
    config.rounding = RoundingMode::stochastic;
    auto run = [&](std::uint64_t seed, int steps, const MlpTrainer::State* resume_from) {
      config.seed = seed;
      CudaMlpTrainer gpu(config);
      if (resume_from != nullptr) gpu.restore(*resume_from);
      TrainingData data("synthetic", config.layer_sizes, 1);
      Eigen::MatrixXf x;
      std::vector<int> y;
      for (std::int64_t step = 0; step < gpu.state().steps; ++step) data.next_batch(64, x, y);  // the data position
      for (int step = 0; step < steps; ++step) {
        data.next_batch(64, x, y);
        gpu.step(x, y, false, false);
      }
      return gpu.state();
    };
    const MlpTrainer::State a = run(5, 20, nullptr), b = run(5, 20, nullptr), c = run(6, 20, nullptr);
    verdict(same_bits(a, b), "stochastic fp16: the same seed gives the same weights", 0);
    verdict(!same_bits(a, c), "stochastic fp16: another seed gives other weights", 0);
    const MlpTrainer::State half = run(5, 10, nullptr);
    verdict(half.stochastic_counter > 0, "stochastic fp16: the random-word counter is part of the state", static_cast<double>(half.stochastic_counter));
    verdict(same_bits(a, run(5, 10, &half)), "stochastic fp16: 10 steps, restore, 10 more = 20 steps", 0);
  }
  // fp16-pure: a skipped step re-casts no weights and draws no random words, on the device as on
  // the CPU (issue 17, item 4: the counters were a parameter count apart after one injected NaN).
  {
    MlpConfig config;
    config.layer_sizes = {16, 32, 32, 10};
    config.precision = Precision::fp16_pure;
    config.rounding = RoundingMode::stochastic;
    config.seed = 9;
    MlpTrainer cpu(config);
    CudaMlpTrainer gpu(config);
    TrainingData data("synthetic", config.layer_sizes, 1);
    Eigen::MatrixXf x;
    std::vector<int> y;
    for (int step = 0; step < 5; ++step) {
      data.next_batch(64, x, y);
      cpu.step(x, y, false);
      gpu.step(x, y, false, false);
    }
    const auto counters = [&] { return static_cast<double>(gpu.state().stochastic_counter) - static_cast<double>(cpu.state().stochastic_counter); };
    verdict(counters() == 0, "fp16-pure: the device drew as many random words as the CPU in 5 steps (difference)", counters());
    const FaultInjection fault{FaultInjection::Value::nan, 2, cpu.state().steps};
    cpu.inject(fault);
    gpu.inject(fault);
    const MlpTrainer::State before = gpu.state();
    data.next_batch(64, x, y);
    const StepResult a = cpu.step(x, y, false), b = gpu.step(x, y, false, true);
    verdict(a.skipped && b.skipped, "fp16-pure: the injected step is skipped on both", 0);
    verdict(counters() == 0, "fp16-pure: after the skipped step the counters still agree (difference)", counters());
    verdict(gpu.state().stochastic_counter >= before.stochastic_counter, "fp16-pure: the counter never goes back", 0);
  }
  std::printf("%s\n", failures == 0 ? "all OK" : "FAILURES");
  return failures == 0 ? 0 : 1;
}
