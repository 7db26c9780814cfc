// Rounding decimal text of 10 million digits, beside glibc's strtod and a plain read of the text.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "fpscope/core/decimal.hpp"

namespace {

// "1." then 10M digits: just above binary64's midpoint between 1 and 1 + 2^-52, so every digit
// matters to whether it rounds up, and the last one decides.
const std::string& long_decimal() {
  static const std::string text = [] {
    std::string t = "1.00000000000000011102230246251565404236316680908203125";
    t.resize(10'000'001, '0');
    t.push_back('1');
    return t;
  }();
  return text;
}

void set_bytes(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(long_decimal().size()));
}

// Baseline: read every character once.
void BM_plain_read(benchmark::State& state) {
  const std::string& text = long_decimal();
  for (auto _ : state) benchmark::DoNotOptimize(std::count(text.begin(), text.end(), '0'));
  set_bytes(state);
}

// Baseline: glibc's strtod, correctly rounded for inputs of any length.
void BM_glibc_strtod(benchmark::State& state) {
  const std::string& text = long_decimal();
  for (auto _ : state) benchmark::DoNotOptimize(std::strtod(text.c_str(), nullptr));
  set_bytes(state);
}

void BM_fpscope_round_text_fp64(benchmark::State& state) {
  const std::string& text = long_decimal();
  for (auto _ : state) {
    fpscope::Context ctx;
    benchmark::DoNotOptimize(fpscope::round_text(fpscope::formats::fp64, text, ctx));
  }
  set_bytes(state);
}

void BM_fpscope_round_text_fp16(benchmark::State& state) {
  const std::string& text = long_decimal();
  for (auto _ : state) {
    fpscope::Context ctx;
    benchmark::DoNotOptimize(fpscope::round_text(fpscope::formats::fp16, text, ctx));
  }
  set_bytes(state);
}

}  // namespace

BENCHMARK(BM_plain_read)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_glibc_strtod)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_fpscope_round_text_fp64)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_fpscope_round_text_fp16)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
