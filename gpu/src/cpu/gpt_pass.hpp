// The GPT's forward and backward pass, written once over the scalar type: float for the trainer
// (GEMMs through OpenBLAS, the shared float32 GELU and cross-entropy, every stored tensor rounded
// by the trainer's hooks) and double for the reference the tests hold it to (Eigen products,
// nothing rounded). Activations are features x tokens (column n is token n of the batch, b * T + t),
// so LayerNorm, softmax and cross-entropy read contiguous columns.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "fpscope/gpu/activation.hpp"
#include "fpscope/gpu/activation_pass.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/parallel.hpp"
#include "fpscope/gpu/softmax_cross_entropy.hpp"

namespace fpscope::gpt_pass {

template <typename S>
using Matrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;

// Element-wise work is split across the threads in pieces of about parallel_grain values
// (parallel.hpp's grain_of): each column, head or element is computed on its own, so the bits
// never depend on them.

// out[i] = f(in[i]) over a whole matrix, on the threads.
template <typename S, typename F>
Matrix<S> map_elements(const Matrix<S>& in, F f) {
  Matrix<S> out(in.rows(), in.cols());
  parallel_map(in.data(), out.data(), static_cast<std::size_t>(in.size()), f);
  return out;
}

// Where a parameter sits in gpt_parameters' order.
struct Index {
  static constexpr int tokens = 0, positions = 1, per_block = 12;
  enum Block : int {
    ln1_gain,
    ln1_bias,
    qkv_weight,
    qkv_bias,
    proj_weight,
    proj_bias,
    ln2_gain,
    ln2_bias,
    fc_weight,
    fc_bias,
    mlp_proj_weight,
    mlp_proj_bias
  };
  static int block(int layer, Block which) { return 2 + per_block * layer + which; }
  static int final_gain(int layers) { return 2 + per_block * layers; }
  static int final_bias(int layers) { return 3 + per_block * layers; }
  static int count(int layers) { return 4 + per_block * layers; }
};

inline Matrix<float> product(const Matrix<float>& a, bool transpose_a, const Matrix<float>& b, bool transpose_b) {
  return gemm(a, transpose_a, b, transpose_b);
}
inline Matrix<double> product(const Matrix<double>& a, bool transpose_a, const Matrix<double>& b, bool transpose_b) {
  if (transpose_a && transpose_b) return a.transpose() * b.transpose();
  if (transpose_a) return a.transpose() * b;
  if (transpose_b) return a * b.transpose();
  return a * b;
}

// GELU in its exact (erf) form in float64 (float32's is activation_pass.hpp's).
inline double gelu(double z) { return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0))); }
inline double gelu_derivative(double z) {
  return 0.5 * (1.0 + std::erf(z / std::sqrt(2.0))) + z * std::exp(-0.5 * z * z) / std::sqrt(2.0 * 3.14159265358979323846);
}

// GELU over a whole tensor (its derivative times a gradient): float32 through the CPU backend's
// activation passes, float64 element by element.
inline Matrix<float> gelu_forward(const Matrix<float>& z) {
  Matrix<float> out(z.rows(), z.cols());
  activation_forward(Activation::gelu, z.data(), out.data(), static_cast<std::size_t>(z.size()));
  return out;
}
inline Matrix<double> gelu_forward(const Matrix<double>& z) { return map_elements(z, [](double v) { return gelu(v); }); }
inline Matrix<float> gelu_backward(const Matrix<float>& z, const Matrix<float>& gradient) {
  Matrix<float> out(z.rows(), z.cols());
  activation_backward(Activation::gelu, z.data(), gradient.data(), out.data(), static_cast<std::size_t>(z.size()));
  return out;
}
inline Matrix<double> gelu_backward(const Matrix<double>& z, const Matrix<double>& gradient) {
  Matrix<double> out(z.rows(), z.cols());
  for (Eigen::Index i = 0; i < z.size(); ++i) out.data()[i] = gradient.data()[i] * gelu_derivative(z.data()[i]);
  return out;
}

inline float cross_entropy(const float* logits, int classes, int label, float factor, float* gradient) {
  return softmax_cross_entropy_row(logits, classes, 1, label, factor, gradient);
}
inline double cross_entropy(const double* logits, int classes, int label, double factor, double* gradient) {
  double top = logits[0];
  for (int c = 1; c < classes; ++c) top = std::max(top, logits[c]);
  double sum = 0;
  for (int c = 0; c < classes; ++c) sum += std::exp(logits[c] - top);
  for (int c = 0; c < classes; ++c) gradient[c] = (std::exp(logits[c] - top) / sum - (c == label ? 1.0 : 0.0)) * factor;
  return -(logits[label] - top - std::log(sum));
}

// Where the pass rounds (and the trainer records) what it stores: `block` is the block's index,
// -1 for embed, ln_f and head; `features` the length of the tensor's contiguous feature runs (0
// for the packed attention tensors, which have none).
// They also make the products of the blocks' linear layers (attn.qkv, attn.proj, mlp.fc,
// mlp.proj: y = W x + b), where a recipe (gemm_recipe.hpp) changes what those products see; by
// default the products of the values as they are.
template <typename S>
struct Hooks {
  virtual ~Hooks() = default;
  virtual void activation(int block, const char* name, S* values, std::size_t count, std::size_t features) = 0;
  virtual void gradient(int block, const char* name, S* values, std::size_t count, std::size_t features) = 0;
  // W x.
  virtual Matrix<S> linear_forward(int /*block*/, const char* /*name*/, const Matrix<S>& weight, const Matrix<S>& x) {
    return product(weight, false, x, false);
  }
  // Sets `weight_gradient` to dy x^T (each block's linear weights are used once); returns W^T dy.
  virtual Matrix<S> linear_backward(int /*block*/, const char* /*name*/, const Matrix<S>& weight, const Matrix<S>& x, const Matrix<S>& dy,
                                    Matrix<S>& weight_gradient) {
    weight_gradient = product(dy, false, x, true);
    return product(weight, true, dy, false);
  }
};

template <typename S>
struct NoRounding final : Hooks<S> {
  void activation(int, const char*, S*, std::size_t, std::size_t) override {}
  void gradient(int, const char*, S*, std::size_t, std::size_t) override {}
};

template <typename S>
void stored(Hooks<S>& hooks, int block, const char* name, Matrix<S>& m) {
  hooks.activation(block, name, m.data(), static_cast<std::size_t>(m.size()), static_cast<std::size_t>(m.rows()));
}
template <typename S>
void stored_gradient(Hooks<S>& hooks, int block, const char* name, Matrix<S>& m) {
  hooks.gradient(block, name, m.data(), static_cast<std::size_t>(m.size()), static_cast<std::size_t>(m.rows()));
}

// A run of contiguous values as an Eigen array, for its vectorised reductions (one chain of float
// additions would wait on each).
template <typename S>
using ConstColumn = Eigen::Map<const Eigen::Array<S, Eigen::Dynamic, 1>>;

// Sums over the tokens, on the threads, in an order fixed by the token count alone (so the bits
// never depend on the threads): each run of 64 tokens summed token by token (a run's columns lie
// together in memory), then the runs' sums in order. `term(n)` is column n of what is summed, as
// an Eigen array expression over the features.
template <typename S, typename Term>
void add_token_sums(Eigen::Index features, Eigen::Index tokens, Matrix<S>& into, Term term) {
  constexpr Eigen::Index tokens_per_run = 64;
  const Eigen::Index runs = (tokens + tokens_per_run - 1) / tokens_per_run;
  Matrix<S> run_sums(features, runs);
  parallel_for(static_cast<std::size_t>(runs), grain_of(static_cast<std::size_t>(features * tokens_per_run)), [&](std::size_t first, std::size_t last) {
    for (auto run = static_cast<Eigen::Index>(first); run < static_cast<Eigen::Index>(last); ++run) {
      auto sum = run_sums.col(run).array();
      sum.setZero();
      for (Eigen::Index n = run * tokens_per_run; n < std::min(tokens, (run + 1) * tokens_per_run); ++n) sum += term(n);
    }
  });
  for (Eigen::Index run = 0; run < runs; ++run) into.col(0).array() += run_sums.col(run).array();
}
// into (features x 1) += the sum of m's columns.
template <typename S>
void add_column_sum(const Matrix<S>& m, Matrix<S>& into) {
  add_token_sums<S>(m.rows(), m.cols(), into, [&](Eigen::Index n) { return m.col(n).array(); });
}
// into += the sum of a's columns times b's, element by element.
template <typename S>
void add_column_sum_of_products(const Matrix<S>& a, const Matrix<S>& b, Matrix<S>& into) {
  add_token_sums<S>(a.rows(), a.cols(), into, [&](Eigen::Index n) { return a.col(n).array() * b.col(n).array(); });
}
// x += y, on the threads.
template <typename S>
void add_in_place(Matrix<S>& x, const Matrix<S>& y) {
  const Eigen::Index features = x.rows();
  parallel_for(static_cast<std::size_t>(x.cols()), grain_of(static_cast<std::size_t>(features)), [&](std::size_t first, std::size_t last) {
    const auto begin = static_cast<Eigen::Index>(first), count = static_cast<Eigen::Index>(last - first);
    x.middleCols(begin, count) += y.middleCols(begin, count);
  });
}
// Each column of y plus the column `bias`, on the threads.
template <typename S>
void add_to_each_column(Matrix<S>& y, const Matrix<S>& bias) {
  const Eigen::Index features = y.rows();
  parallel_for(static_cast<std::size_t>(y.cols()), grain_of(static_cast<std::size_t>(features)), [&](std::size_t first, std::size_t last) {
    y.middleCols(static_cast<Eigen::Index>(first), static_cast<Eigen::Index>(last - first)).colwise() += bias.col(0);
  });
}

template <typename S>
struct Normalized {
  Matrix<S> xhat;
  std::vector<S> rstd;
};

// LayerNorm over each column (PyTorch's: biased variance, epsilon 1e-5 inside the square root).
template <typename S>
Matrix<S> layer_norm(const Matrix<S>& x, const Matrix<S>& gain, const Matrix<S>& bias, Normalized<S>& norm) {
  const Eigen::Index features = x.rows(), columns = x.cols();
  norm.xhat.resize(features, columns);
  norm.rstd.resize(static_cast<std::size_t>(columns));
  Matrix<S> y(features, columns);
  parallel_for(static_cast<std::size_t>(columns), grain_of(static_cast<std::size_t>(features)), [&](std::size_t first, std::size_t last) {
    for (Eigen::Index n = static_cast<Eigen::Index>(first); n < static_cast<Eigen::Index>(last); ++n) {
      const S* in = x.data() + n * features;
      const ConstColumn<S> column(in, features);
      const S mean = column.sum() / static_cast<S>(features);
      const S squares = (column - mean).square().sum();
      const S rstd = S(1) / std::sqrt(squares / static_cast<S>(features) + static_cast<S>(1e-5));
      norm.rstd[static_cast<std::size_t>(n)] = rstd;
      S* xhat = norm.xhat.data() + n * features;
      S* out = y.data() + n * features;
      for (Eigen::Index i = 0; i < features; ++i) {
        xhat[i] = (in[i] - mean) * rstd;
        out[i] = gain(i, 0) * xhat[i] + bias(i, 0);
      }
    }
  });
  return y;
}

// The input's gradient, added to `dx` (the residual stream's: `add`) or made as `dx`; the gain's
// and bias's added to `gain_gradient` and `bias_gradient`.
template <typename S>
void layer_norm_backward(const Matrix<S>& dy, const Matrix<S>& gain, const Normalized<S>& norm, Matrix<S>& gain_gradient,
                         Matrix<S>& bias_gradient, Matrix<S>& dx, bool add) {
  const Eigen::Index features = dy.rows(), columns = dy.cols();
  add_column_sum_of_products(dy, norm.xhat, gain_gradient);
  add_column_sum(dy, bias_gradient);
  if (!add) dx.resize(features, columns);
  parallel_for(static_cast<std::size_t>(columns), grain_of(static_cast<std::size_t>(features)), [&](std::size_t first, std::size_t last) {
    for (Eigen::Index n = static_cast<Eigen::Index>(first); n < static_cast<Eigen::Index>(last); ++n) {
      const S* g = dy.data() + n * features;
      const S* xhat = norm.xhat.data() + n * features;
      const auto dxhat = ConstColumn<S>(g, features) * gain.array();
      const S mean_g = dxhat.sum() / static_cast<S>(features);
      const S mean_gx = (dxhat * ConstColumn<S>(xhat, features)).sum() / static_cast<S>(features);
      const S rstd = norm.rstd[static_cast<std::size_t>(n)];
      S* out = dx.data() + n * features;
      for (Eigen::Index i = 0; i < features; ++i) {
        const S gradient = rstd * (g[i] * gain(i, 0) - mean_g - xhat[i] * mean_gx);
        out[i] = add ? out[i] + gradient : gradient;  // added: as dx + (the gradient made alone)
      }
    }
  });
}

// Block `block`'s linear layer `name`: y = W x + b, its products made by the hooks.
template <typename S>
Matrix<S> linear(Hooks<S>& hooks, int block, const char* name, const Matrix<S>& weight, const Matrix<S>& bias, const Matrix<S>& x) {
  Matrix<S> y = hooks.linear_forward(block, name, weight, x);
  add_to_each_column(y, bias);
  return y;
}

// y = W x + b backward: W's and b's gradients added to theirs; returns x's.
template <typename S>
Matrix<S> linear_backward(Hooks<S>& hooks, int block, const char* name, const Matrix<S>& weight, const Matrix<S>& x, const Matrix<S>& dy,
                          Matrix<S>& weight_gradient, Matrix<S>& bias_gradient) {
  add_column_sum(dy, bias_gradient);
  return hooks.linear_backward(block, name, weight, x, dy, weight_gradient);
}

// Packed causal triangles: per (sequence, head), query j's scores over keys 0..j at j(j+1)/2
// (triangle_row).
inline std::size_t triangle(int context) { return static_cast<std::size_t>(context) * static_cast<std::size_t>(context + 1) / 2; }

template <typename S>
struct BlockCache {
  Normalized<S> norm1, norm2;
  Matrix<S> ln1, qkv, context, ln2, fc, gelu;
  std::vector<S> probabilities;
};

// body(b, h) for every head h of every sequence b, on the threads (parallel.hpp): each head
// writes only its own part.
template <typename Body>
void for_each_head(int batch, int heads, Body body) {
  parallel_for(static_cast<std::size_t>(batch) * heads, 1, [&](std::size_t first, std::size_t last) {
    for (std::size_t head = first; head < last; ++head) body(static_cast<int>(head) / heads, static_cast<int>(head) % heads);
  });
}

// Where query j's scores (keys 0 .. j) start in a packed triangle.
inline std::size_t triangle_row(int j) { return static_cast<std::size_t>(j) * static_cast<std::size_t>(j + 1) / 2; }

template <typename S>
using Column = Eigen::Map<Eigen::Array<S, Eigen::Dynamic, 1>>;

// The keys x queries matrix of a packed triangle (zero where a key comes after its query).
template <typename S>
Matrix<S> unpack_triangle(const S* packed, int context) {
  Matrix<S> full(context, context);
  for (int j = 0; j < context; ++j) {
    full.col(j).head(j + 1) = ConstColumn<S>(packed + triangle_row(j), j + 1).matrix();
    full.col(j).tail(context - j - 1).setZero();
  }
  return full;
}
// The causal part of a keys x queries matrix (key i <= query j) times `factor`, packed.
template <typename S>
void pack_triangle(const Matrix<S>& full, S factor, S* packed) {
  for (int j = 0; j < static_cast<int>(full.cols()); ++j) Column<S>(packed + triangle_row(j), j + 1) = full.col(j).head(j + 1).array() * factor;
}

// Causal multi-head self-attention of one block on qkv (3 width x tokens): scores, softmax,
// context (width x tokens), each stored through the hooks.
template <typename S>
Matrix<S> attention(const GptShape& shape, int batch, int block, const Matrix<S>& qkv, std::vector<S>& probabilities, Hooks<S>& hooks) {
  const int T = shape.context, D = shape.width, H = shape.heads, dh = D / H;
  const std::size_t P = triangle(T);
  const S inverse_sqrt = S(1) / std::sqrt(static_cast<S>(dh));
  std::vector<S> scores(static_cast<std::size_t>(batch) * H * P);
  for_each_head(batch, H, [&](int b, int h) {
    const Matrix<S> q = qkv.block(h * dh, b * T, dh, T), k = qkv.block(D + h * dh, b * T, dh, T);
    const Matrix<S> s = product(k, true, q, false);  // keys x queries
    pack_triangle(s, inverse_sqrt, scores.data() + (static_cast<std::size_t>(b) * H + h) * P);
  });
  hooks.activation(block, "attn.scores", scores.data(), scores.size(), 0);
  probabilities.resize(scores.size());
  parallel_for(static_cast<std::size_t>(batch) * H, grain_of(P), [&](std::size_t first, std::size_t last) {
    for (std::size_t head = first; head < last; ++head)
      for (int j = 0; j < T; ++j) {
        const std::size_t start = head * P + triangle_row(j);
        S top = scores[start];
        for (int i = 1; i <= j; ++i) top = std::max(top, scores[start + i]);
        // Each exponential once (float32: libmvec's, activation_pass.hpp), kept where the
        // probability goes, then divided by their sum.
        S* row = probabilities.data() + start;
        if constexpr (std::is_same_v<S, float>) {
          shifted_exponentials(scores.data() + start, top, row, static_cast<std::size_t>(j) + 1);
        } else {
          for (int i = 0; i <= j; ++i) row[i] = std::exp(scores[start + i] - top);
        }
        const S sum = ConstColumn<S>(row, j + 1).sum();
        for (int i = 0; i <= j; ++i) row[i] /= sum;
      }
  });
  hooks.activation(block, "attn.softmax", probabilities.data(), probabilities.size(), 0);
  Matrix<S> context(D, static_cast<Eigen::Index>(batch) * T);
  for_each_head(batch, H, [&](int b, int h) {
    const Matrix<S> v = qkv.block(2 * D + h * dh, b * T, dh, T);
    context.block(h * dh, b * T, dh, T) =
        product(v, false, unpack_triangle(probabilities.data() + (static_cast<std::size_t>(b) * H + h) * P, T), false);
  });
  stored(hooks, block, "attn.context", context);
  return context;
}

// The gradient of qkv from the context's, through the stored probabilities.
template <typename S>
Matrix<S> attention_backward(const GptShape& shape, int batch, int block, const Matrix<S>& qkv, const std::vector<S>& probabilities,
                             const Matrix<S>& dcontext, Hooks<S>& hooks) {
  const int T = shape.context, D = shape.width, H = shape.heads, dh = D / H;
  const std::size_t P = triangle(T);
  const S inverse_sqrt = S(1) / std::sqrt(static_cast<S>(dh));
  Matrix<S> dqkv(3 * D, static_cast<Eigen::Index>(batch) * T);
  std::vector<S> dprobabilities(probabilities.size());
  for_each_head(batch, H, [&](int b, int h) {
    const std::size_t offset = (static_cast<std::size_t>(b) * H + h) * P;
    const Matrix<S> v = qkv.block(2 * D + h * dh, b * T, dh, T), dout = dcontext.block(h * dh, b * T, dh, T);
    dqkv.block(2 * D + h * dh, b * T, dh, T) = product(dout, false, unpack_triangle(probabilities.data() + offset, T), true);
    const Matrix<S> dp = product(v, true, dout, false);  // keys x queries
    pack_triangle(dp, S(1), dprobabilities.data() + offset);
  });
  hooks.gradient(block, "attn.softmax", dprobabilities.data(), dprobabilities.size(), 0);
  std::vector<S> dscores(probabilities.size());
  parallel_for(static_cast<std::size_t>(batch) * H, grain_of(P), [&](std::size_t first, std::size_t last) {
    for (std::size_t head = first; head < last; ++head)
      for (int j = 0; j < T; ++j) {
        const std::size_t start = head * P + triangle_row(j);
        const ConstColumn<S> p(probabilities.data() + start, j + 1), dp(dprobabilities.data() + start, j + 1);
        const S dot = (p * dp).sum();
        Column<S>(dscores.data() + start, j + 1) = p * (dp - dot);
      }
  });
  hooks.gradient(block, "attn.scores", dscores.data(), dscores.size(), 0);
  for_each_head(batch, H, [&](int b, int h) {
    const Matrix<S> q = qkv.block(h * dh, b * T, dh, T), k = qkv.block(D + h * dh, b * T, dh, T);
    const Matrix<S> ds = unpack_triangle(dscores.data() + (static_cast<std::size_t>(b) * H + h) * P, T) * inverse_sqrt;
    dqkv.block(h * dh, b * T, dh, T) = product(k, false, ds, false);
    dqkv.block(D + h * dh, b * T, dh, T) = product(q, false, ds, true);
  });
  stored_gradient(hooks, block, "attn.qkv", dqkv);
  return dqkv;
}

// One forward pass, and the backward pass where `gradients` is given (zeroed and filled, in
// parameter order, carrying gradient_factor: the loss scale times the loss weight over the
// tokens). `tokens` and `targets` hold batch * context ids, row by row. Returns the mean loss.
template <typename S>
double run(const GptShape& shape, const std::vector<Matrix<S>>& p, const int* tokens, const int* targets, int batch, S gradient_factor,
           Hooks<S>& hooks, std::vector<Matrix<S>>* gradients) {
  const int T = shape.context, D = shape.width, L = shape.layers, V = shape.vocab;
  const Eigen::Index N = static_cast<Eigen::Index>(batch) * T;
  Matrix<S> x(D, N);
  parallel_for(static_cast<std::size_t>(N), grain_of(static_cast<std::size_t>(D)), [&](std::size_t first, std::size_t last) {
    for (auto n = static_cast<Eigen::Index>(first); n < static_cast<Eigen::Index>(last); ++n)
      x.col(n) = p[Index::tokens].row(tokens[n]).transpose() + p[Index::positions].row(static_cast<Eigen::Index>(n % T)).transpose();
  });
  stored(hooks, -1, "embed", x);
  std::vector<BlockCache<S>> caches(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l) {
    BlockCache<S>& c = caches[static_cast<std::size_t>(l)];
    const auto w = [&](Index::Block which) -> const Matrix<S>& { return p[static_cast<std::size_t>(Index::block(l, which))]; };
    c.ln1 = layer_norm(x, w(Index::ln1_gain), w(Index::ln1_bias), c.norm1);
    stored(hooks, l, "ln1", c.ln1);
    c.qkv = linear(hooks, l, "attn.qkv", w(Index::qkv_weight), w(Index::qkv_bias), c.ln1);
    stored(hooks, l, "attn.qkv", c.qkv);
    c.context = attention(shape, batch, l, c.qkv, c.probabilities, hooks);
    Matrix<S> projected = linear(hooks, l, "attn.proj", w(Index::proj_weight), w(Index::proj_bias), c.context);
    stored(hooks, l, "attn.proj", projected);
    add_in_place(x, projected);
    stored(hooks, l, "residual1", x);
    c.ln2 = layer_norm(x, w(Index::ln2_gain), w(Index::ln2_bias), c.norm2);
    stored(hooks, l, "ln2", c.ln2);
    c.fc = linear(hooks, l, "mlp.fc", w(Index::fc_weight), w(Index::fc_bias), c.ln2);
    stored(hooks, l, "mlp.fc", c.fc);
    c.gelu = gelu_forward(c.fc);
    stored(hooks, l, "mlp.gelu", c.gelu);
    Matrix<S> out = linear(hooks, l, "mlp.proj", w(Index::mlp_proj_weight), w(Index::mlp_proj_bias), c.gelu);
    stored(hooks, l, "mlp.proj", out);
    add_in_place(x, out);
    stored(hooks, l, "residual2", x);
  }
  Normalized<S> final_norm;
  Matrix<S> final_ln =
      layer_norm(x, p[static_cast<std::size_t>(Index::final_gain(L))], p[static_cast<std::size_t>(Index::final_bias(L))], final_norm);
  stored(hooks, -1, "ln_f", final_ln);
  Matrix<S> logits = product(p[Index::tokens], false, final_ln, false);  // tied head: vocab x tokens
  stored(hooks, -1, "head", logits);
  Matrix<S> dlogits(V, N);
  std::vector<S> token_losses(static_cast<std::size_t>(N));
  parallel_for(static_cast<std::size_t>(N), grain_of(static_cast<std::size_t>(V)), [&](std::size_t first, std::size_t last) {
    for (std::size_t n = first; n < last; ++n)
      token_losses[n] = cross_entropy(logits.data() + n * V, V, targets[n], gradient_factor, dlogits.data() + n * V);
  });
  double loss = 0;  // summed in order, whatever the threads
  for (const S token_loss : token_losses) loss += static_cast<double>(token_loss);
  loss /= static_cast<double>(N);
  if (gradients == nullptr) return loss;

  std::vector<Matrix<S>>& g = *gradients;
  g.resize(p.size());
  // Zeros where gradients add up; each block's linear weights' are set by linear_backward.
  std::vector<bool> set_by_linear(p.size(), false);
  for (int l = 0; l < L; ++l)
    for (const Index::Block w : {Index::qkv_weight, Index::proj_weight, Index::fc_weight, Index::mlp_proj_weight})
      set_by_linear[static_cast<std::size_t>(Index::block(l, w))] = true;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (!set_by_linear[i]) g[i] = Matrix<S>::Zero(p[i].rows(), p[i].cols());
  stored_gradient(hooks, -1, "head", dlogits);
  g[Index::tokens] += product(dlogits, false, final_ln, true);
  Matrix<S> dfinal = product(p[Index::tokens], true, dlogits, false);
  stored_gradient(hooks, -1, "ln_f", dfinal);
  Matrix<S> dx;
  layer_norm_backward(dfinal, p[static_cast<std::size_t>(Index::final_gain(L))], final_norm, g[static_cast<std::size_t>(Index::final_gain(L))],
                      g[static_cast<std::size_t>(Index::final_bias(L))], dx, false);
  for (int l = L; l-- > 0;) {
    BlockCache<S>& c = caches[static_cast<std::size_t>(l)];
    const auto w = [&](Index::Block which) -> const Matrix<S>& { return p[static_cast<std::size_t>(Index::block(l, which))]; };
    const auto dw = [&](Index::Block which) -> Matrix<S>& { return g[static_cast<std::size_t>(Index::block(l, which))]; };
    // The residual stream's gradient is the branch's output gradient: rounded as residual2 (or
    // residual1), it is already a value of the format, and rounds to itself as mlp.proj's (or
    // attn.proj's) -- recorded under that name from the same values, no copy made.
    stored_gradient(hooks, l, "residual2", dx);
    stored_gradient(hooks, l, "mlp.proj", dx);
    Matrix<S> dgelu = linear_backward(hooks, l, "mlp.proj", w(Index::mlp_proj_weight), c.gelu, dx, dw(Index::mlp_proj_weight), dw(Index::mlp_proj_bias));
    stored_gradient(hooks, l, "mlp.gelu", dgelu);
    Matrix<S> dfc = gelu_backward(c.fc, dgelu);
    stored_gradient(hooks, l, "mlp.fc", dfc);
    Matrix<S> dln2 = linear_backward(hooks, l, "mlp.fc", w(Index::fc_weight), c.ln2, dfc, dw(Index::fc_weight), dw(Index::fc_bias));
    stored_gradient(hooks, l, "ln2", dln2);
    layer_norm_backward(dln2, w(Index::ln2_gain), c.norm2, dw(Index::ln2_gain), dw(Index::ln2_bias), dx, true);
    stored_gradient(hooks, l, "residual1", dx);
    stored_gradient(hooks, l, "attn.proj", dx);
    Matrix<S> dcontext = linear_backward(hooks, l, "attn.proj", w(Index::proj_weight), c.context, dx, dw(Index::proj_weight), dw(Index::proj_bias));
    stored_gradient(hooks, l, "attn.context", dcontext);
    const Matrix<S> dqkv = attention_backward(shape, batch, l, c.qkv, c.probabilities, dcontext, hooks);
    Matrix<S> dln1 = linear_backward(hooks, l, "attn.qkv", w(Index::qkv_weight), c.ln1, dqkv, dw(Index::qkv_weight), dw(Index::qkv_bias));
    stored_gradient(hooks, l, "ln1", dln1);
    layer_norm_backward(dln1, w(Index::ln1_gain), c.norm1, dw(Index::ln1_gain), dw(Index::ln1_bias), dx, true);
  }
  stored_gradient(hooks, -1, "embed", dx);
  for (Eigen::Index n = 0; n < N; ++n) {
    g[Index::tokens].row(tokens[n]) += dx.col(n).transpose();
    g[Index::positions].row(static_cast<Eigen::Index>(n % T)) += dx.col(n).transpose();
  }
  return loss;
}

}  // namespace fpscope::gpt_pass
