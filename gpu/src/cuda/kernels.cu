// CUDA kernels of the training engine and their launchers. The element-wise math is the shared
// FPSCOPE_HD code; only the parallel structure lives here.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "fpscope/core/cast.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/gpu/cast_record_element.hpp"
#include "fpscope/gpu/cast_record_element_device.cuh"
#include "fpscope/gpu/cuda_kernels.hpp"
#include "fpscope/core/loss_scaling.hpp"
#include "fpscope/gpu/softmax_cross_entropy.hpp"
#include "fpscope/gpu/optimizer_element.hpp"
#include "fpscope/gpu/sgd_update.hpp"

#include "block_largest.cuh"
#include "launch.hpp"

namespace fpscope::cuda {

namespace {

constexpr int slots = bin_slot_count;  // 280
constexpr int threads = 256;

// ----------------------------------------------------------------------------------------------
// CUDA kernels

// The recording part of a kernel. Each warp counts into its own sub-histogram in shared memory
// with plain shared atomics, so lanes contend only with their own warp; zeros (the bin a whole
// warp most often shares: ReLU outputs, masks, padding) and the three outcome counts are counted
// in each thread's registers. At the end of the block: the warps' sub-histograms summed per bin,
// the registers summed over each warp by shuffles, one global atomic per nonzero total.
constexpr int warps_per_block = threads / 32;
constexpr int block_bins_size = warps_per_block * slots;

struct BlockRecorder {
  unsigned int* warp_bins;
  unsigned int zeros = 0, flushed = 0, subnormal = 0, overflowed = 0;

  // Every thread of the block constructs it (the constructor synchronises the block).
  __device__ explicit BlockRecorder(unsigned int* block_bins) : warp_bins(block_bins + (threadIdx.x / 32) * slots) {
    for (int i = threadIdx.x; i < block_bins_size; i += blockDim.x) block_bins[i] = 0;
    __syncthreads();
  }
  __device__ void add(int slot) {
    if (slot == bin_zero) ++zeros;
    else atomicAdd(&warp_bins[slot], 1u);
  }
  __device__ void add_outcome(bool flushed_to_zero, bool made_subnormal, bool overflow) {
    flushed += flushed_to_zero ? 1u : 0u;
    subnormal += made_subnormal ? 1u : 0u;
    overflowed += overflow ? 1u : 0u;
  }
  // Every thread of the block calls it, once, after its last element. `counts` may be null.
  __device__ void merge(const unsigned int* block_bins, unsigned long long* histogram, unsigned long long* counts) {
    __syncthreads();
    for (int i = threadIdx.x; i < slots; i += blockDim.x) {
      unsigned int sum = 0;
      for (int w = 0; w < warps_per_block; ++w) sum += block_bins[w * slots + i];
      if (sum != 0) atomicAdd(&histogram[i], static_cast<unsigned long long>(sum));
    }
    unsigned int totals[4] = {zeros, flushed, subnormal, overflowed};
#pragma unroll
    for (int k = 0; k < 4; ++k)
      for (int offset = 16; offset > 0; offset /= 2) totals[k] += __shfl_down_sync(0xFFFFFFFFu, totals[k], offset);
    if ((threadIdx.x & 31u) == 0) {
      if (totals[0] != 0) atomicAdd(&histogram[bin_zero], static_cast<unsigned long long>(totals[0]));
      if (counts != nullptr)
        for (int k = 1; k < 4; ++k)
          if (totals[k] != 0) atomicAdd(&counts[k - 1], static_cast<unsigned long long>(totals[k]));
    }
  }
};

// Blocks for a recording kernel: enough to fill the device, few enough that merging the
// per-block histograms stays cheap (each block ends with up to 280 global atomics).
int record_blocks_for(std::size_t items) {
  const std::size_t wanted = (items + threads - 1) / threads;
  return static_cast<int>(wanted < 1024 ? (wanted == 0 ? 1 : wanted) : 1024);
}

// Kernel templates take plain integers (nvcc's host stubs cannot spell a class-type template
// argument); the device functions they call take the Format itself. The element's math is
// cast_record_element, which the CPU tests check against cast_and_record.
//
// One pass: each element is read once; `out` (float32, may be `in`) and `packed` (the format's
// 16-bit patterns, for cuBLAS) are written where not null. Unrecorded casts (Record false) build no
// histogram at all. Where the pointers allow, a thread takes four neighbouring elements per
// iteration through 16-byte loads and stores (four independent casts in flight); element i still
// draws stochastic word first_random + i (RandomWords::first_word(), read once a thread, and only
// in stochastic rounding).
template <Format F, RoundingMode Mode, bool Record>
__device__ __forceinline__ void cast_one(std::uint32_t u, std::size_t i, BlockRecorder* recorder, std::uint64_t stochastic_seed,
                                         std::uint64_t first_random, float& rounded, std::uint16_t& narrow) {
  CastRecordElement e;
  if constexpr (has_conversion_instruction<F, Mode>) e = cast_record_element_by_instruction<F>(u);
  else e = cast_record_element<F, Mode>(u, stochastic_seed, first_random, i);
  rounded = bits_float(e.rounded);
  narrow = static_cast<std::uint16_t>(e.narrow);
  if constexpr (Record) {
    recorder->add(e.slot);
    recorder->add_outcome(e.flushed_to_zero, e.made_subnormal, e.overflowed);
  }
}

// `top` takes the largest magnitude_bits of the thread's elements, read before their cast.
template <Format F, RoundingMode Mode, bool Record>
__device__ __forceinline__ void cast_loop(const float* in, float* out, std::uint16_t* packed, std::size_t n, bool vectors,
                                          BlockRecorder* recorder, std::uint64_t stochastic_seed, std::uint64_t first_random, unsigned int& top) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  std::size_t scalar_from = 0;
  if (vectors) {
    const std::size_t quads = n / 4;
    for (std::size_t q = first; q < quads; q += stride) {
      const float4 v = reinterpret_cast<const float4*>(in)[q];
      const std::uint32_t u[4] = {float_bits(v.x), float_bits(v.y), float_bits(v.z), float_bits(v.w)};
      top = max(top, max(max(magnitude_bits(v.x), magnitude_bits(v.y)), max(magnitude_bits(v.z), magnitude_bits(v.w))));
      float r[4];
      std::uint16_t p[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) cast_one<F, Mode, Record>(u[k], 4 * q + k, recorder, stochastic_seed, first_random, r[k], p[k]);
      if (out != nullptr) reinterpret_cast<float4*>(out)[q] = make_float4(r[0], r[1], r[2], r[3]);
      if (packed != nullptr)
        reinterpret_cast<uint2*>(packed)[q] = make_uint2(p[0] | (static_cast<unsigned int>(p[1]) << 16), p[2] | (static_cast<unsigned int>(p[3]) << 16));
    }
    scalar_from = quads * 4;
  }
  for (std::size_t i = scalar_from + first; i < n; i += stride) {
    float r;
    std::uint16_t p;
    top = max(top, magnitude_bits(in[i]));
    cast_one<F, Mode, Record>(float_bits(in[i]), i, recorder, stochastic_seed, first_random, r, p);
    if (out != nullptr) out[i] = r;
    if (packed != nullptr) packed[i] = p;
  }
}

template <int ExponentBits, int MantissaBits, RoundingMode Mode, bool Record>
__global__ void __launch_bounds__(threads) cast_record_kernel(const float* in, float* out, std::uint16_t* packed, std::size_t n, bool vectors,
                                                              unsigned long long* histogram, unsigned long long* counts, unsigned int* largest,
                                                              RandomWords random, const int* skip) {
  constexpr Format F{ExponentBits, MantissaBits, Flavour::ieee};
  if (skip != nullptr && *skip != 0) return;  // the whole grid reads the same word
  const std::uint64_t stochastic_seed = random.seed, first_random = Mode == RoundingMode::stochastic ? random.first_word() : 0;
  unsigned int top = 0;
  if constexpr (Record) {
    __shared__ unsigned int block_bins[block_bins_size];
    BlockRecorder recorder(block_bins);
    cast_loop<F, Mode, true>(in, out, packed, n, vectors, &recorder, stochastic_seed, first_random, top);
    recorder.merge(block_bins, histogram, counts);
  } else {
    cast_loop<F, Mode, false>(in, out, packed, n, vectors, nullptr, stochastic_seed, first_random, top);
  }
  merge_largest(top, largest);
}

// A BlockRecorder where Record (every thread of the block constructs it), nothing where not: an
// unrecorded instantiation keeps no bins and merges nothing.
template <bool Record>
struct OptionalRecorder {
  __device__ explicit OptionalRecorder(unsigned int*) {}
  __device__ BlockRecorder* get() { return nullptr; }
  __device__ void merge(const unsigned int*, unsigned long long*, unsigned long long*) {}
};
template <>
struct OptionalRecorder<true> {
  BlockRecorder recorder;
  __device__ explicit OptionalRecorder(unsigned int* bins) : recorder(bins) {}
  __device__ BlockRecorder* get() { return &recorder; }
  __device__ void merge(const unsigned int* bins, unsigned long long* histogram, unsigned long long* counts) { recorder.merge(bins, histogram, counts); }
};

// A linear layer's forward epilogue (device_ops.hpp's ForwardEpilogue) in one pass: per element
// the bias added, z's cast (recorded where RecordZ, its reading in z_top), then where e.activate
// the activation and its cast (recorded where RecordA, its reading in a_top) -- the operations of
// DeviceOps::compose_forward_epilogue in its order, so its bits, bins, counts and readings; z is
// read once and each output written once, where the composition makes four launches and reads z
// four times. Each recorded cast counts into its own per-warp bins.
template <int ExponentBits, int MantissaBits, RoundingMode Mode, bool RecordZ, bool RecordA>
__global__ void __launch_bounds__(threads) forward_epilogue_kernel(ForwardEpilogue e) {
  constexpr Format F{ExponentBits, MantissaBits, Flavour::ieee};
  __shared__ unsigned int z_bins[RecordZ ? block_bins_size : 1];
  __shared__ unsigned int a_bins[RecordA ? block_bins_size : 1];
  OptionalRecorder<RecordZ> z_recorder(z_bins);
  OptionalRecorder<RecordA> a_recorder(a_bins);
  const std::size_t n = e.count(), rows = static_cast<std::size_t>(e.rows);
  constexpr bool stochastic = Mode == RoundingMode::stochastic;
  const std::uint64_t z_first_random = stochastic ? e.z_random.first_word() : 0;
  const std::uint64_t a_first_random = stochastic && e.activate ? e.a_random.first_word() : 0;
  unsigned int z_top = 0, a_top = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float biased = e.z[i] + e.bias[e.bias_per_column ? i / rows : i % rows];
    z_top = max(z_top, magnitude_bits(biased));
    float z;
    std::uint16_t z16;
    cast_one<F, Mode, RecordZ>(float_bits(biased), i, z_recorder.get(), e.z_random.seed, z_first_random, z, z16);
    e.z[i] = z;
    if (e.z16 != nullptr) e.z16[i] = z16;
    if (!e.activate) continue;
    const float a = activate(e.activation, z);
    if (e.a != nullptr) e.a[i] = a;
    a_top = max(a_top, magnitude_bits(a));
    float rounded;
    std::uint16_t a16;
    cast_one<F, Mode, RecordA>(float_bits(a), i, a_recorder.get(), e.a_random.seed, a_first_random, rounded, a16);
    if (e.a_rounded != nullptr) e.a_rounded[i] = rounded;
    if (e.a16 != nullptr) e.a16[i] = a16;
  }
  z_recorder.merge(z_bins, e.z_slots.histogram, e.z_slots.counts);
  a_recorder.merge(a_bins, e.a_slots.histogram, e.a_slots.counts);
  merge_largest(z_top, e.z_slots.largest);
  merge_largest(a_top, e.activate ? e.a_slots.largest : nullptr);
}

// The histogram of float32 values without a cast (the fp32 policy), where `histogram` is not
// null, and their reading into `largest` (merge_largest), where it is not: four elements per
// thread where the pointer allows.
__global__ void __launch_bounds__(threads) histogram_kernel(const float* in, std::size_t n, bool vectors, unsigned long long* histogram,
                                                            unsigned int* largest) {
  __shared__ unsigned int block_bins[block_bins_size];
  BlockRecorder recorder(block_bins);
  const bool record = histogram != nullptr;
  unsigned int top = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  std::size_t scalar_from = 0;
  if (vectors) {
    const std::size_t quads = n / 4;
    for (std::size_t q = first; q < quads; q += stride) {
      const float4 v = reinterpret_cast<const float4*>(in)[q];
      top = max(top, max(max(magnitude_bits(v.x), magnitude_bits(v.y)), max(magnitude_bits(v.z), magnitude_bits(v.w))));
      if (!record) continue;
      recorder.add(histogram_slot_of_f32(float_bits(v.x)));
      recorder.add(histogram_slot_of_f32(float_bits(v.y)));
      recorder.add(histogram_slot_of_f32(float_bits(v.z)));
      recorder.add(histogram_slot_of_f32(float_bits(v.w)));
    }
    scalar_from = quads * 4;
  }
  for (std::size_t i = scalar_from + first; i < n; i += stride) {
    top = max(top, magnitude_bits(in[i]));
    if (record) recorder.add(histogram_slot_of_f32(float_bits(in[i])));
  }
  if (record) recorder.merge(block_bins, histogram, nullptr);
  merge_largest(top, largest);
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

// The unscaled gradients' squares summed in float64 into sum_of_squares_partials partials, each
// block's in a fixed order (a grid-stride loop per thread, then a tree over the block): the same
// bits run after run. The unscaling is optimizer_element.hpp's, at the step's scale.
constexpr int partial_threads = sum_of_squares_threads;
__global__ void __launch_bounds__(partial_threads) sum_of_squares_kernel(const float* g, std::size_t n, const float* step_scale, double* partials) {
  OptimizerStep unscale;
  unscale.loss_scale = *step_scale;
  double sum = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const double u = unscaled_gradient(g[i], unscale);
    sum += u * u;
  }
  __shared__ double tree[partial_threads];
  tree[threadIdx.x] = sum;
  __syncthreads();
  for (int half = partial_threads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) tree[threadIdx.x] += tree[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = tree[0];
}

// One thread: the step's settings from the scaler's outputs (skip, the step's scale) and, where the
// run clips, the norm from the partials summed in order; the update count moves on unless skipped.
__global__ void optimizer_step_kernel(OptimizerSettings settings, const double* partials, int partial_count, const float* step_scale,
                                      const int* skip, long long* updates, OptimizerStep* step) {
  *step = prepared_optimizer_step(settings, partials, partial_count, *step_scale, *updates);
  if (*skip == 0) *updates += 1;
}
__global__ void optimizer_update_kernel(float* w, float* first, float* second, const float* g, std::size_t n, const OptimizerStep* step,
                                        const int* skip) {
  if (*skip != 0) return;
  const OptimizerStep s = *step;
  float unused_first = 0, unused_second = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float& f = first != nullptr ? first[i] : unused_first;
    float& v = second != nullptr ? second[i] : unused_second;
    update_element(w[i], f, v, g[i], s);
  }
}

__global__ void ordered_sum_kernel(const float* values, int n, float* out) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += values[i];
  *out = static_cast<float>(sum);
}

__global__ void advance_counter_kernel(std::uint64_t* counter, std::uint64_t words, std::uint64_t words_unless_skipped, const int* skip) {
  *counter += words + (skip == nullptr || *skip == 0 ? words_unless_skipped : 0);
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

// Threads for the cast: each takes four elements per iteration where it can.
int cast_blocks_for(std::size_t n, bool vectors) { return blocks_for(vectors ? (n + 3) / 4 : n); }

template <Format F, RoundingMode Mode>
void launch_cast_record_in(const float* in, float* out, std::uint16_t* packed, std::size_t n, CastRecordBuffers b, cudaStream_t s,
                           RandomWords random, const int* skip) {
  const auto aligned = [](const void* p, std::uintptr_t bytes) { return p == nullptr || reinterpret_cast<std::uintptr_t>(p) % bytes == 0; };
  const bool vectors = aligned(in, 16) && aligned(out, 16) && aligned(packed, 8);
  zero_largest(b.largest, s);
  auto* largest = reinterpret_cast<unsigned int*>(b.largest);
  if (b.histogram != nullptr)
    cast_record_kernel<F.exponent_bits, F.mantissa_bits, Mode, true>
        <<<record_blocks_for(vectors ? (n + 3) / 4 : n), threads, 0, s>>>(in, out, packed, n, vectors, b.histogram, b.counts, largest, random, skip);
  else
    cast_record_kernel<F.exponent_bits, F.mantissa_bits, Mode, false>
        <<<cast_blocks_for(n, vectors), threads, 0, s>>>(in, out, packed, n, vectors, nullptr, nullptr, largest, random, skip);
}

template <Format F, RoundingMode Mode>
void launch_forward_epilogue_in(const ForwardEpilogue& e, cudaStream_t s) {
  const bool record_z = e.z_slots.histogram != nullptr, record_a = e.activate && e.a_slots.histogram != nullptr;
  const int blocks = record_z || record_a ? record_blocks_for(e.count()) : blocks_for(e.count());
  if (record_z && record_a) forward_epilogue_kernel<F.exponent_bits, F.mantissa_bits, Mode, true, true><<<blocks, threads, 0, s>>>(e);
  else if (record_z) forward_epilogue_kernel<F.exponent_bits, F.mantissa_bits, Mode, true, false><<<blocks, threads, 0, s>>>(e);
  else if (record_a) forward_epilogue_kernel<F.exponent_bits, F.mantissa_bits, Mode, false, true><<<blocks, threads, 0, s>>>(e);
  else forward_epilogue_kernel<F.exponent_bits, F.mantissa_bits, Mode, false, false><<<blocks, threads, 0, s>>>(e);
}

template <Format F>
void launch_forward_epilogue(const ForwardEpilogue& e, cudaStream_t s) {
  switch (e.mode) {
    case RoundingMode::nearest_even: launch_forward_epilogue_in<F, RoundingMode::nearest_even>(e, s); break;
    case RoundingMode::nearest_away: launch_forward_epilogue_in<F, RoundingMode::nearest_away>(e, s); break;
    case RoundingMode::toward_zero: launch_forward_epilogue_in<F, RoundingMode::toward_zero>(e, s); break;
    case RoundingMode::toward_positive: launch_forward_epilogue_in<F, RoundingMode::toward_positive>(e, s); break;
    case RoundingMode::toward_negative: launch_forward_epilogue_in<F, RoundingMode::toward_negative>(e, s); break;
    case RoundingMode::odd: launch_forward_epilogue_in<F, RoundingMode::odd>(e, s); break;
    case RoundingMode::stochastic: launch_forward_epilogue_in<F, RoundingMode::stochastic>(e, s); break;
  }
  cudaCheckLaunch("forward_epilogue");
}

template <Format F>
void launch_cast_record(const float* in, float* out, std::uint16_t* packed, std::size_t n, RoundingMode mode, CastRecordBuffers b,
                        cudaStream_t s, RandomWords random, const int* skip) {
  switch (mode) {
    case RoundingMode::nearest_even: launch_cast_record_in<F, RoundingMode::nearest_even>(in, out, packed, n, b, s, random, skip); break;
    case RoundingMode::nearest_away: launch_cast_record_in<F, RoundingMode::nearest_away>(in, out, packed, n, b, s, random, skip); break;
    case RoundingMode::toward_zero: launch_cast_record_in<F, RoundingMode::toward_zero>(in, out, packed, n, b, s, random, skip); break;
    case RoundingMode::toward_positive: launch_cast_record_in<F, RoundingMode::toward_positive>(in, out, packed, n, b, s, random, skip); break;
    case RoundingMode::toward_negative: launch_cast_record_in<F, RoundingMode::toward_negative>(in, out, packed, n, b, s, random, skip); break;
    case RoundingMode::odd: launch_cast_record_in<F, RoundingMode::odd>(in, out, packed, n, b, s, random, skip); break;
    case RoundingMode::stochastic: launch_cast_record_in<F, RoundingMode::stochastic>(in, out, packed, n, b, s, random, skip); break;
  }
  cudaCheckLaunch("cast_record");
}

}  // namespace

void cast_and_record(const float* in, float* out, std::size_t n, bool bf16, RoundingMode mode, CastRecordBuffers buffers,
                     void* stream, RandomWords random, std::uint16_t* packed, const int* skip) {
  const auto s = static_cast<cudaStream_t>(stream);
  if (bf16) launch_cast_record<formats::bf16>(in, out, packed, n, mode, buffers, s, random, skip);
  else launch_cast_record<formats::fp16>(in, out, packed, n, mode, buffers, s, random, skip);
}

void advance_counter(std::uint64_t* counter, std::uint64_t words, std::uint64_t words_unless_skipped, const int* skip, void* stream) {
  advance_counter_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(counter, words, words_unless_skipped, skip);
  cudaCheckLaunch("advance_counter_kernel");
}

void forward_epilogue(const ForwardEpilogue& e, void* stream) {
  e.check();
  const auto s = static_cast<cudaStream_t>(stream);
  zero_largest(e.z_slots.largest, s);
  if (e.activate) zero_largest(e.a_slots.largest, s);
  if (e.bf16) launch_forward_epilogue<formats::bf16>(e, s);
  else launch_forward_epilogue<formats::fp16>(e, s);
}

void sum_of_squares(const float* g, std::size_t n, const float* step_scale, double* partials, void* stream) {
  sum_of_squares_kernel<<<sum_of_squares_partials, partial_threads, 0, static_cast<cudaStream_t>(stream)>>>(g, n, step_scale, partials);
  cudaCheckLaunch("sum_of_squares_kernel");
}

void prepare_optimizer_step(const OptimizerSettings& settings, const double* partials, int partial_count, const float* step_scale,
                            const int* skip, long long* updates, OptimizerStep* step, void* stream) {
  optimizer_step_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(settings, partials, partial_count, step_scale, skip, updates, step);
  cudaCheckLaunch("optimizer_step_kernel");
}

void optimizer_update(float* w, float* first, float* second, const float* g, std::size_t n, const OptimizerStep* step, const int* skip,
                      void* stream) {
  optimizer_update_kernel<<<blocks_for(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(w, first, second, g, n, step, skip);
  cudaCheckLaunch("optimizer_update_kernel");
}

void update_scaler(const LossScalerConfig& config, LossScalerState* state, const int* found_non_finite, int* skip, float* step_scale,
                   void* stream) {
  scaler_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(config, state, found_non_finite, skip, step_scale);
  cudaCheckLaunch("scaler_kernel");
}

void record_histogram(const float* in, std::size_t n, CastRecordBuffers buffers, void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  const bool vectors = reinterpret_cast<std::uintptr_t>(in) % 16 == 0;
  zero_largest(buffers.largest, s);
  histogram_kernel<<<record_blocks_for(vectors ? (n + 3) / 4 : n), threads, 0, s>>>(in, n, vectors, buffers.histogram,
                                                                                 reinterpret_cast<unsigned int*>(buffers.largest));
  cudaCheckLaunch("histogram_kernel");
}

void add_bias(float* z, const float* bias, int rows, int cols, void* stream) {
  add_bias_kernel<<<blocks_for(static_cast<std::size_t>(rows) * cols), threads, 0, static_cast<cudaStream_t>(stream)>>>(z, bias, rows, cols);
  cudaCheckLaunch("add_bias_kernel");
}

void activation_forward(const float* z, float* out, std::size_t n, Activation activation, void* stream) {
  activation_forward_kernel<<<blocks_for(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(z, out, n, activation);
  cudaCheckLaunch("activation_forward_kernel");
}

void activation_backward(const float* z, float* gradient, std::size_t n, Activation activation, void* stream) {
  activation_backward_kernel<<<blocks_for(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(z, gradient, n, activation);
  cudaCheckLaunch("activation_backward_kernel");
}

void softmax_cross_entropy(const float* logits, const int* labels, int rows, int cols, const LossScalerState* state, float loss_weight,
                           float* gradient, float* row_loss, void* stream) {
  softmax_cross_entropy_kernel<<<(rows + threads - 1) / threads, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      logits, labels, rows, cols, state, loss_weight, gradient, row_loss);
  cudaCheckLaunch("softmax_cross_entropy_kernel");
}

void column_sums(const float* m, int rows, int cols, float* out, void* stream) {
  const int warps_per_block = threads / 32;
  column_sums_kernel<<<(cols + warps_per_block - 1) / warps_per_block, threads, 0, static_cast<cudaStream_t>(stream)>>>(m, rows, cols, out);
  cudaCheckLaunch("column_sums_kernel");
}

void find_non_finite(const float* values, std::size_t n, int* found_non_finite, void* stream) {
  find_non_finite_kernel<<<blocks_for(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(values, n, found_non_finite);
  cudaCheckLaunch("find_non_finite_kernel");
}

void sgd_update(float* w, const float* g, std::size_t n, float learning_rate, const float* step_scale, const int* skip, void* stream) {
  sgd_update_kernel<<<blocks_for(n), threads, 0, static_cast<cudaStream_t>(stream)>>>(w, g, n, learning_rate, step_scale, skip);
  cudaCheckLaunch("sgd_update_kernel");
}

void ordered_sum(const float* values, int n, float* out, void* stream) {
  ordered_sum_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(values, n, out);
  cudaCheckLaunch("ordered_sum_kernel");
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
