// The GPT's kernels (cuda_kernels.hpp): a warp per LayerNorm column, softmax row and token's
// cross-entropy; a thread per element, per (feature, run of 64 tokens) of a bias or gain gradient,
// per (row, feature) of an embedding table's gradient, or per feature elsewhere. Each runs
// gpt_element.hpp's FPSCOPE_HD function -- the same function the host twin (host_device_ops.cpp)
// runs in a loop, with a warp of its own that sums in the same order -- so the two agree bit for
// bit but for CUDA's expf, erff and logf.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "fpscope/gpu/activation.hpp"
#include "fpscope/gpu/cuda_kernels.hpp"
#include "fpscope/gpu/gpt_element.hpp"
#include "launch.hpp"

namespace fpscope::cuda {

namespace {

constexpr int threads = 256;
int blocks_for(std::size_t n) { return grid_for(n, threads, 65535); }
__device__ std::size_t first_index() { return blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; }
__device__ std::size_t index_stride() { return static_cast<std::size_t>(gridDim.x) * blockDim.x; }

// A real warp for gpt_element.hpp's functions: each lane its elements, sums by __shfl_down_sync
// (HostWarp's order, so the host twin's bits), the total broadcast from lane 0. Every lane of the
// warp calls together (the launchers give whole warps; the loops over columns are warp-uniform).
struct DeviceWarp {
  int lane;
  template <typename Term>
  __device__ float sum(int n, const Term& term) const {
    float partial = 0;
    for (int i = lane; i < n; i += warp_lanes) partial += term(i);
    for (int offset = warp_lanes / 2; offset > 0; offset /= 2) partial = partial + __shfl_down_sync(0xFFFFFFFFu, partial, offset);
    return __shfl_sync(0xFFFFFFFFu, partial, 0);
  }
  template <typename Term>
  __device__ float max(int n, const Term& term) const {
    float top = -INFINITY;
    for (int i = lane; i < n; i += warp_lanes) top = term(i) > top ? term(i) : top;
    for (int offset = warp_lanes / 2; offset > 0; offset /= 2) {
      const float other = __shfl_down_sync(0xFFFFFFFFu, top, offset);
      top = other > top ? other : top;
    }
    return __shfl_sync(0xFFFFFFFFu, top, 0);
  }
  template <typename F>
  __device__ void for_each(int n, const F& f) const {
    for (int i = lane; i < n; i += warp_lanes) f(i);
  }
};
__device__ std::size_t first_warp() { return (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / warp_lanes; }
__device__ std::size_t warp_stride() { return static_cast<std::size_t>(gridDim.x) * blockDim.x / warp_lanes; }
__device__ DeviceWarp this_warp() { return DeviceWarp{static_cast<int>(threadIdx.x % warp_lanes)}; }
// Blocks for one warp per item (threads is a multiple of the warp).
int warp_blocks_for(std::size_t items) { return blocks_for(items * warp_lanes); }

__global__ void embed_kernel(const int* tokens, const float* token_table, const float* position_table, int vocab, int context, int width,
                             std::size_t n, float* x) {
  for (std::size_t i = first_index(); i < n; i += index_stride()) {
    const std::size_t column = i / static_cast<std::size_t>(width), d = i % static_cast<std::size_t>(width);
    x[i] = token_table[d * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(tokens[column])] +
           position_table[d * static_cast<std::size_t>(context) + column % static_cast<std::size_t>(context)];
  }
}
// A thread per (token row, feature) and per (position row, feature), neighbouring threads on
// neighbouring rows of the column-major tables; each sums its columns in order (the CPU's).
__global__ void token_gradient_kernel(const int* token_columns, const int* token_starts, const float* dx, int vocab, int width, std::size_t n,
                                      float* token_gradient) {
  for (std::size_t i = first_index(); i < n; i += index_stride())
    add_token_row_gradient(dx, width, token_columns, token_starts, vocab, static_cast<int>(i % static_cast<std::size_t>(vocab)),
                           static_cast<int>(i / static_cast<std::size_t>(vocab)), token_gradient);
}
__global__ void position_gradient_kernel(const float* dx, int width, int context, int columns, std::size_t n, float* position_gradient) {
  for (std::size_t i = first_index(); i < n; i += index_stride())
    add_position_row_gradient(dx, width, context, columns, static_cast<int>(i % static_cast<std::size_t>(context)),
                              static_cast<int>(i / static_cast<std::size_t>(context)), position_gradient);
}
// A warp per column.
__global__ void layer_norm_kernel(const float* x, const float* gain, const float* bias, int features, int columns, float* y, float* xhat,
                                  float* rstd) {
  const DeviceWarp warp = this_warp();
  for (std::size_t n = first_warp(); n < static_cast<std::size_t>(columns); n += warp_stride()) {
    const std::size_t at = n * static_cast<std::size_t>(features);
    const float r = layer_norm_column(warp, x + at, gain, bias, features, y + at, xhat + at);
    if (warp.lane == 0) rstd[n] = r;
  }
}
__global__ void layer_norm_backward_kernel(const float* dy, const float* gain, const float* xhat, const float* rstd, int features, int columns,
                                           float* dx, bool add) {
  const DeviceWarp warp = this_warp();
  for (std::size_t n = first_warp(); n < static_cast<std::size_t>(columns); n += warp_stride()) {
    const std::size_t at = n * static_cast<std::size_t>(features);
    layer_norm_backward_column(warp, dy + at, gain, xhat + at, rstd[n], features, dx + at, add);
  }
}
// A thread per (feature, run of 64 tokens): neighbouring threads read neighbouring features.
__global__ void token_run_sums_kernel(const float* a, const float* b, int features, std::size_t tokens, std::size_t n, float* run_sums) {
  for (std::size_t i = first_index(); i < n; i += index_stride())
    run_sums[i] = token_run_sum(a, b, features, tokens, static_cast<int>(i % static_cast<std::size_t>(features)), i / static_cast<std::size_t>(features));
}
// A thread per feature: the runs' sums added in order.
__global__ void add_run_sums_kernel(const float* run_sums, int features, std::size_t runs, float* into) {
  for (std::size_t f = first_index(); f < static_cast<std::size_t>(features); f += index_stride())
    add_run_sums(run_sums + f, runs, static_cast<std::size_t>(features), into + f);
}
__global__ void add_row_bias_kernel(float* y, const float* bias, int features, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += index_stride()) y[i] += bias[i % static_cast<std::size_t>(features)];
}
__global__ void add_into_kernel(float* x, const float* y, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += index_stride()) x[i] += y[i];
}
// A thread per query row of each triangle.
__global__ void pack_triangles_kernel(const float* full, int context, std::size_t rows, float factor, float* packed) {
  const std::size_t T = static_cast<std::size_t>(context), P = triangle_start(context);
  for (std::size_t r = first_index(); r < rows; r += index_stride()) {
    const std::size_t t = r / T;
    const int j = static_cast<int>(r % T);
    const float* in = full + t * T * T + static_cast<std::size_t>(j) * T;
    float* out = packed + t * P + triangle_start(j);
    for (int i = 0; i <= j; ++i) out[i] = in[i] * factor;
  }
}
__global__ void unpack_triangles_kernel(const float* packed, int context, std::size_t n, float factor, float* full, std::uint16_t* full16, bool bf16) {
  const std::size_t T = static_cast<std::size_t>(context), P = triangle_start(context);
  for (std::size_t at = first_index(); at < n; at += index_stride()) {
    const std::size_t t = at / (T * T), j = (at / T) % T, i = at % T;
    const float v = i <= j ? packed[t * P + triangle_start(static_cast<int>(j)) + i] * factor : 0.0f;
    if (full != nullptr) full[at] = v;
    if (full16 != nullptr) full16[at] = sixteen_bit_pattern(v, bf16);
  }
}
// A warp per query row.
__global__ void causal_softmax_kernel(const float* scores, int context, std::size_t rows, float* probabilities) {
  const std::size_t T = static_cast<std::size_t>(context), P = triangle_start(context);
  const DeviceWarp warp = this_warp();
  for (std::size_t r = first_warp(); r < rows; r += warp_stride()) {
    const int j = static_cast<int>(r % T);
    const std::size_t at = (r / T) * P + triangle_start(j);
    causal_softmax_row(warp, scores + at, j + 1, probabilities + at);
  }
}
__global__ void softmax_backward_kernel(const float* probabilities, const float* dprobabilities, int context, std::size_t rows, float* dscores) {
  const std::size_t T = static_cast<std::size_t>(context), P = triangle_start(context);
  const DeviceWarp warp = this_warp();
  for (std::size_t r = first_warp(); r < rows; r += warp_stride()) {
    const int j = static_cast<int>(r % T);
    const std::size_t at = (r / T) * P + triangle_start(j);
    softmax_gradient_row(warp, probabilities + at, dprobabilities + at, j + 1, dscores + at);
  }
}
// A warp per token column.
__global__ void cross_entropy_columns_kernel(const float* logits, const int* targets, int classes, int columns, const LossScalerState* scaler,
                                             float loss_weight, float* gradient, float* losses) {
  const float factor = static_cast<float>(scaler->scale) * loss_weight / static_cast<float>(columns);
  const DeviceWarp warp = this_warp();
  for (std::size_t n = first_warp(); n < static_cast<std::size_t>(columns); n += warp_stride()) {
    const std::size_t at = n * static_cast<std::size_t>(classes);
    const float loss = cross_entropy_column(warp, logits + at, classes, targets[n], factor, gradient + at);
    if (warp.lane == 0) losses[n] = loss;
  }
}
__global__ void __launch_bounds__(loss_sum_threads) loss_sum_kernel(const float* losses, int n, double* sum) {
  __shared__ double tree[loss_sum_threads];
  double partial = 0;
  for (int i = static_cast<int>(threadIdx.x); i < n; i += loss_sum_threads) partial += static_cast<double>(losses[i]);
  tree[threadIdx.x] = partial;
  __syncthreads();
  for (int half = loss_sum_threads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) tree[threadIdx.x] = tree[threadIdx.x] + tree[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *sum = tree[0];
}

cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

void embed(const int* tokens, const float* token_table, const float* position_table, int vocab, int context, int width, int columns, float* x,
           void* stream) {
  const std::size_t n = static_cast<std::size_t>(width) * static_cast<std::size_t>(columns);
  embed_kernel<<<blocks_for(n), threads, 0, as_stream(stream)>>>(tokens, token_table, position_table, vocab, context, width, n, x);
  cudaCheckLaunch("embed");
}
void embed_backward(const int* token_columns, const int* token_starts, const float* dx, int vocab, int context, int width, int columns,
                    float* token_gradient, float* position_gradient, void* stream) {
  const std::size_t tokens = static_cast<std::size_t>(vocab) * static_cast<std::size_t>(width);
  token_gradient_kernel<<<blocks_for(tokens), threads, 0, as_stream(stream)>>>(token_columns, token_starts, dx, vocab, width, tokens, token_gradient);
  cudaCheckLaunch("token_gradient");
  const std::size_t positions = static_cast<std::size_t>(context) * static_cast<std::size_t>(width);
  position_gradient_kernel<<<blocks_for(positions), threads, 0, as_stream(stream)>>>(dx, width, context, columns, positions, position_gradient);
  cudaCheckLaunch("position_gradient");
}
void layer_norm(const float* x, const float* gain, const float* bias, int features, int columns, float* y, float* xhat, float* rstd, void* stream) {
  layer_norm_kernel<<<warp_blocks_for(static_cast<std::size_t>(columns)), threads, 0, as_stream(stream)>>>(x, gain, bias, features, columns, y, xhat, rstd);
  cudaCheckLaunch("layer_norm");
}
void layer_norm_backward(const float* dy, const float* gain, const float* xhat, const float* rstd, int features, int columns, float* dx, bool add,
                         void* stream) {
  layer_norm_backward_kernel<<<warp_blocks_for(static_cast<std::size_t>(columns)), threads, 0, as_stream(stream)>>>(dy, gain, xhat, rstd, features, columns,
                                                                                                             dx, add);
  cudaCheckLaunch("layer_norm_backward");
}
void add_token_sums(const float* a, const float* b, int features, int columns, float* into, float* run_sums, void* stream) {
  const std::size_t tokens = static_cast<std::size_t>(columns), runs = token_runs(tokens), n = runs * static_cast<std::size_t>(features);
  token_run_sums_kernel<<<blocks_for(n), threads, 0, as_stream(stream)>>>(a, b, features, tokens, n, run_sums);
  cudaCheckLaunch("token_run_sums");
  add_run_sums_kernel<<<blocks_for(static_cast<std::size_t>(features)), threads, 0, as_stream(stream)>>>(run_sums, features, runs, into);
  cudaCheckLaunch("add_run_sums");
}
void add_row_bias(float* y, const float* bias, int features, int columns, void* stream) {
  const std::size_t n = static_cast<std::size_t>(features) * static_cast<std::size_t>(columns);
  add_row_bias_kernel<<<blocks_for(n), threads, 0, as_stream(stream)>>>(y, bias, features, n);
  cudaCheckLaunch("add_row_bias");
}
void add_into(float* x, const float* y, std::size_t n, void* stream) {
  add_into_kernel<<<blocks_for(n), threads, 0, as_stream(stream)>>>(x, y, n);
  cudaCheckLaunch("add_into");
}
void pack_triangles(const float* full, int context, int triangles, float factor, float* packed, void* stream) {
  const std::size_t rows = static_cast<std::size_t>(triangles) * static_cast<std::size_t>(context);
  pack_triangles_kernel<<<blocks_for(rows), threads, 0, as_stream(stream)>>>(full, context, rows, factor, packed);
  cudaCheckLaunch("pack_triangles");
}
void unpack_triangles(const float* packed, int context, int triangles, float factor, float* full, std::uint16_t* full16, bool bf16, void* stream) {
  const std::size_t n = static_cast<std::size_t>(triangles) * static_cast<std::size_t>(context) * static_cast<std::size_t>(context);
  unpack_triangles_kernel<<<blocks_for(n), threads, 0, as_stream(stream)>>>(packed, context, n, factor, full, full16, bf16);
  cudaCheckLaunch("unpack_triangles");
}
void causal_softmax(const float* scores, int context, int triangles, float* probabilities, void* stream) {
  const std::size_t rows = static_cast<std::size_t>(triangles) * static_cast<std::size_t>(context);
  causal_softmax_kernel<<<warp_blocks_for(rows), threads, 0, as_stream(stream)>>>(scores, context, rows, probabilities);
  cudaCheckLaunch("causal_softmax");
}
void softmax_backward(const float* probabilities, const float* dprobabilities, int context, int triangles, float* dscores, void* stream) {
  const std::size_t rows = static_cast<std::size_t>(triangles) * static_cast<std::size_t>(context);
  softmax_backward_kernel<<<warp_blocks_for(rows), threads, 0, as_stream(stream)>>>(probabilities, dprobabilities, context, rows, dscores);
  cudaCheckLaunch("softmax_backward");
}
void cross_entropy_columns(const float* logits, const int* targets, int classes, int columns, const LossScalerState* scaler, float loss_weight,
                           float* gradient, float* losses, void* stream) {
  cross_entropy_columns_kernel<<<warp_blocks_for(static_cast<std::size_t>(columns)), threads, 0, as_stream(stream)>>>(logits, targets, classes, columns,
                                                                                                               scaler, loss_weight, gradient, losses);
  cudaCheckLaunch("cross_entropy_columns");
}
void loss_sum(const float* losses, int n, double* sum, void* stream) {
  loss_sum_kernel<<<1, loss_sum_threads, 0, as_stream(stream)>>>(losses, n, sum);
  cudaCheckLaunch("loss_sum");
}

}  // namespace fpscope::cuda
