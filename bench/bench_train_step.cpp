// One training step of the CPU backend, timed for bench_train_torch.py (which puts PyTorch's step
// for the same model beside it): the median of --steps steps after two of warm-up, for each of
// fp32 (and, where float32 products run in oneDNN, fp32 in OpenBLAS), mixed fp16, mixed bf16 (and
// the share of its products that ran in bf16 kernels); then
// mixed fp16 recording every tensor every step (STEPS steps), and every 10th step (STEPS windows
// of 10 steps), each as the mean step beside the mean step of the same trainer unrecorded, the two
// stepping in turns, and the median over the windows of their ratio. Beside them, what bounds any
// step from below: the multiply-adds of one step's products (gemm_counts), and one core's peak
// rate for the instructions the products run on (AVX-512 FMA for float32, VDPBF16PS for bf16),
// measured on chains of register-only accumulations. Prints one line per measure:
// "NAME MILLISECONDS" (or "NAME RATIO", "NAME COUNT", "NAME GFLOPS").
//
// Usage: bench_train_step MODEL BATCH THREADS STEPS   (MODEL: layer sizes or gpt:...)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/training_data.hpp"

using namespace fpscope;

namespace {

std::unique_ptr<TrainerBackend> make_trainer(const std::string& model, Precision precision) {
  TrainingConfig config;
  if (names_gpt(model)) {
    config.gpt = parse_gpt_shape(model);
    config.optimizer.kind = OptimizerKind::adamw;
    config.learning_rate = 1e-3f;
  } else {
    config.layer_sizes = parse_layer_sizes(model);
    config.activation = Activation::relu;
    config.learning_rate = 0.01f;
  }
  config.precision = precision;
  config.scaler = precision == Precision::fp16 ? LossScalerConfig::pytorch() : LossScalerConfig::none();
  if (config.gpt) return std::make_unique<GptTrainer>(*config.gpt, config);
  return std::make_unique<MlpTrainer>(config);
}

struct Batch {
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
};
Batch batch_for(const std::string& model, int size) {
  TrainingConfig config;
  if (names_gpt(model)) config.gpt = parse_gpt_shape(model);
  else config.layer_sizes = parse_layer_sizes(model);
  TrainingData data("synthetic", config);
  Batch b;
  data.next_batch(size, b.inputs, b.labels);
  return b;
}

double timed_step_ms(TrainerBackend& trainer, const Batch& b, bool record) {
  const auto start = std::chrono::steady_clock::now();
  const StepResult result = trainer.step(b.inputs, b.labels, record, true);
  if (result.loss != result.loss) std::fprintf(stderr, "bench_train_step: the loss went NaN\n");
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The median step of `steps` after two of warm-up, every one recorded or none.
double median_step_ms(const std::string& model, int batch, int steps, Precision precision, bool record = false) {
  const std::unique_ptr<TrainerBackend> trainer = make_trainer(model, precision);
  const Batch b = batch_for(model, batch);
  std::vector<double> times;
  for (int step = 0; step < steps + 2; ++step) {
    const double ms = timed_step_ms(*trainer, b, record);
    if (step >= 2) times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The multiply-adds of one step's products, counted over the step after a first.
std::uint64_t multiply_adds_per_step(const std::string& model, int batch) {
  const std::unique_ptr<TrainerBackend> trainer = make_trainer(model, Precision::bf16);
  const Batch b = batch_for(model, batch);
  timed_step_ms(*trainer, b, false);
  const std::uint64_t before = gemm_counts().multiply_adds;
  timed_step_ms(*trainer, b, false);
  return gemm_counts().multiply_adds - before;
}

// One core's rate of an accumulating instruction (`accumulate`, whose `flops` count both the
// multiplies and the adds of one instruction): 24 independent chains, enough to cover its
// latency, of 20M accumulations each, nothing read from memory. Each chain's end is summed, so
// that none of them can be left out. Compiled for AVX512-BF16 so that either instruction inlines;
// the FMA loop holds no bf16 instruction, and runs wherever AVX-512F does.
template <typename Accumulate>
__attribute__((target("avx512f,avx512bf16"))) double peak_gflops(Accumulate accumulate, double flops) {
  constexpr long rounds = 20'000'000;
  __m512 acc[24];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  const auto begin = std::chrono::steady_clock::now();
  for (long i = 0; i < rounds; ++i) {
#pragma GCC unroll 24
    for (__m512& a : acc) a = accumulate(a);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  __m512 sum = acc[0];
  for (int c = 1; c < 24; ++c) sum = _mm512_add_ps(sum, acc[c]);
  volatile float sink = _mm512_reduce_add_ps(sum);
  (void)sink;
  return static_cast<double>(rounds) * 24 * flops / seconds / 1e9;
}
struct FusedMultiplyAdd {  // AVX-512 VFMADD: 16 multiply-adds
  __m512 x, y;
  __attribute__((target("avx512f"))) __m512 operator()(__m512 a) const { return _mm512_fmadd_ps(x, y, a); }
};
struct Bf16DotProduct {  // VDPBF16PS: 32 multiply-adds of bf16 pairs into 16 float32 sums
  __m512bh x, y;
  __attribute__((target("avx512f,avx512bf16"))) __m512 operator()(__m512 a) const { return _mm512_dpbf16_ps(a, x, y); }
};
__attribute__((target("avx512f,avx512bf16"))) double fma_peak_gflops() {
  return peak_gflops(FusedMultiplyAdd{_mm512_set1_ps(1.0f), _mm512_set1_ps(1e-9f)}, 32);
}
__attribute__((target("avx512f,avx512bf16"))) double bf16_dot_peak_gflops() {
  // 1 and 2^-30: the sums stay finite.
  return peak_gflops(Bf16DotProduct{(__m512bh)_mm512_set1_epi16(0x3F80), (__m512bh)_mm512_set1_epi16(0x3080)}, 64);
}

// Mixed fp16 recording every `record_every`-th step beside the same trainer not recording, the
// two stepping in turns (so that the machine's speed, which drifts, is the same for both; which of
// the two goes first alternates window by window): the mean step of each over `windows` windows of
// `record_every` steps (the first step of each recorded) after two of warm-up, and the median over
// the windows of the recording trainer's time over the other's (one slow moment of the machine
// moves one window's ratio, where it would move the means by its whole length).
struct RecordingCost {
  double recording_ms, unrecorded_ms, median_ratio;
};
RecordingCost recording_and_unrecorded_ms(const std::string& model, int batch, int windows, int record_every) {
  const std::unique_ptr<TrainerBackend> recording = make_trainer(model, Precision::fp16), unrecorded = make_trainer(model, Precision::fp16);
  const Batch b = batch_for(model, batch);
  for (int step = 0; step < 2; ++step) timed_step_ms(*recording, b, false), timed_step_ms(*unrecorded, b, false);
  double recording_sum = 0, unrecorded_sum = 0;
  std::vector<double> ratios;
  for (int window = 0; window < windows; ++window) {
    double with = 0, without = 0;
    for (int step = 0; step < record_every; ++step) {
      if (window % 2 == 0) {
        with += timed_step_ms(*recording, b, step == 0);
        without += timed_step_ms(*unrecorded, b, false);
      } else {
        without += timed_step_ms(*unrecorded, b, false);
        with += timed_step_ms(*recording, b, step == 0);
      }
    }
    recording_sum += with, unrecorded_sum += without;
    ratios.push_back(with / without);
  }
  std::sort(ratios.begin(), ratios.end());
  const double steps = static_cast<double>(windows) * record_every;
  const std::size_t middle = ratios.size() / 2;
  const double median = ratios.size() % 2 == 1 ? ratios[middle] : (ratios[middle - 1] + ratios[middle]) / 2;
  return {recording_sum / steps, unrecorded_sum / steps, median};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: bench_train_step MODEL BATCH THREADS STEPS [PRECISION[+record]]\n");
    return 2;
  }
  const std::string model = argv[1];
  const int batch = std::atoi(argv[2]), threads = std::atoi(argv[3]), steps = std::atoi(argv[4]);
  set_gemm_threads(threads);
  if (argc == 6) {  // one precision's step alone, unrecorded or (PRECISION+record) recording every step: for profiling
    std::string precision = argv[5];
    const bool record = precision.ends_with("+record");
    if (record) precision.resize(precision.size() - 7);
    std::printf("%s %.3f\n", argv[5], median_step_ms(model, batch, steps, parse_precision(precision), record));
    return 0;
  }
  std::printf("fp32 %.3f\n", median_step_ms(model, batch, steps, Precision::fp32));
  // The float32 library the steps use (1: oneDNN's sgemm, 0: OpenBLAS), and the fp32 step in
  // OpenBLAS beside it where that is another library (gemm.hpp).
  const Float32Library library = gemm_float32_library();
  std::printf("float32_in_onednn %d\n", library == Float32Library::onednn ? 1 : 0);
  if (library != Float32Library::openblas) {
    set_gemm_float32_library(Float32Library::openblas);
    std::printf("fp32_openblas %.3f\n", median_step_ms(model, batch, steps, Precision::fp32));
    set_gemm_float32_library(library);
  }
  std::printf("fp16 %.3f\n", median_step_ms(model, batch, steps, Precision::fp16));
  const GemmCounts before_bf16 = gemm_counts();
  std::printf("bf16 %.3f\n", median_step_ms(model, batch, steps, Precision::bf16));
  const GemmCounts after_bf16 = gemm_counts();
  // How many of the bf16 run's products went to the bf16 kernels (gemm.hpp), as a share.
  const double bf16_calls = static_cast<double>(after_bf16.bf16 - before_bf16.bf16);
  std::printf("bf16_kernel_share %.3f\n", bf16_calls / std::max(1.0, bf16_calls + static_cast<double>(after_bf16.float32 - before_bf16.float32)));
  const RecordingCost every = recording_and_unrecorded_ms(model, batch, steps, 1);
  std::printf("fp16_recording %.3f\nfp16_beside_recording %.3f\nfp16_recording_ratio %.5f\n", every.recording_ms, every.unrecorded_ms,
              every.median_ratio);
  const RecordingCost tenth = recording_and_unrecorded_ms(model, batch, steps, 10);
  std::printf("fp16_recording_every_10 %.3f\nfp16_beside_every_10 %.3f\nfp16_recording_every_10_ratio %.5f\n", tenth.recording_ms,
              tenth.unrecorded_ms, tenth.median_ratio);
  std::printf("multiply_adds_per_step %llu\n", static_cast<unsigned long long>(multiply_adds_per_step(model, batch)));
  std::printf("fp32_peak_gflops %.1f\n", __builtin_cpu_supports("avx512f") ? fma_peak_gflops() : 0.0);
  std::printf("bf16_peak_gflops %.1f\n", __builtin_cpu_supports("avx512bf16") ? bf16_dot_peak_gflops() : 0.0);
  return 0;
}
