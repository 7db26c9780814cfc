// One training step of 784-1024-1024-10 at batch 256 on the CPU backend: fp32, mixed fp16, and
// mixed fp16 recording every tensor, in the same run. Then the recorded cast on one 1024x1024
// tensor beside its parts: the plain cast (round_f32), the histogram alone.
#include <benchmark/benchmark.h>

#include <random>

#include "fpscope/core/bulk.hpp"
#include "fpscope/gpu/cast_record.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/synthetic_data.hpp"

namespace {

void run_steps(benchmark::State& state, fpscope::Precision precision, bool record) {
  fpscope::TrainingConfig config;
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

// A weight-gradient-shaped tensor: normal values over some 30 binades, some of them below fp16's.
const std::vector<float>& tensor() {
  static const std::vector<float> values = [] {
    std::vector<float> v(1 << 20);
    std::mt19937 rng(4);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& x : v) x = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 30) - 32);
    return v;
  }();
  return values;
}

void BM_tensor_round_f32_fp16(benchmark::State& state) {
  std::vector<float> out(tensor().size());
  fpscope::Context ctx;
  for (auto _ : state) {
    fpscope::round_f32(fpscope::formats::fp16, tensor(), out, ctx);
    benchmark::DoNotOptimize(out.data());
  }
}
void BM_tensor_histogram(benchmark::State& state) {
  for (auto _ : state) {
    fpscope::ExponentHistogram h;
    h.add(tensor());
    benchmark::DoNotOptimize(h);
  }
}
void BM_tensor_cast_and_record_fp16(benchmark::State& state) {
  std::vector<float> out(tensor().size());
  fpscope::Context ctx;
  for (auto _ : state) {
    fpscope::ExponentHistogram h;
    fpscope::CastCounts counts;
    fpscope::cast_and_record(fpscope::formats::fp16, tensor(), out, ctx, h, counts);
    benchmark::DoNotOptimize(h);
    benchmark::DoNotOptimize(out.data());
  }
}

}  // namespace

BENCHMARK(BM_tensor_round_f32_fp16)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_tensor_histogram)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_tensor_cast_and_record_fp16)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_step_fp32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_step_mixed_fp16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_step_mixed_fp16_recording)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
