// CUDA kernels of the training engine and their launchers. The element-wise math is the shared
// FPSCOPE_HD code; only the parallel structure lives here.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "fpscope/core/cast.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/gpu/cuda_kernels.hpp"
#include "fpscope/gpu/scaler_rule.hpp"
#include "fpscope/gpu/unscale.hpp"

#define cudaCheck(err) cuda_check((err), __FILE__, __LINE__)
static void cuda_check(cudaError_t error, const char* file, int line) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "CUDA error at %s:%d: %s\n", file, line, cudaGetErrorString(error));
    std::exit(1);
  }
}

namespace fpscope::cuda {

namespace {

constexpr int slots = bin_slot_count;  // 280
constexpr int threads = 256;

// ----------------------------------------------------------------------------------------------
// CUDA kernels

// Kernel templates take plain integers (nvcc's host stubs cannot spell a class-type template
// argument); the device functions they call take the Format itself.
template <int ExponentBits, int MantissaBits, RoundingMode Mode>
__global__ void cast_record_kernel(const float* in, float* out, std::size_t n, unsigned long long* histogram,
                                   unsigned long long* counts) {
  constexpr Format F{ExponentBits, MantissaBits, Flavour::ieee};
  __shared__ unsigned int bins[slots];
  __shared__ unsigned int outcome[3];
  for (int i = threadIdx.x; i < slots; i += blockDim.x) bins[i] = 0;
  if (threadIdx.x < 3) outcome[threadIdx.x] = 0;
  __syncthreads();
  constexpr std::uint32_t min_normal = static_cast<std::uint32_t>(F.emin() + 127) << 23;
  const CastOptions options{};
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::uint32_t u = float_bits(in[i]);
    atomicAdd(&bins[histogram_slot_of_f32(u)], 1u);
    std::uint32_t flags = 0, widen_flags = 0;
    const std::uint32_t narrow = cast_from_f32<F, Mode>(u, options, 0, flags);
    const std::uint32_t back = cast_to_f32<F>(narrow, options, widen_flags);
    out[i] = bits_float(back);
    const std::uint32_t a = u & 0x7FFFFFFFu, b = back & 0x7FFFFFFFu;
    const bool finite_in = a < 0x7F800000u;
    if (finite_in && a != 0 && b == 0) atomicAdd(&outcome[0], 1u);
    if (b != 0 && b < min_normal) atomicAdd(&outcome[1], 1u);
    if ((flags & flag::overflow) != 0) atomicAdd(&outcome[2], 1u);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < slots; i += blockDim.x)
    if (bins[i] != 0) atomicAdd(&histogram[i], static_cast<unsigned long long>(bins[i]));
  if (threadIdx.x < 3 && outcome[threadIdx.x] != 0) atomicAdd(&counts[threadIdx.x], static_cast<unsigned long long>(outcome[threadIdx.x]));
}

__global__ void unscale_kernel(float* gradients, std::size_t n, float inverse_scale, int* found_non_finite) {
  bool non_finite = false;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    gradients[i] = unscale_element(gradients[i], inverse_scale, non_finite);
  if (__any_sync(0xFFFFFFFFu, non_finite) && (threadIdx.x & 31) == 0) atomicExch(found_non_finite, 1);
}

__global__ void scaler_kernel(LossScalerConfig config, LossScalerState* state, const int* found_non_finite, int* skip) {
  *skip = apply_scaler_rule(config, *state, *found_non_finite != 0) ? 1 : 0;
}

// ----------------------------------------------------------------------------------------------
// kernel launchers

int blocks_for(std::size_t n) {
  const std::size_t wanted = (n + threads - 1) / threads;
  return static_cast<int>(wanted < 4096 ? (wanted == 0 ? 1 : wanted) : 4096);
}

template <Format F>
void launch_cast_record(const float* in, float* out, std::size_t n, RoundingMode mode, CastRecordBuffers b, cudaStream_t s) {
  switch (mode) {
    case RoundingMode::nearest_away: cast_record_kernel<F.exponent_bits, F.mantissa_bits, RoundingMode::nearest_away><<<blocks_for(n), threads, 0, s>>>(in, out, n, b.histogram, b.counts); break;
    case RoundingMode::toward_zero: cast_record_kernel<F.exponent_bits, F.mantissa_bits, RoundingMode::toward_zero><<<blocks_for(n), threads, 0, s>>>(in, out, n, b.histogram, b.counts); break;
    case RoundingMode::toward_positive: cast_record_kernel<F.exponent_bits, F.mantissa_bits, RoundingMode::toward_positive><<<blocks_for(n), threads, 0, s>>>(in, out, n, b.histogram, b.counts); break;
    case RoundingMode::toward_negative: cast_record_kernel<F.exponent_bits, F.mantissa_bits, RoundingMode::toward_negative><<<blocks_for(n), threads, 0, s>>>(in, out, n, b.histogram, b.counts); break;
    case RoundingMode::odd: cast_record_kernel<F.exponent_bits, F.mantissa_bits, RoundingMode::odd><<<blocks_for(n), threads, 0, s>>>(in, out, n, b.histogram, b.counts); break;
    default: cast_record_kernel<F.exponent_bits, F.mantissa_bits, RoundingMode::nearest_even><<<blocks_for(n), threads, 0, s>>>(in, out, n, b.histogram, b.counts); break;
  }
  cudaCheck(cudaGetLastError());
}

}  // namespace

void cast_and_record(const float* in, float* out, std::size_t n, bool bf16, RoundingMode mode, CastRecordBuffers buffers,
                     void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  if (bf16) launch_cast_record<formats::bf16>(in, out, n, mode, buffers, s);
  else launch_cast_record<formats::fp16>(in, out, n, mode, buffers, s);
}

void unscale_and_check(float* gradients, std::size_t n, float inverse_scale, int* found_non_finite, void* stream) {
  unscale_kernel<<<blocks_for(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(gradients, n, inverse_scale, found_non_finite);
  cudaCheck(cudaGetLastError());
}

void update_scaler(const LossScalerConfig& config, LossScalerState* state, const int* found_non_finite, int* skip, void* stream) {
  scaler_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(config, state, found_non_finite, skip);
  cudaCheck(cudaGetLastError());
}

int device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

}  // namespace fpscope::cuda
