// The training engine's CUDA kernels against their CPU twins, bit for bit: the recorded cast
// (values, histogram, outcome counts) against cast_and_record, unscaling against
// unscale_and_check, the device scaler update against LossScaler. Needs a device to run.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "fpscope/core/bulk.hpp"
#include "fpscope/gpu/cast_record.hpp"
#include "fpscope/gpu/cuda_kernels.hpp"
#include "fpscope/gpu/loss_scaler.hpp"
#include "fpscope/gpu/unscale.hpp"

using namespace fpscope;

int main() {
  std::string why;
  if (cuda::device_count(&why) == 0) {
    std::printf("no CUDA device (%s): skipping the device run (this binary compiled and linked)\n", why.c_str());
    return 77;
  }
  std::mt19937 rng(3);
  const std::size_t n = 1 << 20;
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = bits_float(i % 4 == 0 ? rng() : (rng() & 0x807FFFFFu) | ((90u + rng() % 60u) << 23));
  int failures = 0;
  for (const bool bf16 : {false, true}) {
    for (int mode = 0; mode < 7; ++mode) {  // the six deterministic modes, then stochastic
      // CPU twin (stochastic: seed 7, words from index 1000, as the device is asked below).
      Context ctx;
      ctx.rounding = static_cast<RoundingMode>(mode);
      ctx.stochastic_seed = 7;
      ctx.stochastic_counter = 1000;
      std::vector<float> expected(n);
      ExponentHistogram histogram;
      CastCounts counts;
      cast_and_record(bf16 ? formats::bf16 : formats::fp16, values, expected, ctx, histogram, counts);
      // Device.
      float *in, *out;
      unsigned long long *bins, *outcome;
      cudaMalloc(&in, n * sizeof(float));
      cudaMalloc(&out, n * sizeof(float));
      cudaMalloc(&bins, 280 * sizeof(unsigned long long));
      cudaMalloc(&outcome, 3 * sizeof(unsigned long long));
      cudaMemset(bins, 0, 280 * sizeof(unsigned long long));
      cudaMemset(outcome, 0, 3 * sizeof(unsigned long long));
      cudaMemcpy(in, values.data(), n * sizeof(float), cudaMemcpyHostToDevice);
      cuda::cast_and_record(in, out, n, bf16, ctx.rounding, {bins, outcome}, nullptr, 7, 1000);
      std::vector<float> got(n);
      std::vector<unsigned long long> got_bins(280), got_counts(3);
      cudaMemcpy(got.data(), out, n * sizeof(float), cudaMemcpyDeviceToHost);
      cudaMemcpy(got_bins.data(), bins, 280 * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
      cudaMemcpy(got_counts.data(), outcome, 3 * sizeof(unsigned long long), cudaMemcpyDeviceToHost);
      cudaFree(in);
      cudaFree(out);
      cudaFree(bins);
      cudaFree(outcome);
      const bool same_values = std::memcmp(got.data(), expected.data(), n * sizeof(float)) == 0;
      bool same_histogram = got_bins[bin_zero] == histogram.zero_count() && got_bins[bin_infinity] == histogram.infinity_count() &&
                            got_bins[bin_nan] == histogram.nan_count();
      for (int b = min_binade; b <= max_binade; ++b) same_histogram = same_histogram && got_bins[b - min_binade] == histogram.count(b);
      const bool same_counts = got_counts[0] == counts.flushed_to_zero && got_counts[1] == counts.made_subnormal &&
                               got_counts[2] == counts.overflowed;
      std::printf("%s mode %d: values %s, histogram %s, counts %s\n", bf16 ? "bf16" : "fp16", mode, same_values ? "OK" : "DIFFER",
                  same_histogram ? "OK" : "DIFFER", same_counts ? "OK" : "DIFFER");
      failures += !(same_values && same_histogram && same_counts);
    }
  }
  // Unscale and check.
  std::vector<float> gradients(values.begin(), values.begin() + 100000), twin = gradients;
  const bool twin_found = unscale_and_check(twin, 1.0f / 1024);
  float* device_gradients;
  int* found;
  cudaMalloc(&device_gradients, gradients.size() * sizeof(float));
  cudaMalloc(&found, sizeof(int));
  cudaMemset(found, 0, sizeof(int));
  cudaMemcpy(device_gradients, gradients.data(), gradients.size() * sizeof(float), cudaMemcpyHostToDevice);
  cuda::unscale_and_check(device_gradients, gradients.size(), 1.0f / 1024, found);
  int device_found = 0;
  cudaMemcpy(gradients.data(), device_gradients, gradients.size() * sizeof(float), cudaMemcpyDeviceToHost);
  cudaMemcpy(&device_found, found, sizeof(int), cudaMemcpyDeviceToHost);
  const bool unscale_ok = std::memcmp(gradients.data(), twin.data(), gradients.size() * sizeof(float)) == 0 && (device_found != 0) == twin_found;
  std::printf("unscale: %s\n", unscale_ok ? "OK" : "DIFFER");
  failures += !unscale_ok;
  // Scaler update on the device against LossScaler on a scripted pattern.
  LossScalerConfig config = LossScalerConfig::deepspeed();
  config.growth_interval = 3;
  LossScaler host(config);
  LossScalerState* state;
  int *flag, *skip;
  cudaMalloc(&state, sizeof(LossScalerState));
  cudaMalloc(&flag, sizeof(int));
  cudaMalloc(&skip, sizeof(int));
  cudaMemcpy(state, &host.state(), sizeof(LossScalerState), cudaMemcpyHostToDevice);
  bool scaler_ok = true;
  for (const int bad : {0, 0, 1, 1, 1, 0, 0, 0, 1, 0}) {
    cudaMemcpy(flag, &bad, sizeof(int), cudaMemcpyHostToDevice);
    cuda::update_scaler(config, state, flag, skip);
    const bool host_skip = host.update(bad != 0);
    LossScalerState device_state;
    int device_skip = 0;
    cudaMemcpy(&device_state, state, sizeof(LossScalerState), cudaMemcpyDeviceToHost);
    cudaMemcpy(&device_skip, skip, sizeof(int), cudaMemcpyDeviceToHost);
    scaler_ok = scaler_ok && device_state == host.state() && (device_skip != 0) == host_skip;
  }
  std::printf("scaler: %s\n", scaler_ok ? "OK" : "DIFFER");
  failures += !scaler_ok;
  std::printf("%s\n", failures == 0 ? "GPU KERNELS OK" : "GPU KERNELS DIFFER");
  return failures == 0 ? 0 : 1;
}
