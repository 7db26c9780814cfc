// The GPT's per-column and per-row math for the device backend, as FPSCOPE_HD code: a CUDA kernel
// runs each function for one column (row) -- a warp's lanes together where the function takes a
// Warp, one thread otherwise -- and the host twin (host_device_ops.cpp) runs the same function on
// the host, so that the two agree bit for bit wherever the C library's and CUDA's expf, erff and
// logf agree (CUDA's are within a few ulp of glibc's). The CPU backend's own pass (gpt_pass.hpp)
// computes the same quantities with vectorised sums: the same formulas, not always the same bits.
//
// Layout, as in gpt_pass.hpp: activations are features x tokens, column-major (token n's features
// contiguous); the attention triangles are packed per (sequence, head): query j's scores over keys
// 0..j at triangle_start(j).
#pragma once

#include <math.h>

#include <cstddef>
#include <cstdint>

#include "fpscope/core/cast.hpp"
#include "fpscope/core/hd.hpp"
#include "fpscope/gpu/elementwise_math.hpp"

namespace fpscope {

// Where query j's row starts in a packed causal triangle.
FPSCOPE_HD inline std::size_t triangle_start(int j) { return static_cast<std::size_t>(j) * static_cast<std::size_t>(j + 1) / 2; }

// A float32 that is a value of fp16 (bf16 where `bf16`) as that format's 16-bit pattern: exact,
// so any rounding mode would do; the products' 16-bit operands made from stored values.
FPSCOPE_HD inline std::uint16_t sixteen_bit_pattern(float value, bool bf16) {
  const CastOptions options{};
  std::uint32_t flags = 0;
  const std::uint32_t u = float_bits(value);
  return static_cast<std::uint16_t>(bf16 ? cast_from_f32<formats::bf16, RoundingMode::nearest_even>(u, options, 0, flags)
                                         : cast_from_f32<formats::fp16, RoundingMode::nearest_even>(u, options, 0, flags));
}

// The embeddings' gradient in the CPU pass's order: each token's column of dx added to its token's
// row, the batch's columns in order (n increasing), and to its position's row likewise. Each
// (row, feature) sum is independent of the others, so a kernel makes them in parallel, given the
// batch's columns grouped by token (`token_columns`: token 0's columns in order, then token 1's,
// ...; token v's from token_starts[v] to token_starts[v + 1]; group_columns_by_token makes them).
FPSCOPE_HD inline void add_token_row_gradient(const float* dx, int width, const int* token_columns, const int* token_starts, int vocab, int v, int d,
                                              float* token_gradient) {
  float& into = token_gradient[static_cast<std::size_t>(d) * static_cast<std::size_t>(vocab) + static_cast<std::size_t>(v)];
  float g = into;
  for (int k = token_starts[v]; k < token_starts[v + 1]; ++k)
    g += dx[static_cast<std::size_t>(token_columns[k]) * static_cast<std::size_t>(width) + static_cast<std::size_t>(d)];
  into = g;
}
FPSCOPE_HD inline void add_position_row_gradient(const float* dx, int width, int context, int columns, int p, int d, float* position_gradient) {
  float& into = position_gradient[static_cast<std::size_t>(d) * static_cast<std::size_t>(context) + static_cast<std::size_t>(p)];
  float g = into;
  for (int n = p; n < columns; n += context) g += dx[static_cast<std::size_t>(n) * static_cast<std::size_t>(width) + static_cast<std::size_t>(d)];
  into = g;
}

// A column's (row's) sums are a warp's: 32 lanes, lane l adding elements l, l + 32, ... in
// order, then the lanes added pairwise by halving -- lane l takes lane l + 16's, then l + 8's, ...
// -- as __shfl_down_sync does; lane 0's total is everyone's. The functions below take the warp as
// a parameter: the kernels pass one that is a real warp (gpt_kernels.cu), the host twin HostWarp,
// which makes the same sums in the same order on one thread. `Warp` provides sum(n, term) and
// max(n, term) over term(i), i in [0, n), and for_each(n, f), each lane f(i) on its own elements.
inline constexpr int warp_lanes = 32;

struct HostWarp {
  template <typename Term>
  float sum(int n, const Term& term) const {
    float lanes[warp_lanes];
    for (int lane = 0; lane < warp_lanes; ++lane) {
      float partial = 0;
      for (int i = lane; i < n; i += warp_lanes) partial += term(i);
      lanes[lane] = partial;
    }
    for (int offset = warp_lanes / 2; offset > 0; offset /= 2)
      for (int lane = 0; lane < offset; ++lane) lanes[lane] = lanes[lane] + lanes[lane + offset];
    return lanes[0];
  }
  template <typename Term>
  float max(int n, const Term& term) const {
    float lanes[warp_lanes];
    for (int lane = 0; lane < warp_lanes; ++lane) {
      float top = -INFINITY;
      for (int i = lane; i < n; i += warp_lanes) top = term(i) > top ? term(i) : top;
      lanes[lane] = top;
    }
    for (int offset = warp_lanes / 2; offset > 0; offset /= 2)
      for (int lane = 0; lane < offset; ++lane) lanes[lane] = lanes[lane + offset] > lanes[lane] ? lanes[lane + offset] : lanes[lane];
    return lanes[0];
  }
  template <typename F>
  void for_each(int n, const F& f) const {
    for (int i = 0; i < n; ++i) f(i);
  }
};

// LayerNorm's element formulas over any lane type (a float, a double, a vector of floats), each
// operation rounded as written: the device's column functions below, the CPU pass's float passes
// (elementwise_passes.hpp) and its float64 reference (gpt_pass.hpp) all compute them through these.
// xhat = (x - mean) * rstd; y = gain * xhat + bias; the input's gradient from the output's, dy.
template <typename L>
FPSCOPE_HD inline L normalized_of(L x, L mean, L rstd) {
  return (x - mean) * rstd;
}
template <typename L>
FPSCOPE_HD inline L layer_norm_output_of(L gain, L xhat, L bias) {
  return gain * xhat + bias;
}
template <typename L>
FPSCOPE_HD inline L layer_norm_gradient_of(L dy, L gain, L xhat, L mean_g, L mean_gx, L rstd) {
  return rstd * (dy * gain - mean_g - xhat * mean_gx);
}

// LayerNorm of one column of `features` values (PyTorch's: biased variance, epsilon 1e-5 inside
// the square root): y = gain * xhat + bias, xhat = (x - mean) * rstd kept for the backward, rstd
// returned.
template <typename Warp>
FPSCOPE_HD inline float layer_norm_column(const Warp& warp, const float* x, const float* gain, const float* bias, int features, float* y,
                                          float* xhat) {
  const float mean = warp.sum(features, [&](int i) { return x[i]; }) / static_cast<float>(features);
  const float squares = warp.sum(features, [&](int i) {
    const float d = x[i] - mean;
    return d * d;
  });
  const float rstd = 1.0f / sqrtf(squares / static_cast<float>(features) + 1e-5f);
  warp.for_each(features, [&](int i) {
    xhat[i] = normalized_of(x[i], mean, rstd);
    y[i] = layer_norm_output_of(gain[i], xhat[i], bias[i]);
  });
  return rstd;
}

// The input's gradient of one column from the output's (dy), into dx, or added to what dx holds
// where `add` (the residual stream's gradient: dx + the gradient made alone).
template <typename Warp>
FPSCOPE_HD inline void layer_norm_backward_column(const Warp& warp, const float* dy, const float* gain, const float* xhat, float rstd, int features,
                                                  float* dx, bool add) {
  const float mean_g = warp.sum(features, [&](int i) { return dy[i] * gain[i]; }) / static_cast<float>(features);
  const float mean_gx = warp.sum(features, [&](int i) { return dy[i] * gain[i] * xhat[i]; }) / static_cast<float>(features);
  warp.for_each(features, [&](int i) {
    const float gradient = layer_norm_gradient_of(dy[i], gain[i], xhat[i], mean_g, mean_gx, rstd);
    dx[i] = add ? dx[i] + gradient : gradient;
  });
}

// Feature f's sums over the tokens of a features x tokens matrix (times b's, element by element,
// where b is given) in the order gpt_pass.hpp's add_token_sums uses, so the bits are the CPU
// backend's: runs of 64 tokens, each summed token by token, then the runs' sums added in order.
// The runs are independent (a kernel makes them in parallel); only their addition is ordered.
inline constexpr std::size_t tokens_per_run = 64;
FPSCOPE_HD inline std::size_t token_runs(std::size_t tokens) { return (tokens + tokens_per_run - 1) / tokens_per_run; }
FPSCOPE_HD inline float token_run_sum(const float* a, const float* b, int features, std::size_t tokens, int f, std::size_t run) {
  const std::size_t start = run * tokens_per_run, end = start + tokens_per_run < tokens ? start + tokens_per_run : tokens;
  float sum = 0;
  for (std::size_t n = start; n < end; ++n) {
    const std::size_t i = n * static_cast<std::size_t>(features) + static_cast<std::size_t>(f);
    sum += b != nullptr ? a[i] * b[i] : a[i];
  }
  return sum;
}
// *into += the runs' sums (run_sums[r * stride]), in order.
FPSCOPE_HD inline void add_run_sums(const float* run_sums, std::size_t runs, std::size_t stride, float* into) {
  float total = *into;
  for (std::size_t r = 0; r < runs; ++r) total += run_sums[r * stride];
  *into = total;
}

// Softmax of one query's `count` scores (a packed triangle's row) into p: the largest subtracted,
// each exponential once, divided by their sum. Each lane reads back only the exponentials it wrote.
template <typename Warp>
FPSCOPE_HD inline void causal_softmax_row(const Warp& warp, const float* scores, int count, float* p) {
  const float top = warp.max(count, [&](int i) { return scores[i]; });
  warp.for_each(count, [&](int i) { p[i] = element::exp_of(scores[i] - top); });
  const float sum = warp.sum(count, [&](int i) { return p[i]; });
  warp.for_each(count, [&](int i) { p[i] /= sum; });
}

// The scores' gradient of one row from the probabilities' (dp): p * (dp - sum(p * dp)).
template <typename Warp>
FPSCOPE_HD inline void softmax_gradient_row(const Warp& warp, const float* p, const float* dp, int count, float* ds) {
  const float dot = warp.sum(count, [&](int i) { return p[i] * dp[i]; });
  warp.for_each(count, [&](int i) { ds[i] = p[i] * (dp[i] - dot); });
}

// The batch's loss, the tokens' losses summed in float64 by one block of loss_sum_threads threads:
// thread t adds losses t, t + threads, ... in order, then the threads' sums are added by a halving
// tree (thread t takes t + half's). The host twin keeps the order.
inline constexpr int loss_sum_threads = 256;

// Softmax cross-entropy of one token's column of logits (softmax_cross_entropy_row's formula, the
// column contiguous): the gradient (softmax - one-hot) * factor into `gradient`, the loss
// -log softmax[label] returned. The label's exponential is made again where the loss needs it (the
// same value: the lane that wrote it need not be the one that reads it).
template <typename Warp>
FPSCOPE_HD inline float cross_entropy_column(const Warp& warp, const float* logits, int classes, int label, float factor, float* gradient) {
  const float top = warp.max(classes, [&](int c) { return logits[c]; });
  warp.for_each(classes, [&](int c) { gradient[c] = element::exp_of(logits[c] - top); });
  const float sum = warp.sum(classes, [&](int c) { return gradient[c]; });
  warp.for_each(classes, [&](int c) { gradient[c] = (gradient[c] / sum - (c == label ? 1.0f : 0.0f)) * factor; });
  return -logf(element::exp_of(logits[label] - top) / sum);
}

}  // namespace fpscope
