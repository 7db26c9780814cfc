// Bulk conversion and histogram throughput on 64M floats, beside F16C and a plain memory read.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/bulk.hpp"
#include "fpscope/core/exponent_histogram.hpp"

namespace {

constexpr std::size_t count = std::size_t{64} << 20;  // 64M floats = 256 MiB

// Values shaped like a gradient tensor: normal-distributed over many binades, with zeros.
const std::vector<float>& input() {
  static const std::vector<float> values = [] {
    std::vector<float> v(count);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t i = 0; i < count; ++i) v[i] = (i % 8 == 0) ? 0.0f : normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 24) - 20);
    return v;
  }();
  return values;
}

// Values shaped like a layer's activations: each 4096-wide row normal-distributed at a scale of
// its own (2^-8 .. 2^8), an eighth of them zero; within a block the magnitudes span a few
// binades, where input() spreads each element over 24.
const std::vector<float>& activations() {
  static const std::vector<float> values = [] {
    std::vector<float> v(count);
    std::mt19937 rng(2);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t i = 0; i < count; ++i) v[i] = (i % 8 == 3) ? 0.0f : normal(rng) * std::ldexp(1.0f, static_cast<int>((i / 4096) % 17) - 8);
    return v;
  }();
  return values;
}

void set_bytes(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(count * sizeof(float)));
}

// The threads block quantization runs on here: every core, as `fpscope quantize` and `analyze` run it.
int all_cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Reads floats [first, last) once (a vectorised sum of the bits). The baselines name their
// instruction sets (AVX2, F16C) function by function, so that the library's shared inline
// functions this file instantiates stay compiled as shipped (core/src/kernel_unit_baseline.hpp).
__attribute__((target("avx2"))) void read_range(const float* in, std::size_t first, std::size_t last) {
  const auto* p = reinterpret_cast<const __m256i*>(in);
  __m256i sum = _mm256_setzero_si256();
  for (std::size_t i = first / 8; i < last / 8; ++i) sum = _mm256_add_epi32(sum, _mm256_loadu_si256(p + i));
  benchmark::DoNotOptimize(sum);
}

// Baseline: read every float once.
void BM_plain_read(benchmark::State& state) {
  const auto& in = input();
  for (auto _ : state) read_range(in.data(), 0, count);
  set_bytes(state);
}

// Baseline for work on every core: each core reads its share once.
void BM_plain_read_all_cores(benchmark::State& state) {
  const auto& in = input();
  const std::size_t threads = static_cast<std::size_t>(all_cores());
  for (auto _ : state) {
    std::vector<std::jthread> helpers;
    for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(read_range, in.data(), count * t / threads, count * (t + 1) / threads);
    read_range(in.data(), 0, count / threads);
  }
  set_bytes(state);
}

// Baseline: the F16C instruction converting the whole array (round to nearest even).
__attribute__((target("avx,f16c"))) void f16c_narrow(const float* in, std::uint16_t* out, std::size_t n) {
  for (std::size_t i = 0; i < n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
}
void BM_f16c_f32_to_fp16(benchmark::State& state) {
  const auto& in = input();
  std::vector<std::uint16_t> out(count);
  for (auto _ : state) {
    f16c_narrow(in.data(), out.data(), count);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state);
}

void BM_fpscope_f32_to_fp16(benchmark::State& state) {
  const auto& in = input();
  std::vector<std::uint16_t> out(count);
  for (auto _ : state) {
    fpscope::Context ctx;
    fpscope::f32_to_bits(fpscope::formats::fp16, in, out, ctx);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state);
}

void BM_fpscope_f32_to_bf16(benchmark::State& state) {
  const auto& in = input();
  std::vector<std::uint16_t> out(count);
  for (auto _ : state) {
    fpscope::Context ctx;
    fpscope::f32_to_bits(fpscope::formats::bf16, in, out, ctx);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state);
}

void BM_fpscope_round_f32_fp16(benchmark::State& state) {
  const auto& in = input();
  std::vector<float> out(count);
  for (auto _ : state) {
    fpscope::Context ctx;
    fpscope::round_f32(fpscope::formats::fp16, in, out, ctx);
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state);
}

void BM_fpscope_exponent_histogram(benchmark::State& state) {
  const auto& in = input();
  for (auto _ : state) {
    fpscope::ExponentHistogram histogram;
    histogram.add(in);
    benchmark::DoNotOptimize(histogram);
  }
  set_bytes(state);
}

// Block quantization with the statistics a recorded step keeps (relative exponents, scale
// codes, flush / subnormal / saturate counts): blocks along rows of 4096-wide rows, on every
// core (beside BM_plain_read_all_cores) unless `threads` says one.
void block_quantize_record(benchmark::State& state, const fpscope::BlockFormat& format, fpscope::RoundingMode mode, bool record = true,
                           int threads = all_cores(), fpscope::BlockAxis axis = fpscope::BlockAxis::rows,
                           const std::vector<float>& in = input()) {
  const fpscope::BlockLayout layout{count / 4096, 4096, axis, format.block_size};
  std::vector<std::uint8_t> codes(count), scales(layout.block_count());
  for (auto _ : state) {
    fpscope::Context ctx;
    ctx.rounding = mode;
    fpscope::BlockStatistics statistics;
    float tensor_scale = 0;
    fpscope::block_quantize(format, fpscope::ScaleRule::floor, layout, in, codes, scales, tensor_scale, ctx, record ? &statistics : nullptr, {},
                            threads);
    benchmark::DoNotOptimize(codes.data());
    benchmark::DoNotOptimize(statistics);
  }
  set_bytes(state);
}
void BM_block_quantize_record_mxfp8_e4m3(benchmark::State& state) {
  block_quantize_record(state, fpscope::block_formats::mxfp8_e4m3, fpscope::RoundingMode::nearest_even);
}
// One thread (beside BM_plain_read).
void BM_block_quantize_record_mxfp8_e4m3_one_thread(benchmark::State& state) {
  block_quantize_record(state, fpscope::block_formats::mxfp8_e4m3, fpscope::RoundingMode::nearest_even, true, 1);
}
// Blocks down the columns (a B operand, or a weight blocked along its inputs).
void BM_block_quantize_record_mxfp8_e4m3_cols(benchmark::State& state) {
  block_quantize_record(state, fpscope::block_formats::mxfp8_e4m3, fpscope::RoundingMode::nearest_even, true, all_cores(),
                        fpscope::BlockAxis::cols);
}
// The same without statistics: what a recipe's operand quantization costs.
void BM_block_quantize_record_mxfp8_e4m3_activations(benchmark::State& state) {
  block_quantize_record(state, fpscope::block_formats::mxfp8_e4m3, fpscope::RoundingMode::nearest_even, true, all_cores(),
                        fpscope::BlockAxis::rows, activations());
}
void BM_block_quantize_mxfp8_e4m3(benchmark::State& state) {
  block_quantize_record(state, fpscope::block_formats::mxfp8_e4m3, fpscope::RoundingMode::nearest_even, false);
}
void BM_block_quantize_record_mxfp4(benchmark::State& state) {
  block_quantize_record(state, fpscope::block_formats::mxfp4, fpscope::RoundingMode::nearest_even);
}
void BM_block_quantize_record_mxfp4_stochastic(benchmark::State& state) {
  block_quantize_record(state, fpscope::block_formats::mxfp4, fpscope::RoundingMode::stochastic);
}
// Stochastic rounding down columns (a weight gradient's operand blocked along the batch).
void BM_block_quantize_record_mxfp4_stochastic_cols(benchmark::State& state) {
  block_quantize_record(state, fpscope::block_formats::mxfp4, fpscope::RoundingMode::stochastic, true, all_cores(), fpscope::BlockAxis::cols);
}
void BM_block_quantize_record_nvfp4(benchmark::State& state) {
  block_quantize_record(state, fpscope::block_formats::nvfp4, fpscope::RoundingMode::nearest_even);
}
// NVFP4 down the columns (blocks of 16: bands of 16 rows).
void BM_block_quantize_record_nvfp4_cols(benchmark::State& state) {
  block_quantize_record(state, fpscope::block_formats::nvfp4, fpscope::RoundingMode::nearest_even, true, all_cores(), fpscope::BlockAxis::cols);
}
// NVFP4 under a tensor scale given beforehand (a calibrated amax's, `quantize --tensor-amax`):
// one pass over the values where finding their own amax first makes two. The scale is the one
// the values' own amax gives, so the work per element is BM_block_quantize_record_nvfp4's.
void BM_block_quantize_record_nvfp4_given_scale(benchmark::State& state) {
  const auto& in = input();
  const fpscope::BlockFormat& format = fpscope::block_formats::nvfp4;
  const fpscope::BlockLayout layout{count / 4096, 4096, fpscope::BlockAxis::rows, format.block_size};
  std::vector<std::uint8_t> codes(count), scales(layout.block_count());
  float tensor_scale = 0;
  {
    fpscope::Context ctx;
    fpscope::block_quantize(format, fpscope::ScaleRule::floor, layout, in, codes, scales, tensor_scale, ctx, nullptr, {}, all_cores());
  }
  for (auto _ : state) {
    fpscope::Context ctx;
    fpscope::BlockStatistics statistics;
    fpscope::block_quantize_under_tensor_scale(format, fpscope::ScaleRule::floor, layout, in, codes, scales, tensor_scale, ctx, &statistics, {},
                                               all_cores());
    benchmark::DoNotOptimize(codes.data());
    benchmark::DoNotOptimize(statistics);
  }
  set_bytes(state);
}
void BM_block_quantize_record_nvfp4_stochastic(benchmark::State& state) {
  block_quantize_record(state, fpscope::block_formats::nvfp4, fpscope::RoundingMode::stochastic);
}
void BM_block_quantize_record_mxint8(benchmark::State& state) {
  block_quantize_record(state, fpscope::block_formats::mxint8, fpscope::RoundingMode::nearest_even);
}

}  // namespace

BENCHMARK(BM_plain_read)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_plain_read_all_cores)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_f16c_f32_to_fp16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_fpscope_f32_to_fp16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_fpscope_f32_to_bf16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_fpscope_round_f32_fp16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_fpscope_exponent_histogram)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_block_quantize_record_mxfp8_e4m3)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_block_quantize_record_mxfp8_e4m3_one_thread)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_block_quantize_record_mxfp8_e4m3_cols)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_block_quantize_record_mxfp8_e4m3_activations)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_block_quantize_mxfp8_e4m3)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_block_quantize_record_mxfp4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_block_quantize_record_mxfp4_stochastic)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_block_quantize_record_mxfp4_stochastic_cols)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_block_quantize_record_nvfp4)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_block_quantize_record_nvfp4_cols)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_block_quantize_record_nvfp4_given_scale)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_block_quantize_record_nvfp4_stochastic)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_block_quantize_record_mxint8)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
