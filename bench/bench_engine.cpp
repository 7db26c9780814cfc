// One training step of 784-1024-1024-10 at batch 256 on the CPU backend: fp32, mixed fp16, and
// mixed fp16 recording every tensor, in the same run.
#include <benchmark/benchmark.h>

#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/synthetic_data.hpp"

namespace {

void run_steps(benchmark::State& state, fpscope::Precision precision, bool record) {
  fpscope::MlpConfig config;
  config.layer_sizes = {784, 1024, 1024, 10};
  config.precision = precision;
  config.scaler = precision == fpscope::Precision::fp32 ? fpscope::LossScalerConfig::none() : fpscope::LossScalerConfig::pytorch();
  fpscope::MlpTrainer trainer(config);
  fpscope::SyntheticClassification data(784, 10, 1);
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  data.next_batch(256, inputs, labels);
  for (auto _ : state) benchmark::DoNotOptimize(trainer.step(inputs, labels, record));
}

void BM_step_fp32(benchmark::State& state) { run_steps(state, fpscope::Precision::fp32, false); }
void BM_step_mixed_fp16(benchmark::State& state) { run_steps(state, fpscope::Precision::fp16, false); }
void BM_step_mixed_fp16_recording(benchmark::State& state) { run_steps(state, fpscope::Precision::fp16, true); }

}  // namespace

BENCHMARK(BM_step_fp32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_step_mixed_fp16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_step_mixed_fp16_recording)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
