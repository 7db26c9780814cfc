// Per-tensor FP8 operands on the device (cuda_kernels.hpp): the amax as the largest magnitude's
// bits (one atomicMax per block: the same result in any order) and the scaled, saturating cast
// with its counts, a thread per element running fp8_element.hpp's function -- the host twin's
// (host_device_ops.cpp) loop, so the two agree bit for bit.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "fpscope/gpu/block_element.hpp"
#include "fpscope/gpu/cuda_kernels.hpp"
#include "fpscope/gpu/fp8_element.hpp"
#include "fpscope/gpu/rounding_dispatch.hpp"
#include "block_largest.cuh"
#include "launch.hpp"

namespace fpscope::cuda {

namespace {

constexpr int threads = 256;
int blocks_for(std::size_t n) { return grid_for(n, threads, 4096); }

// Nvfp4: the amax of NVFP4's tensor scale, the finite values' (nvfp4_amax_contribution); else
// every value's (a NaN's bits above every number's).
template <bool Nvfp4>
__global__ void amax_bits_kernel(const float* in, std::size_t n, unsigned int* largest) {
  unsigned int top = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    top = max(top, static_cast<unsigned int>(Nvfp4 ? nvfp4_amax_contribution(float_bits(in[i])) : magnitude_bits(in[i])));
  merge_largest(top, largest);
}

// The amax into `largest` (zeroed first), on stream s.
template <bool Nvfp4>
void launch_amax_bits(const float* in, std::size_t n, std::uint32_t* largest, cudaStream_t s) {
  zero_largest(largest, s);
  amax_bits_kernel<Nvfp4><<<blocks_for(n), threads, 0, s>>>(in, n, reinterpret_cast<unsigned int*>(largest));
  cudaCheckLaunch("amax_bits_kernel");
}

// Counts in registers, then per block in shared memory, then one atomic add each per block.
template <bool E5m2, RoundingMode Mode>
__global__ void fp8_quantize_kernel(const float* in, float* out, std::size_t n, float scale, CastOptions saturating, RandomWords random,
                                    unsigned long long* counts) {
  constexpr Format F = E5m2 ? formats::e5m2 : formats::e4m3;
  const std::uint64_t seed = random.seed, first = Mode == RoundingMode::stochastic ? random.first_word() : 0;
  __shared__ unsigned long long block_counts[3];
  if (threadIdx.x < 3) block_counts[threadIdx.x] = 0;
  __syncthreads();
  unsigned long long zeros = 0, flushed = 0, saturated = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n; i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const Fp8Element e = fp8_quantize_element<F, Mode>(in[i], scale, saturating, seed, first, i);
    out[i] = bits_float(e.rounded);
    zeros += e.zero ? 1 : 0;
    flushed += e.flushed ? 1 : 0;
    saturated += e.saturated ? 1 : 0;
  }
  if (zeros != 0) atomicAdd(&block_counts[0], zeros);
  if (flushed != 0) atomicAdd(&block_counts[1], flushed);
  if (saturated != 0) atomicAdd(&block_counts[2], saturated);
  __syncthreads();
  if (threadIdx.x < 3 && block_counts[threadIdx.x] != 0) atomicAdd(&counts[threadIdx.x], block_counts[threadIdx.x]);
}

// A thread per block; NVFP4's tensor scale from the amax found before (null: 1).
__global__ void block_quantize_kernel(const float* in, float* out, BlockLayout layout, BlockFormat format, ScaleRule rule, Context options,
                                      RandomWords random, unsigned long long* counters, const unsigned int* amax) {
  const Context ctx = drawing(options, random);
  const float tensor_scale = amax != nullptr ? nvfp4_tensor_scale(*amax) : 1.0f;
  const auto add = [counters](std::size_t counter, std::uint64_t amount) { atomicAdd(&counters[counter], static_cast<unsigned long long>(amount)); };
  const std::size_t blocks = layout.block_count();
  for (std::size_t b = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; b < blocks; b += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    quantize_dequantize_block(format, rule, layout, tensor_scale, ctx, in, out, b, add);
}

}  // namespace

void block_quantize(const float* in, float* out, const BlockLayout& layout, const BlockFormat& format, ScaleRule rule, const Context& ctx,
                    RandomWords random, unsigned long long* counters, std::uint32_t* amax, void* stream) {
  if (format.block_size > device_block_size_limit) throw std::invalid_argument("block_quantize on the device: blocks of at most 32 elements");
  const auto s = static_cast<cudaStream_t>(stream);
  const bool nvfp4 = format.scale == BlockFormat::Scale::e4m3_nvfp4;
  if (nvfp4) launch_amax_bits<true>(in, layout.element_count(), amax, s);
  block_quantize_kernel<<<blocks_for(layout.block_count()), threads, 0, s>>>(in, out, layout, format, rule, ctx, random, counters,
                                                                             nvfp4 ? reinterpret_cast<const unsigned int*>(amax) : nullptr);
  cudaCheckLaunch("block_quantize_kernel");
}

void amax_bits(const float* in, std::size_t n, std::uint32_t* largest, void* stream) {
  launch_amax_bits<false>(in, n, largest, static_cast<cudaStream_t>(stream));
}

void fp8_quantize(const float* in, float* out, std::size_t n, float scale, bool e5m2, RoundingMode mode, const CastOptions& saturating,
                  RandomWords random, unsigned long long* counts, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  with_rounding_mode(mode, [&]<RoundingMode Mode>() {
    if (e5m2) fp8_quantize_kernel<true, Mode><<<blocks_for(n), threads, 0, s>>>(in, out, n, scale, saturating, random, counts);
    else fp8_quantize_kernel<false, Mode><<<blocks_for(n), threads, 0, s>>>(in, out, n, scale, saturating, random, counts);
  });
  cudaCheckLaunch("fp8_quantize_kernel");
}

}  // namespace fpscope::cuda
