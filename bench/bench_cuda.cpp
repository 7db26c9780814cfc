// The CUDA backend on a GPU, each row beside its baseline in the same run.
//   - The recorded cast (histogram + cast to fp16 + outcome counts) over 256 MiB of float32, beside
//     a device-to-device copy of the same 256 MiB: both read 256 MiB and write 256 MiB, so the
//     copy's time over the cast's is the share of the copy's bandwidth the cast reaches. The
//     histogram alone (reads only) beside the same copy.
//   - One MLP training step (mixed fp16, dynamic loss scaling; the batch copied from host memory
//     every step, as a training loop does), unrecorded and recording every tensor every step.
//   - One GPT training step (4 layers x 256 wide, 4 heads, context 128, vocab 256; mixed fp16,
//     dynamic loss scaling, AdamW), the same three ways.
//     bench/bench_cuda_torch.py times the same model in PyTorch (torch.autocast + GradScaler) on
//     the same GPU and prints the ratios.
// Times come from CUDA events (cast, copy) or the host clock around a synchronised run of steps;
// without a device the suite says so and exits 0.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/gpu/cuda_kernels.hpp"
#include "fpscope/gpu/cuda_device_ops.hpp"
#include "fpscope/gpu/cuda_mlp.hpp"
#include "fpscope/gpu/device_gpt.hpp"
#include "fpscope/gpu/synthetic_data.hpp"

namespace {

void check(cudaError_t error) {
  if (error != cudaSuccess) throw std::runtime_error(cudaGetErrorString(error));
}

constexpr std::size_t tensor_elements = std::size_t{64} << 20;  // 64 Mi floats = 256 MiB

// Two 256 MiB device buffers, the input shaped like a gradient tensor (normal values over some 30
// binades, some below fp16's), made once.
struct Buffers {
  float* in = nullptr;
  float* out = nullptr;
  unsigned long long* records = nullptr;  // 280 bins + 3 counts
  Buffers() {
    check(cudaMalloc(reinterpret_cast<void**>(&in), tensor_elements * sizeof(float)));
    check(cudaMalloc(reinterpret_cast<void**>(&out), tensor_elements * sizeof(float)));
    check(cudaMalloc(reinterpret_cast<void**>(&records), (fpscope::bin_slot_count + 3) * sizeof(unsigned long long)));
    std::vector<float> host(tensor_elements);
    std::mt19937 rng(4);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& x : host) x = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 30) - 32);
    check(cudaMemcpy(in, host.data(), tensor_elements * sizeof(float), cudaMemcpyHostToDevice));
  }
};
Buffers& buffers() {
  static Buffers b;
  return b;
}

// Times `work` with CUDA events, as manual time.
template <typename Work>
void time_with_events(benchmark::State& state, Work work) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start));
  check(cudaEventCreate(&stop));
  work();  // warm-up
  check(cudaDeviceSynchronize());
  for (auto _ : state) {
    check(cudaEventRecord(start));
    work();
    check(cudaEventRecord(stop));
    check(cudaEventSynchronize(stop));
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(ms / 1e3);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(2 * tensor_elements * sizeof(float)));
  check(cudaEventDestroy(start));
  check(cudaEventDestroy(stop));
}

void BM_device_copy_256MiB(benchmark::State& state) {
  Buffers& b = buffers();
  time_with_events(state, [&] { check(cudaMemcpyAsync(b.out, b.in, tensor_elements * sizeof(float), cudaMemcpyDeviceToDevice)); });
}

void BM_cast_record_fp16_256MiB(benchmark::State& state) {
  Buffers& b = buffers();
  const auto mode = static_cast<fpscope::RoundingMode>(state.range(0));
  time_with_events(state, [&] {
    fpscope::cuda::cast_and_record(b.in, b.out, tensor_elements, false, mode, {b.records, b.records + fpscope::bin_slot_count});
  });
  state.SetLabel(fpscope::rounding_mode_name(mode));
}

void BM_histogram_256MiB(benchmark::State& state) {  // reads only: half the copy's bytes
  Buffers& b = buffers();
  time_with_events(state, [&] { fpscope::cuda::record_histogram(b.in, tensor_elements, {b.records}); });
}

// Steps per timed iteration. An iteration's manual time is one step's (the iteration's over this),
// so the step benchmarks' MinTime is 0.2 s of stepping over this many: a MinTime of manual time
// alone would count a twentieth (MLP) or a tenth (GPT) of the wall time, and the suite must fit a
// short device session.
constexpr int mlp_steps_per_iteration = 20, gpt_steps_per_iteration = 10;
constexpr double stepping_seconds = 0.2;

// One training step of an MLP: `width` hidden units in two hidden layers, batch `batch`.
void BM_mlp_step(benchmark::State& state) {
  const int input = 784, width = static_cast<int>(state.range(0)), batch = static_cast<int>(state.range(1));
  // 0: unrecorded, the host running ahead; 1: recording every tensor; 2: unrecorded but reading
  // the loss back every step, as `fpscope train` does when it writes a run log; 3: as 0, each step
  // launched as it comes rather than replayed as a graph (TrainingConfig::step_graphs).
  const bool record = state.range(2) == 1, read_loss = state.range(2) == 2;
  fpscope::TrainingConfig config;
  if (state.range(2) == 3) config.step_graphs = false;
  config.layer_sizes = {input, width, width, 10};
  config.activation = fpscope::Activation::relu;
  config.precision = fpscope::Precision::fp16;
  config.scaler = fpscope::LossScalerConfig::pytorch();
  fpscope::CudaMlpTrainer trainer(config);
  fpscope::SyntheticClassification data(input, 10, 1);
  std::vector<Eigen::MatrixXf> inputs(8);
  std::vector<std::vector<int>> labels(8);
  for (std::size_t i = 0; i < inputs.size(); ++i) data.next_batch(batch, inputs[i], labels[i]);
  constexpr int steps_per_iteration = mlp_steps_per_iteration;
  for (int i = 0; i < 5; ++i) trainer.step(inputs[0], labels[0], record, read_loss);  // warm-up: cuBLAS heuristics, buffers
  (void)trainer.scaler_state();
  std::size_t next = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps_per_iteration; ++i, next = (next + 1) % inputs.size())
      benchmark::DoNotOptimize(trainer.step(inputs[next], labels[next], record, read_loss));
    (void)trainer.scaler_state();  // waits for the device
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps_per_iteration);
  }
  state.SetLabel(std::string(record ? "recording every tensor" : read_loss ? "unrecorded, loss read back" : config.step_graphs ? "unrecorded" : "unrecorded, no graphs") + ", 784-" + std::to_string(width) + "-" +
                 std::to_string(width) + "-10, batch " + std::to_string(batch));
}

// The same four ways for a GPT of 4 layers x 256 wide (4 heads, context 128, vocab 256) at batch
// `batch` sequences: the model bench_train_torch.py times on the CPU.
void BM_gpt_step(benchmark::State& state) {
  const int batch = static_cast<int>(state.range(0));
  const bool record = state.range(1) == 1, read_loss = state.range(1) == 2;
  const fpscope::GptShape shape{4, 256, 4, 128, 256};
  fpscope::TrainingConfig config;
  if (state.range(1) == 3) config.step_graphs = false;
  config.gpt = shape;
  config.precision = fpscope::Precision::fp16;
  config.scaler = fpscope::LossScalerConfig::pytorch();
  config.optimizer.kind = fpscope::OptimizerKind::adamw;
  config.learning_rate = 1e-3f;
  fpscope::DeviceGptTrainer trainer(shape, config, fpscope::make_cuda_device_ops());
  std::mt19937 rng(1);
  std::vector<Eigen::MatrixXf> inputs(8, Eigen::MatrixXf(batch, shape.context));
  std::vector<std::vector<int>> targets(8);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    for (Eigen::Index k = 0; k < inputs[i].size(); ++k) inputs[i].data()[k] = static_cast<float>(rng() % 256);
    for (int k = 0; k < batch * shape.context; ++k) targets[i].push_back(static_cast<int>(rng() % 256));
  }
  constexpr int steps_per_iteration = gpt_steps_per_iteration;
  for (int i = 0; i < 3; ++i) trainer.step(inputs[0], targets[0], record, read_loss);  // warm-up
  (void)trainer.scaler_state();
  std::size_t next = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps_per_iteration; ++i, next = (next + 1) % inputs.size())
      benchmark::DoNotOptimize(trainer.step(inputs[next], targets[next], record, read_loss));
    (void)trainer.scaler_state();  // waits for the device
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps_per_iteration);
  }
  state.SetLabel(std::string(record ? "recording every tensor" : read_loss ? "unrecorded, loss read back" : config.step_graphs ? "unrecorded" : "unrecorded, no graphs") +
                 ", gpt 4x256, context 128, batch " + std::to_string(batch));
}

}  // namespace

BENCHMARK(BM_device_copy_256MiB)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.2);
BENCHMARK(BM_cast_record_fp16_256MiB)
    ->Arg(static_cast<int>(fpscope::RoundingMode::nearest_even))
    ->Arg(static_cast<int>(fpscope::RoundingMode::stochastic))
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);
BENCHMARK(BM_histogram_256MiB)->UseManualTime()->Unit(benchmark::kMillisecond)->MinTime(0.2);
BENCHMARK(BM_mlp_step)
    ->ArgsProduct({{1024}, {256}, {0, 1, 2, 3}})
    ->ArgsProduct({{4096}, {1024}, {0, 1, 2, 3}})
    ->ArgsProduct({{8192}, {4096}, {0, 1, 2, 3}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(stepping_seconds / mlp_steps_per_iteration);
BENCHMARK(BM_gpt_step)
    ->ArgsProduct({{8, 32}, {0, 1, 2, 3}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(stepping_seconds / gpt_steps_per_iteration);

int main(int argc, char** argv) {
  std::string why;
  if (fpscope::cuda::device_count(&why) == 0) {
    std::printf("bench_cuda: no CUDA device (%s); nothing to measure here\n", why.c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
