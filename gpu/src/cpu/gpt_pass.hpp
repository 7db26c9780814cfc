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
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "fpscope/gpu/activation.hpp"
#include "activation_pass.hpp"
#include "bf16_products.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/gpt_element.hpp"
#include "fpscope/gpu/parallel.hpp"

namespace fpscope::gpt_pass {

template <typename S>
using Matrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic>;

// Element-wise work is split across the threads in pieces of about parallel_grain values
// (parallel.hpp's grain_of): each column, head or element is computed on its own, so the bits
// never depend on them.

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

// GELU over n values (its derivative at z times a gradient): float32 through the CPU backend's
// activation passes (on the threads, or on the calling thread inside a job), float64 element by
// element on the threads.
inline void gelu_values(const float* z, float* out, std::size_t n) { activation_forward(Activation::gelu, z, out, n); }
inline void gelu_values(const double* z, double* out, std::size_t n) { parallel_map(z, out, n, [](double v) { return gelu(v); }); }
inline void gelu_gradient_values(const float* z, const float* gradient, float* out, std::size_t n) {
  activation_backward(Activation::gelu, z, gradient, out, n);
}
inline void gelu_gradient_values(const double* z, const double* gradient, double* out, std::size_t n) {
  parallel_for(n, parallel_grain, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) out[i] = gradient[i] * gelu_derivative(z[i]);
  });
}

inline double cross_entropy(const double* logits, int classes, int label, double factor, double* gradient) {
  double top = logits[0];
  for (int c = 1; c < classes; ++c) top = std::max(top, logits[c]);
  double sum = 0;
  for (int c = 0; c < classes; ++c) sum += std::exp(logits[c] - top);
  for (int c = 0; c < classes; ++c) gradient[c] = (std::exp(logits[c] - top) / sum - (c == label ? 1.0 : 0.0)) * factor;
  return -(logits[label] - top - std::log(sum));
}

// What is done to each slice of a tensor's columns as it is made: `columns` columns from
// `first_column` on, their values contiguous at `values` (column-major), in any order, on any thread.
template <typename S>
using Slices = std::function<void(S* values, Eigen::Index first_column, Eigen::Index columns)>;

// A stored tensor rounded (and recorded) piece by piece as the pass makes it: the same bits,
// records and random words as one Hooks::activation or Hooks::gradient call on the whole, the
// tensor's random words taken when it began.
template <typename S>
struct StoredPieces {
  virtual ~StoredPieces() = default;
  // The `count` values at `offset` in the tensor, rounded in place.
  virtual void piece(S* values, std::size_t count, std::size_t offset) = 0;
  // After the last piece, on the thread that began it.
  virtual void finish() = 0;
};

// A linear layer's product that takes a stored tensor next, as its input (x) or its output's
// gradient (dy): hooks whose products pack their operands may pack the tensor as they round it.
// `matrix` holds the tensor by the time the product runs, and nothing changes it before.
template <typename S>
struct ProductUse {
  int block;
  const char* linear;
  bool gradient;
  const Matrix<S>* matrix;
};

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

  // Hooks that round in pieces: the pass then rounds each stored tensor while it is made, slice by
  // slice (begin_stored), and the linear layers' products run `slices` on their output as they make
  // it (the two below). Others get each stored tensor whole, after it is made.
  virtual bool rounds_in_pieces() const { return false; }
  // `gradient`: the tensor is an activation's gradient (else an activation).
  // `use`, where given: the product that takes the tensor next (ProductUse).
  virtual std::unique_ptr<StoredPieces<S>> begin_stored(bool /*gradient*/, int /*block*/, const char* /*name*/, std::size_t /*count*/,
                                                        std::size_t /*features*/, const ProductUse<S>* /*use*/ = nullptr) {
    throw std::logic_error("GPT pass: stored tensors in pieces from hooks that do not round in pieces");
  }
  // linear_forward and linear_backward with `slices` run on each slice of W x (W^T dy) as it is made.
  virtual Matrix<S> linear_forward_in_slices(int /*block*/, const char* /*name*/, const Matrix<S>& /*weight*/, const Matrix<S>& /*x*/,
                                             const Slices<S>& /*slices*/) {
    throw std::logic_error("GPT pass: a product in slices from hooks that do not round in pieces");
  }
  virtual Matrix<S> linear_backward_in_slices(int /*block*/, const char* /*name*/, const Matrix<S>& /*weight*/, const Matrix<S>& /*x*/,
                                              const Matrix<S>& /*dy*/, Matrix<S>& /*weight_gradient*/, const Slices<S>& /*slices*/) {
    throw std::logic_error("GPT pass: a product in slices from hooks that do not round in pieces");
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

// An allocator that leaves new elements uninitialised: the attention triangles' buffers (a
// megabyte each per block) are written in full before they are read, and zeroing them first was
// a serial memset per buffer.
template <typename T>
struct Uninitialised : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = Uninitialised<U>;
  };
  Uninitialised() = default;
  template <typename U>
  Uninitialised(const Uninitialised<U>&) noexcept {}
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) ::new (static_cast<void*>(p)) U;
    else ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <typename S>
using Values = std::vector<S, Uninitialised<S>>;

// A run of contiguous values as an Eigen array, for its vectorised reductions (one chain of float
// additions would wait on each).
template <typename S>
using ConstColumn = Eigen::Map<const Eigen::Array<S, Eigen::Dynamic, 1>>;
template <typename S>
using Column = Eigen::Map<Eigen::Array<S, Eigen::Dynamic, 1>>;

// The pass's element-wise arithmetic: float32 through the vectorised passes (activation_pass.hpp,
// the same bits on every instruction set), float64 in Eigen.
// out[i] = a[i] + b[i] (out may be a or b).
template <typename S>
void add_arrays(const S* a, const S* b, S* out, Eigen::Index n) {
  if constexpr (std::is_same_v<S, float>) add_values(a, b, out, static_cast<std::size_t>(n));
  else Column<S>(out, n) = ConstColumn<S>(a, n) + ConstColumn<S>(b, n);
}
// out[i] = in[i] * factor (out may be in).
template <typename S>
void scale_array(const S* in, S factor, S* out, Eigen::Index n) {
  if constexpr (std::is_same_v<S, float>) scale_values(in, factor, out, static_cast<std::size_t>(n));
  else Column<S>(out, n) = ConstColumn<S>(in, n) * factor;
}

// out[i] = in[i] / divisor (out may be in).
template <typename S>
void divide_array(const S* in, S divisor, S* out, Eigen::Index n) {
  if constexpr (std::is_same_v<S, float>) divide_values(in, divisor, out, static_cast<std::size_t>(n));
  else Column<S>(out, n) = ConstColumn<S>(in, n) / divisor;
}
// out[i] = p[i] * (dp[i] - dot): a softmax row's gradient from its output's.
template <typename S>
void softmax_gradient_array(const S* p, const S* dp, S dot, S* out, Eigen::Index n) {
  if constexpr (std::is_same_v<S, float>) softmax_gradient_values(p, dp, dot, out, static_cast<std::size_t>(n));
  else Column<S>(out, n) = ConstColumn<S>(p, n) * (ConstColumn<S>(dp, n) - dot);
}

// Sums over the tokens in an order fixed by the token count alone (so the bits never depend on the
// threads, nor on how the tokens were handed out to them): each run of 64 tokens summed token by
// token, then the runs' sums in order. What is summed is a features x tokens tensor's columns, or
// their products with another's, element by element. A run is summed where its tokens are made
// (sum_runs_within on a slice of columns; each run at most once, on any thread), and every run not
// summed so by finish(), from the whole tensors.
template <typename S>
class TokenSums {
 public:
  static constexpr Eigen::Index tokens_per_run = 64;
  static Eigen::Index runs_of(Eigen::Index tokens) { return (tokens + tokens_per_run - 1) / tokens_per_run; }

  TokenSums(Eigen::Index features, Eigen::Index tokens)
      : tokens_(tokens), run_sums_(features, runs_of(tokens)), summed_(static_cast<std::size_t>(runs_of(tokens)), 0) {}

  Eigen::Index runs() const { return run_sums_.cols(); }
  Eigen::Index run_start(Eigen::Index run) const { return run * tokens_per_run; }
  Eigen::Index run_end(Eigen::Index run) const { return std::min(tokens_, (run + 1) * tokens_per_run); }

  // Every run whose tokens all lie in [first, first + count): `a` (and `b`, where given) hold those
  // columns, column `first` first.
  void sum_runs_within(Eigen::Index first, Eigen::Index count, const S* a, const S* b = nullptr) {
    const Eigen::Index features = run_sums_.rows();
    for (Eigen::Index run = runs_of(first); run < runs() && run_end(run) <= first + count; ++run) {
      const Eigen::Index at = (run_start(run) - first) * features;
      sum_run(run, a + at, b == nullptr ? nullptr : b + at);
    }
  }
  // The runs not summed yet, from the whole tensors `a` (and `b`) on the threads, then into +=
  // every run's sum in order.
  void finish(Matrix<S>& into, const S* a, const S* b = nullptr) {
    const Eigen::Index features = run_sums_.rows();
    parallel_for(static_cast<std::size_t>(runs()), grain_of(static_cast<std::size_t>(features * tokens_per_run)), [&](std::size_t first, std::size_t last) {
      for (auto run = static_cast<Eigen::Index>(first); run < static_cast<Eigen::Index>(last); ++run) {
        const Eigen::Index at = run_start(run) * features;
        if (summed_[static_cast<std::size_t>(run)] == 0) sum_run(run, a + at, b == nullptr ? nullptr : b + at);
      }
    });
    for (Eigen::Index run = 0; run < runs(); ++run) into.col(0).array() += run_sums_.col(run).array();
  }

 private:
  // The run's sum from its columns at a (and b).
  void sum_run(Eigen::Index run, const S* a, const S* b) {
    summed_[static_cast<std::size_t>(run)] = 1;
    const Eigen::Index features = run_sums_.rows(), columns = run_end(run) - run_start(run);
    S* sum = run_sums_.col(run).data();
    if constexpr (std::is_same_v<S, float>) {
      const auto rows = static_cast<std::size_t>(features), count = static_cast<std::size_t>(columns);
      if (b == nullptr) sum_columns(a, rows, count, sum);
      else sum_column_products(a, b, rows, count, sum);
    } else {
      Column<S> total(sum, features);
      total.setZero();
      for (Eigen::Index n = 0; n < columns; ++n) {
        if (b == nullptr) total += ConstColumn<S>(a + n * features, features);
        else total += ConstColumn<S>(a + n * features, features) * ConstColumn<S>(b + n * features, features);
      }
    }
  }
  Eigen::Index tokens_;
  Matrix<S> run_sums_;
  std::vector<char> summed_;  // one byte per run: each written by the one thread that sums the run
};
// body(first_run, last_run, first, last) on the threads for every run of tokens (TokenSums') of a
// features x tokens tensor, a few runs of about 64K values at a time: runs [first_run, last_run),
// columns [first, last). The steps that follow on a slice's columns find them in cache.
template <typename Body>
void for_run_slices(Eigen::Index features, Eigen::Index tokens, Body body) {
  constexpr Eigen::Index tokens_per_run = TokenSums<float>::tokens_per_run;
  const Eigen::Index runs = TokenSums<float>::runs_of(tokens);
  const Eigen::Index runs_per_slice = std::max<Eigen::Index>(1, Eigen::Index{65536} / std::max<Eigen::Index>(1, features * tokens_per_run));
  parallel_for(static_cast<std::size_t>(runs), grain_of(static_cast<std::size_t>(features * tokens_per_run)), [&](std::size_t first, std::size_t last) {
    for (auto run = static_cast<Eigen::Index>(first); run < static_cast<Eigen::Index>(last); run += runs_per_slice) {
      const Eigen::Index end = std::min(static_cast<Eigen::Index>(last), run + runs_per_slice);
      body(run, end, run * tokens_per_run, std::min(tokens, end * tokens_per_run));
    }
  });
}
// into (features x 1) += the sum of m's columns (TokenSums' order).
template <typename S>
void add_column_sum(const Matrix<S>& m, Matrix<S>& into) {
  TokenSums<S>(m.rows(), m.cols()).finish(into, m.data());
}
// into += the sum of a's columns times b's, element by element.
template <typename S>
void add_column_sum_of_products(const Matrix<S>& a, const Matrix<S>& b, Matrix<S>& into) {
  TokenSums<S>(a.rows(), a.cols()).finish(into, a.data(), b.data());
}
// x += y, on the threads.
template <typename S>
void add_in_place(Matrix<S>& x, const Matrix<S>& y) {
  const Eigen::Index features = x.rows();
  parallel_for(static_cast<std::size_t>(x.cols()), grain_of(static_cast<std::size_t>(features)), [&](std::size_t first, std::size_t last) {
    const auto begin = static_cast<Eigen::Index>(first) * features, count = static_cast<Eigen::Index>(last - first) * features;
    add_arrays(x.data() + begin, y.data() + begin, x.data() + begin, count);
  });
}
// Each column of y plus the column `bias`, on the threads.
template <typename S>
void add_to_each_column(Matrix<S>& y, const Matrix<S>& bias) {
  const Eigen::Index features = y.rows();
  parallel_for(static_cast<std::size_t>(y.cols()), grain_of(static_cast<std::size_t>(features)), [&](std::size_t first, std::size_t last) {
    for (auto n = static_cast<Eigen::Index>(first); n < static_cast<Eigen::Index>(last); ++n)
      add_arrays(y.data() + n * features, bias.data(), y.data() + n * features, features);
  });
}

// What the pass does to a tensor it has just made (a linear layer's product, LayerNorm's output
// or input gradient) before it goes on, in order: the layer's bias added, stores (the tensor
// rounded and recorded through the hooks), element-wise maps into another tensor of the same
// shape, additions into the residual stream, and a bias gradient's sum over the tokens (always
// last). Each step acts on what the step before it left: after map(into, ...) or add_into(x), on
// `into` or `x`. Where the hooks round in pieces, every step runs on each slice of columns as it
// is made, while the slice is in cache; otherwise each step runs over the whole tensor in turn. The same bits, records and random words either way:
// each step computes an element from the same element of its inputs, and the stores take their
// random words in order before the first slice, as whole casts in turn would.
template <typename S>
class AfterSteps {
 public:
  // f(in, out, n, offset): n values of the step's input into its output, `offset` values into the tensor.
  using Map = std::function<void(const S* in, S* out, std::size_t n, std::size_t offset)>;

  AfterSteps(Hooks<S>& hooks, int block) : hooks_(hooks), block_(block) {}
  AfterSteps(const AfterSteps&) = delete;
  AfterSteps& operator=(const AfterSteps&) = delete;

  AfterSteps& bias(const Matrix<S>& b) { return add({Kind::bias, &b, nullptr, nullptr, {}, own_block, nullptr, nullptr}); }
  AfterSteps& store(const char* name) { return add({Kind::store, nullptr, name, nullptr, {}, own_block, nullptr, nullptr}); }
  AfterSteps& store_gradient(const char* name) { return add({Kind::store_gradient, nullptr, name, nullptr, {}, own_block, nullptr, nullptr}); }
  // Of the block given, where the tensor is stored under another block's name.
  AfterSteps& store_gradient_of(int block, const char* name) { return add({Kind::store_gradient, nullptr, name, nullptr, {}, block, nullptr, nullptr}); }
  AfterSteps& map(Matrix<S>& into, Map f) { return add({Kind::map, nullptr, nullptr, &into, std::move(f), own_block, nullptr, nullptr}); }
  AfterSteps& add_into(Matrix<S>& x) { return add({Kind::add_into, nullptr, nullptr, &x, {}, own_block, nullptr, nullptr}); }
  // into (features x 1) += the sum of the tensor's columns, as add_column_sum would add it after
  // the steps before: in pieces, each run of tokens (TokenSums) summed from the slice that holds
  // it, while it is in cache. The last step: nothing may change the values it sums after it.
  AfterSteps& sum_columns(Matrix<S>& into) { return add({Kind::sum_columns, nullptr, nullptr, &into, {}, own_block, nullptr, nullptr}); }
  // The store just added is what `linear`'s product in `block` takes next (ProductUse): `matrix`
  // holds it by then.
  AfterSteps& for_product(int block, const char* linear, bool gradient, const Matrix<S>& matrix) {
    if (steps_.empty() || (steps_.back().kind != Kind::store && steps_.back().kind != Kind::store_gradient))
      throw std::logic_error("GPT pass: a product's use of a tensor that was not stored");
    steps_.back().use = ProductUse<S>{block, linear, gradient, &matrix};
    return *this;
  }

  bool in_pieces() const { return hooks_.rounds_in_pieces(); }

  // In pieces: begin() before the tensor's first slice (rows x cols), slice() on each, end() after.
  void begin(Eigen::Index rows, Eigen::Index cols) {
    rows_ = rows;
    const auto count = static_cast<std::size_t>(rows * cols);
    for (Step& step : steps_) {
      if (step.kind == Kind::map) step.target->resize(rows, cols);
      if (step.kind == Kind::add_into && (step.target->rows() != rows || step.target->cols() != cols))
        throw std::logic_error("GPT pass: an addition of tensors of two shapes");
      if (step.kind == Kind::store || step.kind == Kind::store_gradient)
        step.pieces = hooks_.begin_stored(step.kind == Kind::store_gradient, step.block, step.name, count, static_cast<std::size_t>(rows),
                                          step.use ? &*step.use : nullptr);
      if (step.kind == Kind::sum_columns) step.sums = std::make_unique<TokenSums<S>>(rows, cols);
    }
  }
  void slice(S* values, Eigen::Index first_column, Eigen::Index columns) const {
    const auto offset = static_cast<std::size_t>(first_column * rows_), n = static_cast<std::size_t>(columns * rows_);
    S* current = values;
    for (const Step& step : steps_) {
      switch (step.kind) {
        case Kind::bias:
          for (Eigen::Index j = 0; j < columns; ++j) add_arrays(current + j * rows_, step.bias->data(), current + j * rows_, rows_);
          break;
        case Kind::store:
        case Kind::store_gradient: step.pieces->piece(current, n, offset); break;
        case Kind::map:
          step.map(current, step.target->data() + offset, n, offset);
          current = step.target->data() + offset;
          break;
        case Kind::add_into: {
          S* x = step.target->data() + offset;
          add_arrays(x, current, x, static_cast<Eigen::Index>(n));
          current = x;
          break;
        }
        case Kind::sum_columns:
          step.sums->sum_runs_within(first_column, columns, current);
          break;
      }
    }
  }
  Slices<S> slices() const {
    return [this](S* values, Eigen::Index first_column, Eigen::Index columns) { slice(values, first_column, columns); };
  }
  // `made`: the tensor the slices were of.
  void end(const Matrix<S>& made) {
    const Matrix<S>* current = &made;
    for (Step& step : steps_) {
      if (step.pieces) step.pieces->finish(), step.pieces.reset();
      if (step.kind == Kind::map || step.kind == Kind::add_into) current = step.target;
      if (step.kind == Kind::sum_columns) {
        step.sums->finish(*step.target, current->data());
        step.sums.reset();
      }
    }
  }

  // Whole: each step over the whole tensor in turn.
  void whole(Matrix<S>& made) const {
    Matrix<S>* current = &made;
    for (const Step& step : steps_) {
      switch (step.kind) {
        case Kind::bias: add_to_each_column(*current, *step.bias); break;
        case Kind::store: stored(hooks_, step.block, step.name, *current); break;
        case Kind::store_gradient: stored_gradient(hooks_, step.block, step.name, *current); break;
        case Kind::map:
          step.target->resize(current->rows(), current->cols());
          step.map(current->data(), step.target->data(), static_cast<std::size_t>(current->size()), 0);
          current = step.target;
          break;
        case Kind::add_into:
          add_in_place(*step.target, *current);
          current = step.target;
          break;
        case Kind::sum_columns: add_column_sum(*current, *step.target); break;
      }
    }
  }

 private:
  enum class Kind { bias, store, store_gradient, map, add_into, sum_columns };
  struct Step {
    Kind kind;
    const Matrix<S>* bias;
    const char* name;
    Matrix<S>* target;  // what map and add_into write, what sum_columns adds into
    Map map;
    int block;  // whose name a store records under (own_block: the AfterSteps')
    std::unique_ptr<StoredPieces<S>> pieces;
    std::unique_ptr<TokenSums<S>> sums;  // sum_columns' in pieces
    std::optional<ProductUse<S>> use = std::nullopt;  // a store's (for_product)
  };
  static constexpr int own_block = -2;  // -1 names the tensors outside the blocks
  AfterSteps& add(Step step) {
    if (!steps_.empty() && steps_.back().kind == Kind::sum_columns) throw std::logic_error("GPT pass: a step after a sum of columns");
    if (step.block == own_block) step.block = block_;
    steps_.push_back(std::move(step));
    return *this;
  }
  Hooks<S>& hooks_;
  int block_;
  Eigen::Index rows_ = 0;
  std::vector<Step> steps_;
};

template <typename S>
struct Normalized {
  Matrix<S> xhat;
  std::vector<S> rstd;
};

// LayerNorm over each column (PyTorch's: biased variance, epsilon 1e-5 inside the square root),
// `after` run on the output.
template <typename S>
Matrix<S> layer_norm(const Matrix<S>& x, const Matrix<S>& gain, const Matrix<S>& bias, Normalized<S>& norm, AfterSteps<S>& after) {
  const Eigen::Index features = x.rows(), columns = x.cols();
  norm.xhat.resize(features, columns);
  norm.rstd.resize(static_cast<std::size_t>(columns));
  Matrix<S> y(features, columns);
  const bool in_pieces = after.in_pieces();
  if (in_pieces) after.begin(features, columns);
  for_run_slices(features, columns, [&](Eigen::Index, Eigen::Index, Eigen::Index first, Eigen::Index last) {
    for (Eigen::Index n = first; n < last; ++n) {
      const S* in = x.data() + n * features;
      const ConstColumn<S> column(in, features);
      const S mean = column.sum() / static_cast<S>(features);
      const S squares = (column - mean).square().sum();
      const S rstd = S(1) / std::sqrt(squares / static_cast<S>(features) + static_cast<S>(1e-5));
      norm.rstd[static_cast<std::size_t>(n)] = rstd;
      S* xhat = norm.xhat.data() + n * features;
      S* out = y.data() + n * features;
      if constexpr (std::is_same_v<S, float>) {
        normalize_values(in, mean, rstd, gain.data(), bias.data(), xhat, out, static_cast<std::size_t>(features));
      } else {
        for (Eigen::Index i = 0; i < features; ++i) {
          xhat[i] = normalized_of(in[i], mean, rstd);
          out[i] = layer_norm_output_of(gain(i, 0), xhat[i], bias(i, 0));
        }
      }
    }
    if (in_pieces) after.slice(y.data() + first * features, first, last - first);
  });
  if (in_pieces) after.end(y);
  else after.whole(y);
  return y;
}

// The input's gradient, added to `dx` (the residual stream's: `add`) or made as `dx`, `after` run
// on dx; the gain's and bias's added to `gain_gradient` and `bias_gradient`: the sums over the
// tokens of dy times xhat and of dy (add_column_sum_of_products and add_column_sum's bits), each
// run of tokens summed in the pass that reads its columns for dx.
template <typename S>
void layer_norm_backward(const Matrix<S>& dy, const Matrix<S>& gain, const Normalized<S>& norm, Matrix<S>& gain_gradient,
                         Matrix<S>& bias_gradient, Matrix<S>& dx, bool add, AfterSteps<S>& after) {
  const Eigen::Index features = dy.rows(), columns = dy.cols();
  TokenSums<S> gain_sums(features, columns), bias_sums(features, columns);
  if (!add) dx.resize(features, columns);
  const bool in_pieces = after.in_pieces();
  if (in_pieces) after.begin(features, columns);
  for_run_slices(features, columns, [&](Eigen::Index, Eigen::Index, Eigen::Index first, Eigen::Index last) {
    for (Eigen::Index n = first; n < last; ++n) {
      const S* g = dy.data() + n * features;
      const S* xhat = norm.xhat.data() + n * features;
      const auto dxhat = ConstColumn<S>(g, features) * gain.array();
      const S mean_g = dxhat.sum() / static_cast<S>(features);
      const S mean_gx = (dxhat * ConstColumn<S>(xhat, features)).sum() / static_cast<S>(features);
      const S rstd = norm.rstd[static_cast<std::size_t>(n)];
      S* out = dx.data() + n * features;
      if constexpr (std::is_same_v<S, float>) {
        normalize_gradient_values(g, gain.data(), xhat, mean_g, mean_gx, rstd, out, add, static_cast<std::size_t>(features));
      } else {
        for (Eigen::Index i = 0; i < features; ++i) {
          const S gradient = layer_norm_gradient_of(g[i], gain(i, 0), xhat[i], mean_g, mean_gx, rstd);
          out[i] = add ? out[i] + gradient : gradient;  // added: as dx + (the gradient made alone)
        }
      }
    }
    // The slice's runs of dy (times xhat) summed while they are in cache.
    gain_sums.sum_runs_within(first, last - first, dy.data() + first * features, norm.xhat.data() + first * features);
    bias_sums.sum_runs_within(first, last - first, dy.data() + first * features);
    if (in_pieces) after.slice(dx.data() + first * features, first, last - first);
  });
  gain_sums.finish(gain_gradient, dy.data(), norm.xhat.data());  // every run was summed above: only their sums added
  bias_sums.finish(bias_gradient, dy.data());
  if (in_pieces) after.end(dx);
  else after.whole(dx);
}

// Block `block`'s linear layer `name`: W x, its product made by the hooks, `after` run on it
// (its first step adds the bias).
template <typename S>
Matrix<S> linear(Hooks<S>& hooks, int block, const char* name, const Matrix<S>& weight, const Matrix<S>& x, AfterSteps<S>& after) {
  if (!after.in_pieces()) {
    Matrix<S> y = hooks.linear_forward(block, name, weight, x);
    after.whole(y);
    return y;
  }
  after.begin(weight.rows(), x.cols());
  Matrix<S> y = hooks.linear_forward_in_slices(block, name, weight, x, after.slices());
  after.end(y);
  return y;
}

// y = W x + b backward: W's gradient made; returns x's, `after` run on it. b's gradient, the sum
// of dy's columns, is added by whoever made dy: the steps after it (AfterSteps::sum_columns, while
// its columns are in cache) or the caller (add_column_sum).
template <typename S>
Matrix<S> linear_backward(Hooks<S>& hooks, int block, const char* name, const Matrix<S>& weight, const Matrix<S>& x, const Matrix<S>& dy,
                          Matrix<S>& weight_gradient, AfterSteps<S>& after) {
  if (!after.in_pieces()) {
    Matrix<S> dx = hooks.linear_backward(block, name, weight, x, dy, weight_gradient);
    after.whole(dx);
    return dx;
  }
  after.begin(weight.cols(), dy.cols());
  Matrix<S> dx = hooks.linear_backward_in_slices(block, name, weight, x, dy, weight_gradient, after.slices());
  after.end(dx);
  return dx;
}

// Packed causal triangles: per (sequence, head), query j's scores over keys 0..j at j(j+1)/2
// (triangle_start, gpt_element.hpp).
inline std::size_t triangle(int context) { return triangle_start(context); }  // one triangle's values: where the next would start

template <typename S>
struct BlockCache {
  Normalized<S> norm1, norm2;
  Matrix<S> ln1, qkv, context, ln2, fc, gelu;
  Values<S> probabilities;
};

// body(b, h) for every head h of every sequence b, on the threads (parallel.hpp): each head
// writes only its own part.
template <typename Body>
void for_each_head(int batch, int heads, Body body) {
  parallel_for(static_cast<std::size_t>(batch) * heads, 1, [&](std::size_t first, std::size_t last) {
    for (std::size_t head = first; head < last; ++head) body(static_cast<int>(head) / heads, static_cast<int>(head) % heads);
  });
}

// A head's rows of a features x tokens matrix, in place: `rows` rows from `row`, `cols` columns
// from `col`, the matrix's columns apart.
template <typename S>
struct HeadBlock {
  const S* data;
  Eigen::Index rows, cols, stride;
};
template <typename S>
HeadBlock<S> head_rows(const Matrix<S>& m, Eigen::Index row, Eigen::Index col, Eigen::Index rows, Eigen::Index cols) {
  return {m.data() + col * m.rows() + row, rows, cols, m.rows()};
}
// c (contiguous, column-major) = op(a) op(b): float32 through gemm_block on the calling thread (the
// same bits as gemm on copies of the blocks), float64 through Eigen.
inline void head_product(const HeadBlock<float>& a, bool transpose_a, const HeadBlock<float>& b, bool transpose_b, float* c) {
  gemm_block({a.data, a.rows, a.cols, a.stride}, transpose_a, {b.data, b.rows, b.cols, b.stride}, transpose_b, c);
}
inline void head_product(const HeadBlock<double>& a, bool transpose_a, const HeadBlock<double>& b, bool transpose_b, double* c) {
  using Block = Eigen::Map<const Matrix<double>, 0, Eigen::OuterStride<>>;
  const Block ma(a.data, a.rows, a.cols, Eigen::OuterStride<>(a.stride)), mb(b.data, b.rows, b.cols, Eigen::OuterStride<>(b.stride));
  const Eigen::Index m = transpose_a ? a.cols : a.rows, n = transpose_b ? b.rows : b.cols;
  Eigen::Map<Matrix<double>> mc(c, m, n);
  if (transpose_a && transpose_b) mc.noalias() = ma.transpose() * mb.transpose();
  else if (transpose_a) mc.noalias() = ma.transpose() * mb;
  else if (transpose_b) mc.noalias() = ma * mb.transpose();
  else mc.noalias() = ma * mb;
}
// A contiguous rows x cols matrix as a block.
template <typename S>
HeadBlock<S> whole(const S* data, Eigen::Index rows, Eigen::Index cols) {
  return {data, rows, cols, rows};
}
// rows x cols contiguous values written into m's rows from `row`, columns from `col`.
template <typename S>
void set_head_rows(Matrix<S>& m, Eigen::Index row, Eigen::Index col, const S* values, Eigen::Index rows, Eigen::Index cols) {
  for (Eigen::Index j = 0; j < cols; ++j) std::copy_n(values + j * rows, rows, m.data() + (col + j) * m.rows() + row);
}


// The keys x queries matrix of a packed triangle times `factor` (zero where a key comes after its
// query), into `full` (context x context, column-major).
template <typename S>
void unpack_triangle(const S* packed, int context, S factor, S* full) {
  for (int j = 0; j < context; ++j) {
    S* column = full + static_cast<std::size_t>(j) * context;
    scale_array(packed + triangle_start(j), factor, column, j + 1);
    std::fill(column + j + 1, column + context, S(0));
  }
}
// The causal part of a keys x queries matrix (key i <= query j; column-major, context x context)
// times `factor`, packed.
template <typename S>
void pack_triangle(const S* full, int context, S factor, S* packed) {
  for (int j = 0; j < context; ++j) scale_array(full + static_cast<std::size_t>(j) * context, factor, packed + triangle_start(j), j + 1);
}

// A thread's working space for one head at a time (a few context x context matrices), kept
// between heads and steps.
template <typename S>
S* head_scratch(std::size_t which, std::size_t count) {
  thread_local std::vector<Values<S>> buffers;
  if (buffers.size() <= which) buffers.resize(which + 1);
  if (buffers[which].size() < count) buffers[which].resize(count);
  return buffers[which].data();
}

// A thread's room for a head's packed operands (HeadOperand), kept between heads and steps.
inline PackedBlock& head_room(std::size_t which) {
  thread_local PackedBlock rooms[3];
  return rooms[which];
}

// One of a head's product operands: a block of a matrix, or a packed causal triangle as its keys x
// queries block (unpack_triangle's, times `factor`). In float32 it is packed for the bf16 kernels
// at most once however many of the head's products take it (in `room`, PackedBlock), and a
// triangle is unpacked (into `unpacked`, context x context) only for a product that runs in
// float32; float64 products take the values.
template <typename S>
class HeadOperand {
 public:
  HeadOperand(const HeadBlock<S>& block, PackedBlock& room) : block_(block), room_(room) {}
  HeadOperand(const S* triangle, int context, S factor, S* unpacked, PackedBlock& room)
      : block_(whole(unpacked, context, context)), room_(room), triangle_(triangle), unpacked_(unpacked), context_(context), factor_(factor) {}

  // The packed block; null where products of it run in float32 (bf16_block_product's rule: the
  // first values look like bf16 values, and all are).
  const PackedBlock* packed() {
    if constexpr (std::is_same_v<S, float>) {
      if (!looked_) {
        looked_ = true;
        bf16_ = bf16_products_available() && starts_bf16_values();
        if (bf16_ && triangle_ != nullptr) room_.pack_triangle(triangle_, context_, factor_);
        else if (bf16_) room_.pack({block_.data, block_.rows, block_.cols, block_.stride});
        bf16_ = bf16_ && room_.scan().bf16();
      }
      return bf16_ ? &room_ : nullptr;
    } else {
      return nullptr;
    }
  }
  const HeadBlock<S>& values() {
    if (triangle_ != nullptr && !made_) unpack_triangle(triangle_, context_, factor_, unpacked_);
    made_ = true;
    return block_;
  }

 private:
  // starts_bf16 of the block: a triangle's first column is its first value times the factor, then zeros.
  bool starts_bf16_values() const {
    if (triangle_ == nullptr) return starts_bf16(block_.data, block_.rows, block_.cols);
    const S first = triangle_[0] * factor_;
    return starts_bf16(&first, 1, 1);
  }
  HeadBlock<S> block_;
  PackedBlock& room_;
  const S* triangle_ = nullptr;
  S* unpacked_ = nullptr;  // where a triangle's block is made (block_'s data)
  int context_ = 0;
  S factor_ = 1;
  bool looked_ = false, bf16_ = false, made_ = false;
};
// c = op(a) op(b) of a head's operands: packed through the bf16 kernels where both are and the
// product is exact (gemm_packed_blocks), else head_product on their values -- the decision and the
// bits of gemm_block on the values.
template <typename S>
void head_product(HeadOperand<S>& a, bool transpose_a, HeadOperand<S>& b, bool transpose_b, S* c) {
  if constexpr (std::is_same_v<S, float>) {
    const PackedBlock* packed_b = b.packed();
    const PackedBlock* packed_a = packed_b != nullptr ? a.packed() : nullptr;
    if (packed_a != nullptr && gemm_packed_blocks(*packed_a, transpose_a, *packed_b, transpose_b, c)) return;
  }
  head_product(a.values(), transpose_a, b.values(), transpose_b, c);
}

// The attention triangles' casts: in pieces, a head's part of each as that head makes it (hooks
// that round in pieces), or each whole between the passes over the heads. Each stage runs on
// every head before the next, or each head through every stage, in the same order of casts.
template <typename S>
struct TriangleCasts {
  Hooks<S>& hooks;
  bool gradient;
  int block;
  std::size_t head_size;  // one triangle's values
  std::vector<const char*> names;
  std::vector<S*> values;
  std::size_t total;

  // stage(b, h) for each head, the casts of names[i] (on values[i]) after stage i.
  template <typename... Stages>
  void run(int batch, int heads, Stages... stages) {
    static_assert(sizeof...(Stages) == 3);
    const std::function<void(int, int)> each[] = {stages...};
    if (hooks.rounds_in_pieces()) {
      std::vector<std::unique_ptr<StoredPieces<S>>> pieces;
      for (const char* name : names) pieces.push_back(hooks.begin_stored(gradient, block, name, total, 0));
      for_each_head(batch, heads, [&](int b, int h) {
        const std::size_t offset = (static_cast<std::size_t>(b) * heads + h) * head_size;
        for (std::size_t stage = 0; stage < 3; ++stage) {
          each[stage](b, h);
          if (stage < pieces.size()) pieces[stage]->piece(values[stage] + offset, head_size, offset);
        }
      });
      for (auto& piece : pieces) piece->finish();
      return;
    }
    for (std::size_t stage = 0; stage < 3; ++stage) {
      for_each_head(batch, heads, each[stage]);
      if (stage < names.size()) {
        if (gradient) hooks.gradient(block, names[stage], values[stage], total, 0);
        else hooks.activation(block, names[stage], values[stage], total, 0);
      }
    }
  }
};

// Causal multi-head self-attention of one block on qkv (3 width x tokens): scores, softmax,
// context (width x tokens), each stored through the hooks.
template <typename S>
Matrix<S> attention(const GptShape& shape, int batch, int block, const Matrix<S>& qkv, Values<S>& probabilities, Hooks<S>& hooks) {
  const int T = shape.context, D = shape.width, H = shape.heads, dh = D / H;
  const std::size_t P = triangle(T), TT = static_cast<std::size_t>(T) * T;
  const S inverse_sqrt = S(1) / std::sqrt(static_cast<S>(dh));
  Values<S> scores(static_cast<std::size_t>(batch) * H * P);
  probabilities.resize(scores.size());
  Matrix<S> context(D, static_cast<Eigen::Index>(batch) * T);
  const auto offset = [&](int b, int h) { return (static_cast<std::size_t>(b) * H + h) * P; };
  const auto make_scores = [&](int b, int h) {
    S* s = head_scratch<S>(0, TT);  // keys x queries
    HeadOperand<S> keys(head_rows(qkv, D + h * dh, b * T, dh, T), head_room(0)), queries(head_rows(qkv, h * dh, b * T, dh, T), head_room(1));
    head_product(keys, true, queries, false, s);
    pack_triangle(s, T, inverse_sqrt, scores.data() + offset(b, h));
  };
  const auto make_probabilities = [&](int b, int h) {
    for (int j = 0; j < T; ++j) {
      const std::size_t start = offset(b, h) + triangle_start(j);
      S top = scores[start];
      for (int i = 1; i <= j; ++i) top = std::max(top, scores[start + i]);
      // Each exponential once (float32: elementwise_math.hpp's, activation_pass.hpp), kept where the
      // probability goes, then divided by their sum.
      S* row = probabilities.data() + start;
      if constexpr (std::is_same_v<S, float>) {
        shifted_exponentials(scores.data() + start, top, row, static_cast<std::size_t>(j) + 1);
      } else {
        for (int i = 0; i <= j; ++i) row[i] = std::exp(scores[start + i] - top);
      }
      const S sum = ConstColumn<S>(row, j + 1).sum();
      divide_array(row, sum, row, j + 1);
    }
  };
  const auto make_context = [&](int b, int h) {
    S* out = head_scratch<S>(1, static_cast<std::size_t>(dh) * T);
    HeadOperand<S> values(head_rows(qkv, 2 * D + h * dh, b * T, dh, T), head_room(0)),
        p(probabilities.data() + offset(b, h), T, S(1), head_scratch<S>(0, TT), head_room(1));
    head_product(values, false, p, false, out);
    set_head_rows(context, h * dh, b * T, out, dh, T);
  };
  TriangleCasts<S>{hooks, false, block, P, {"attn.scores", "attn.softmax"}, {scores.data(), probabilities.data()}, scores.size()}.run(
      batch, H, make_scores, make_probabilities, make_context);
  stored(hooks, block, "attn.context", context);
  return context;
}

// The gradient of qkv from the context's, through the stored probabilities.
template <typename S>
Matrix<S> attention_backward(const GptShape& shape, int batch, int block, const Matrix<S>& qkv, const Values<S>& probabilities,
                             const Matrix<S>& dcontext, Hooks<S>& hooks) {
  const int T = shape.context, D = shape.width, H = shape.heads, dh = D / H;
  const std::size_t P = triangle(T), TT = static_cast<std::size_t>(T) * T;
  const S inverse_sqrt = S(1) / std::sqrt(static_cast<S>(dh));
  Matrix<S> dqkv(3 * D, static_cast<Eigen::Index>(batch) * T);
  Values<S> dprobabilities(probabilities.size()), dscores(probabilities.size());
  const auto offset = [&](int b, int h) { return (static_cast<std::size_t>(b) * H + h) * P; };
  const auto through_values = [&](int b, int h) {
    S* out = head_scratch<S>(1, std::max(TT, static_cast<std::size_t>(dh) * T));
    HeadOperand<S> v(head_rows(qkv, 2 * D + h * dh, b * T, dh, T), head_room(0)), dout(head_rows(dcontext, h * dh, b * T, dh, T), head_room(1)),
        p(probabilities.data() + offset(b, h), T, S(1), head_scratch<S>(0, TT), head_room(2));
    head_product(dout, false, p, true, out);
    set_head_rows(dqkv, 2 * D + h * dh, b * T, out, dh, T);
    head_product(v, true, dout, false, out);  // keys x queries
    pack_triangle(out, T, S(1), dprobabilities.data() + offset(b, h));
  };
  const auto through_softmax = [&](int b, int h) {
    for (int j = 0; j < T; ++j) {
      const std::size_t start = offset(b, h) + triangle_start(j);
      const ConstColumn<S> p(probabilities.data() + start, j + 1), dp(dprobabilities.data() + start, j + 1);
      const S dot = (p * dp).sum();
      softmax_gradient_array(p.data(), dp.data(), dot, dscores.data() + start, j + 1);
    }
  };
  const auto through_scores = [&](int b, int h) {
    S* out = head_scratch<S>(1, static_cast<std::size_t>(dh) * T);
    HeadOperand<S> ds(dscores.data() + offset(b, h), T, inverse_sqrt, head_scratch<S>(0, TT), head_room(0)),
        keys(head_rows(qkv, D + h * dh, b * T, dh, T), head_room(1)), queries(head_rows(qkv, h * dh, b * T, dh, T), head_room(2));
    head_product(keys, false, ds, false, out);
    set_head_rows(dqkv, h * dh, b * T, out, dh, T);
    head_product(queries, false, ds, true, out);
    set_head_rows(dqkv, D + h * dh, b * T, out, dh, T);
  };
  TriangleCasts<S>{hooks, true, block, P, {"attn.softmax", "attn.scores"}, {dprobabilities.data(), dscores.data()}, dscores.size()}.run(
      batch, H, through_values, through_softmax, through_scores);
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
    AfterSteps<S> ln1(hooks, l);
    c.ln1 = layer_norm(x, w(Index::ln1_gain), w(Index::ln1_bias), c.norm1, ln1.store("ln1").for_product(l, "attn.qkv", false, c.ln1));
    AfterSteps<S> qkv(hooks, l);
    c.qkv = linear(hooks, l, "attn.qkv", w(Index::qkv_weight), c.ln1, qkv.bias(w(Index::qkv_bias)).store("attn.qkv"));
    c.context = attention(shape, batch, l, c.qkv, c.probabilities, hooks);
    AfterSteps<S> proj(hooks, l);
    linear(hooks, l, "attn.proj", w(Index::proj_weight), c.context, proj.bias(w(Index::proj_bias)).store("attn.proj").add_into(x).store("residual1"));
    AfterSteps<S> ln2(hooks, l);
    c.ln2 = layer_norm(x, w(Index::ln2_gain), w(Index::ln2_bias), c.norm2, ln2.store("ln2").for_product(l, "mlp.fc", false, c.ln2));
    AfterSteps<S> fc(hooks, l);
    fc.bias(w(Index::fc_bias)).store("mlp.fc").map(c.gelu, [](const S* z, S* out, std::size_t n, std::size_t) { gelu_values(z, out, n); });
    c.fc = linear(hooks, l, "mlp.fc", w(Index::fc_weight), c.ln2, fc.store("mlp.gelu").for_product(l, "mlp.proj", false, c.gelu));
    AfterSteps<S> out(hooks, l);
    linear(hooks, l, "mlp.proj", w(Index::mlp_proj_weight), c.gelu, out.bias(w(Index::mlp_proj_bias)).store("mlp.proj").add_into(x).store("residual2"));
  }
  Normalized<S> final_norm;
  AfterSteps<S> ln_f(hooks, -1);
  Matrix<S> final_ln = layer_norm(x, p[static_cast<std::size_t>(Index::final_gain(L))], p[static_cast<std::size_t>(Index::final_bias(L))],
                                  final_norm, ln_f.store("ln_f"));
  Matrix<S> logits = product(p[Index::tokens], false, final_ln, false);  // tied head: vocab x tokens
  stored(hooks, -1, "head", logits);
  Matrix<S> dlogits(V, N);
  std::vector<S> token_losses(static_cast<std::size_t>(N));
  parallel_for(static_cast<std::size_t>(N), grain_of(static_cast<std::size_t>(V)), [&](std::size_t first, std::size_t last) {
    if constexpr (std::is_same_v<S, float>) {
      cross_entropy_rows(logits.data() + first * V, static_cast<std::size_t>(V), last - first, targets + first, gradient_factor,
                         dlogits.data() + first * V, token_losses.data() + first);
    } else {
      for (std::size_t n = first; n < last; ++n)
        token_losses[n] = cross_entropy(logits.data() + n * V, V, targets[n], gradient_factor, dlogits.data() + n * V);
    }
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
  // The residual stream's gradient, as each LayerNorm's backward makes it, is the gradient of the
  // branch output below it: rounded as residual2 (or residual1), it is already a value of the
  // format, and rounds to itself as mlp.proj's (or attn.proj's) -- recorded under that name from the
  // same values, no copy made -- and its columns sum to that projection's bias gradient. Below the
  // first block it is the embeddings'.
  Matrix<S> dx;
  const auto residual_gradient = [&g, &dx](AfterSteps<S>& after, int below) -> AfterSteps<S>& {
    if (below < 0) return after.store_gradient_of(-1, "embed");
    return after.store_gradient_of(below, "residual2")
        .store_gradient_of(below, "mlp.proj")
        .for_product(below, "mlp.proj", true, dx)
        .sum_columns(g[static_cast<std::size_t>(Index::block(below, Index::mlp_proj_bias))]);
  };
  AfterSteps<S> dfinal_steps(hooks, -1);
  layer_norm_backward(dfinal, p[static_cast<std::size_t>(Index::final_gain(L))], final_norm, g[static_cast<std::size_t>(Index::final_gain(L))],
                      g[static_cast<std::size_t>(Index::final_bias(L))], dx, false, residual_gradient(dfinal_steps, L - 1));
  for (int l = L; l-- > 0;) {
    BlockCache<S>& c = caches[static_cast<std::size_t>(l)];
    const auto w = [&](Index::Block which) -> const Matrix<S>& { return p[static_cast<std::size_t>(Index::block(l, which))]; };
    const auto dw = [&](Index::Block which) -> Matrix<S>& { return g[static_cast<std::size_t>(Index::block(l, which))]; };
    Matrix<S> dfc;
    AfterSteps<S> dgelu(hooks, l);
    dgelu.store_gradient("mlp.gelu").map(dfc, [&c](const S* gradient, S* out, std::size_t n, std::size_t offset) {
      gelu_gradient_values(c.fc.data() + offset, gradient, out, n);
    });
    linear_backward(hooks, l, "mlp.proj", w(Index::mlp_proj_weight), c.gelu, dx, dw(Index::mlp_proj_weight),
                    dgelu.store_gradient("mlp.fc").for_product(l, "mlp.fc", true, dfc).sum_columns(dw(Index::fc_bias)));
    AfterSteps<S> dln2_steps(hooks, l);
    Matrix<S> dln2 = linear_backward(hooks, l, "mlp.fc", w(Index::fc_weight), c.ln2, dfc, dw(Index::fc_weight), dln2_steps.store_gradient("ln2"));
    AfterSteps<S> residual1(hooks, l);
    layer_norm_backward(dln2, w(Index::ln2_gain), c.norm2, dw(Index::ln2_gain), dw(Index::ln2_bias), dx, true,
                        residual1.store_gradient("residual1").store_gradient("attn.proj").for_product(l, "attn.proj", true, dx).sum_columns(dw(Index::proj_bias)));
    AfterSteps<S> dcontext_steps(hooks, l);
    Matrix<S> dcontext = linear_backward(hooks, l, "attn.proj", w(Index::proj_weight), c.context, dx, dw(Index::proj_weight),
                                         dcontext_steps.store_gradient("attn.context"));
    const Matrix<S> dqkv = attention_backward(shape, batch, l, c.qkv, c.probabilities, dcontext, hooks);
    add_column_sum(dqkv, dw(Index::qkv_bias));
    AfterSteps<S> dln1_steps(hooks, l);
    Matrix<S> dln1 = linear_backward(hooks, l, "attn.qkv", w(Index::qkv_weight), c.ln1, dqkv, dw(Index::qkv_weight), dln1_steps.store_gradient("ln1"));
    AfterSteps<S> below(hooks, -1);
    layer_norm_backward(dln1, w(Index::ln1_gain), c.norm1, dw(Index::ln1_gain), dw(Index::ln1_bias), dx, true, residual_gradient(below, l - 1));
  }
  // Each token's column of dx added to its token's row and its position's row, token by token in
  // order (each sum's order fixed by the batch alone), on the threads by feature: the rows held
  // transposed meanwhile, so that each addition runs along contiguous features.
  Matrix<S> token_rows = g[Index::tokens].transpose(), position_rows = g[Index::positions].transpose();
  parallel_for(static_cast<std::size_t>(D), 16, [&](std::size_t first, std::size_t last) {
    const auto f = static_cast<Eigen::Index>(first), features = static_cast<Eigen::Index>(last - first);
    for (Eigen::Index n = 0; n < N; ++n) {
      const auto column = dx.col(n).segment(f, features);
      token_rows.col(tokens[n]).segment(f, features) += column;
      position_rows.col(static_cast<Eigen::Index>(n % T)).segment(f, features) += column;
    }
  });
  g[Index::tokens] = token_rows.transpose();
  g[Index::positions] = position_rows.transpose();
  return loss;
}

}  // namespace fpscope::gpt_pass
