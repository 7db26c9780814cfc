// CUDA kernels of the training engine and their launchers. The element-wise math is the shared
// FPSCOPE_HD code; only the parallel structure lives here.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "fpscope/core/cast.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/gpu/cast_record_element.hpp"
#include "fpscope/gpu/cuda_kernels.hpp"
#include "fpscope/core/loss_scaling.hpp"
#include "fpscope/gpu/softmax_cross_entropy.hpp"
#include "fpscope/gpu/sgd_update.hpp"

// A CUDA error becomes an exception, as in cuda_mlp.cpp: this code runs inside the dlopen'd module
// of `fpscope train`, which must end with its sentence and a whole log, never exit from here.
#define cudaCheck(err) cuda_check((err), __FILE__, __LINE__)
static void cuda_check(cudaError_t error, const char* file, int line) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error at ") + file + ":" + std::to_string(line) + ": " + cudaGetErrorString(error));
}

namespace fpscope::cuda {

namespace {

constexpr int slots = bin_slot_count;  // 280
constexpr int threads = 256;

// ----------------------------------------------------------------------------------------------
// CUDA kernels

// Adds one per lane to shared counter `slot`, with one atomic per group of this warp's active
// lanes that share the slot (warp aggregation: tensors hold long runs of one binade, which
// would otherwise queue on one shared-memory counter).
__device__ void add_warp_aggregated(unsigned int* counters, int slot) {
  const unsigned int active = __activemask();
  const unsigned int peers = __match_any_sync(active, slot);
  if ((threadIdx.x & 31u) == static_cast<unsigned int>(__ffs(peers) - 1)) atomicAdd(&counters[slot], static_cast<unsigned int>(__popc(peers)));
}

// Adds the number of active lanes for which `condition` holds, once per warp.
__device__ void add_warp_count(unsigned int* counter, bool condition) {
  const unsigned int active = __activemask();
  const unsigned int votes = __ballot_sync(active, condition);
  if (votes != 0 && (threadIdx.x & 31u) == static_cast<unsigned int>(__ffs(active) - 1)) atomicAdd(counter, static_cast<unsigned int>(__popc(votes)));
}

// Kernel templates take plain integers (nvcc's host stubs cannot spell a class-type template
// argument); the device functions they call take the Format itself. The element's math is
// cast_record_element, which the CPU tests check against cast_and_record.
template <int ExponentBits, int MantissaBits, RoundingMode Mode>
__global__ void cast_record_kernel(const float* in, float* out, std::size_t n, unsigned long long* histogram,
                                   unsigned long long* counts, std::uint64_t stochastic_seed, std::uint64_t first_random) {
  constexpr Format F{ExponentBits, MantissaBits, Flavour::ieee};
  __shared__ unsigned int bins[slots];
  __shared__ unsigned int outcome[3];
  for (int i = threadIdx.x; i < slots; i += blockDim.x) bins[i] = 0;
  if (threadIdx.x < 3) outcome[threadIdx.x] = 0;
  __syncthreads();
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const CastRecordElement e = cast_record_element<F, Mode>(float_bits(in[i]), stochastic_seed, first_random, i);
    out[i] = bits_float(e.rounded);
    add_warp_aggregated(bins, e.slot);
    add_warp_count(&outcome[0], e.flushed_to_zero);
    add_warp_count(&outcome[1], e.made_subnormal);
    add_warp_count(&outcome[2], e.overflowed);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < slots; i += blockDim.x)
    if (bins[i] != 0) atomicAdd(&histogram[i], static_cast<unsigned long long>(bins[i]));
  if (threadIdx.x < 3 && outcome[threadIdx.x] != 0) atomicAdd(&counts[threadIdx.x], static_cast<unsigned long long>(outcome[threadIdx.x]));
}

__global__ void histogram_kernel(const float* in, std::size_t n, unsigned long long* histogram) {
  __shared__ unsigned int bins[slots];
  for (int i = threadIdx.x; i < slots; i += blockDim.x) bins[i] = 0;
  __syncthreads();
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    add_warp_aggregated(bins, histogram_slot_of_f32(float_bits(in[i])));
  __syncthreads();
  for (int i = threadIdx.x; i < slots; i += blockDim.x)
    if (bins[i] != 0) atomicAdd(&histogram[i], static_cast<unsigned long long>(bins[i]));
}

template <int ExponentBits, int MantissaBits>
__global__ void pack_16_kernel(const float* in, std::uint16_t* out, std::size_t n) {
  constexpr Format F{ExponentBits, MantissaBits, Flavour::ieee};
  const CastOptions options{};
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::uint32_t flags = 0;  // exact: the value is already representable
    out[i] = static_cast<std::uint16_t>(cast_from_f32<F, RoundingMode::nearest_even>(float_bits(in[i]), options, 0, flags));
  }
}

// Column-major z (rows x cols): element i is in column i / rows.
__global__ void add_bias_kernel(float* z, const float* bias, int rows, int cols) {
  const std::size_t n = static_cast<std::size_t>(rows) * cols;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    z[i] += bias[i / static_cast<std::size_t>(rows)];
}

__global__ void activation_forward_kernel(const float* z, float* out, std::size_t n, Activation activation) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    out[i] = activate(activation, z[i]);
}

__global__ void activation_backward_kernel(const float* z, float* gradient, std::size_t n, Activation activation) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    gradient[i] *= activation_derivative(activation, z[i]);
}

__global__ void softmax_cross_entropy_kernel(const float* logits, const int* labels, int rows, int cols, const LossScalerState* state,
                                             float loss_weight, float* gradient, float* row_loss) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float factor = static_cast<float>(state->scale) * loss_weight / static_cast<float>(rows);
  // Column-major: row r's logits are `rows` apart, as the CPU backend reads them.
  row_loss[r] = softmax_cross_entropy_row(logits + r, cols, rows, labels[r], factor, gradient + r);
}

// One warp per column of a column-major matrix (rows x cols): lanes stride down the column, then a
// fixed shuffle tree; the order depends on `rows` only, so a result is the same run after run.
__global__ void column_sums_kernel(const float* m, int rows, int cols, float* out) {
  const int warp = static_cast<int>((blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32);
  const int lane = static_cast<int>(threadIdx.x & 31u);
  if (warp >= cols) return;  // whole warps leave together: blockDim is a multiple of 32
  const float* column = m + static_cast<std::size_t>(warp) * rows;
  float sum = 0;
  for (int r = lane; r < rows; r += 32) sum += column[r];
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xFFFFFFFFu, sum, offset);
  if (lane == 0) out[warp] = sum;
}

__global__ void find_non_finite_kernel(const float* values, std::size_t n, int* found_non_finite) {
  bool non_finite = false;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    non_finite = non_finite || gradient_non_finite(values[i]);
  if (__any_sync(0xFFFFFFFFu, non_finite) && (threadIdx.x & 31) == 0) atomicExch(found_non_finite, 1);
}

__global__ void sgd_update_kernel(float* w, const float* g, std::size_t n, float learning_rate, const float* step_scale, const int* skip) {
  if (*skip != 0) return;
  const float factor = sgd_step_factor(learning_rate, *step_scale);
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    w[i] = sgd_update_element(w[i], g[i], factor);
}

__global__ void ordered_sum_kernel(const float* values, int n, float* out) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += values[i];
  *out = static_cast<float>(sum);
}

__global__ void scaler_kernel(LossScalerConfig config, LossScalerState* state, const int* found_non_finite, int* skip, float* step_scale) {
  *step_scale = static_cast<float>(state->scale);  // the scale this step's gradients carry
  *skip = apply_scaler_rule(config, *state, *found_non_finite != 0) ? 1 : 0;
}

// ----------------------------------------------------------------------------------------------
// kernel launchers

int blocks_for(std::size_t n) {
  const std::size_t wanted = (n + threads - 1) / threads;
  return static_cast<int>(wanted < 4096 ? (wanted == 0 ? 1 : wanted) : 4096);
}

template <Format F, RoundingMode Mode>
void launch_cast_record_in(const float* in, float* out, std::size_t n, CastRecordBuffers b, cudaStream_t s, std::uint64_t seed,
                           std::uint64_t first) {
  cast_record_kernel<F.exponent_bits, F.mantissa_bits, Mode><<<blocks_for(n), threads, 0, s>>>(in, out, n, b.histogram, b.counts, seed, first);
}

template <Format F>
void launch_cast_record(const float* in, float* out, std::size_t n, RoundingMode mode, CastRecordBuffers b, cudaStream_t s,
                        std::uint64_t seed, std::uint64_t first) {
  switch (mode) {
    case RoundingMode::nearest_even: launch_cast_record_in<F, RoundingMode::nearest_even>(in, out, n, b, s, seed, first); break;
    case RoundingMode::nearest_away: launch_cast_record_in<F, RoundingMode::nearest_away>(in, out, n, b, s, seed, first); break;
    case RoundingMode::toward_zero: launch_cast_record_in<F, RoundingMode::toward_zero>(in, out, n, b, s, seed, first); break;
    case RoundingMode::toward_positive: launch_cast_record_in<F, RoundingMode::toward_positive>(in, out, n, b, s, seed, first); break;
    case RoundingMode::toward_negative: launch_cast_record_in<F, RoundingMode::toward_negative>(in, out, n, b, s, seed, first); break;
    case RoundingMode::odd: launch_cast_record_in<F, RoundingMode::odd>(in, out, n, b, s, seed, first); break;
    case RoundingMode::stochastic: launch_cast_record_in<F, RoundingMode::stochastic>(in, out, n, b, s, seed, first); break;
  }
  cudaCheck(cudaGetLastError());
}

}  // namespace

void cast_and_record(const float* in, float* out, std::size_t n, bool bf16, RoundingMode mode, CastRecordBuffers buffers,
                     void* stream, std::uint64_t stochastic_seed, std::uint64_t first_random) {
  const auto s = static_cast<cudaStream_t>(stream);
  if (bf16) launch_cast_record<formats::bf16>(in, out, n, mode, buffers, s, stochastic_seed, first_random);
  else launch_cast_record<formats::fp16>(in, out, n, mode, buffers, s, stochastic_seed, first_random);
}

void update_scaler(const LossScalerConfig& config, LossScalerState* state, const int* found_non_finite, int* skip, float* step_scale,
                   void* stream) {
  scaler_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(config, state, found_non_finite, skip, step_scale);
  cudaCheck(cudaGetLastError());
}

void record_histogram(const float* in, std::size_t n, unsigned long long* histogram, void* stream) {
  histogram_kernel<<<blocks_for(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(in, n, histogram);
  cudaCheck(cudaGetLastError());
}

void pack_16(const float* in, std::uint16_t* out, std::size_t n, bool bf16, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  if (bf16) pack_16_kernel<formats::bf16.exponent_bits, formats::bf16.mantissa_bits><<<blocks_for(n), threads, 0, s>>>(in, out, n);
  else pack_16_kernel<formats::fp16.exponent_bits, formats::fp16.mantissa_bits><<<blocks_for(n), threads, 0, s>>>(in, out, n);
  cudaCheck(cudaGetLastError());
}

void add_bias(float* z, const float* bias, int rows, int cols, void* stream) {
  add_bias_kernel<<<blocks_for(static_cast<std::size_t>(rows) * cols), threads, 0, static_cast<cudaStream_t>(stream)>>>(z, bias, rows, cols);
  cudaCheck(cudaGetLastError());
}

void activation_forward(const float* z, float* out, std::size_t n, Activation activation, void* stream) {
  activation_forward_kernel<<<blocks_for(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(z, out, n, activation);
  cudaCheck(cudaGetLastError());
}

void activation_backward(const float* z, float* gradient, std::size_t n, Activation activation, void* stream) {
  activation_backward_kernel<<<blocks_for(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(z, gradient, n, activation);
  cudaCheck(cudaGetLastError());
}

void softmax_cross_entropy(const float* logits, const int* labels, int rows, int cols, const LossScalerState* state, float loss_weight,
                           float* gradient, float* row_loss, void* stream) {
  softmax_cross_entropy_kernel<<<(rows + threads - 1) / threads, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, labels, rows, cols, state, loss_weight, gradient, row_loss);
  cudaCheck(cudaGetLastError());
}

void column_sums(const float* m, int rows, int cols, float* out, void* stream) {
  const int warps_per_block = threads / 32;
  column_sums_kernel<<<(cols + warps_per_block - 1) / warps_per_block, threads, 0, static_cast<cudaStream_t>(stream)>>>(m, rows, cols, out);
  cudaCheck(cudaGetLastError());
}

void find_non_finite(const float* values, std::size_t n, int* found_non_finite, void* stream) {
  find_non_finite_kernel<<<blocks_for(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(values, n, found_non_finite);
  cudaCheck(cudaGetLastError());
}

void sgd_update(float* w, const float* g, std::size_t n, float learning_rate, const float* step_scale, const int* skip, void* stream) {
  sgd_update_kernel<<<blocks_for(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(w, g, n, learning_rate, step_scale, skip);
  cudaCheck(cudaGetLastError());
}

void ordered_sum(const float* values, int n, float* out, void* stream) {
  ordered_sum_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(values, n, out);
  cudaCheck(cudaGetLastError());
}

int device_count(std::string* why) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    // The runtime's own reason (a driver too old for the runtime, no driver at all, an empty
    // CUDA_VISIBLE_DEVICES, missing device nodes), not one sentence for all of them.
    if (why != nullptr) *why = std::string(cudaGetErrorString(error)) + " (" + cudaGetErrorName(error) + ")";
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "the CUDA runtime finds no device";
  return count;
}

}  // namespace fpscope::cuda
