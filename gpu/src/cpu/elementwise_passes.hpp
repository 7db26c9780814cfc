// The CPU backend's element-wise passes, written once over a lane type (a float, or a vector of
// them: lanes_avx2.hpp, lanes_avx512.hpp) and compiled once per instruction set
// (elementwise_scalar.cpp, elementwise_avx2.cpp, elementwise_avx512.cpp). Whole vectors, then the
// last few elements as one partial vector through the same instructions: every element gets the
// scalar function's bits, wherever a thread's range begins.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fpscope/gpu/activation.hpp"
#include "fpscope/gpu/gpt_element.hpp"

namespace fpscope::element {

// One instruction set's passes (out may equal an input).
struct ElementwisePasses {
  // out[i] = activation(z[i])
  void (*forward)(Activation, const float* z, float* out, std::size_t n);
  // out[i] = gradient[i] * activation'(z[i])
  void (*backward)(Activation, const float* z, const float* gradient, float* out, std::size_t n);
  // out[i] = exp(in[i] - shift)
  void (*shifted_exponentials)(const float* in, float shift, float* out, std::size_t n);
  // out[i] = exp(in[i]), tanh(in[i]), erf(in[i]): the functions alone, for the tests
  void (*exp)(const float* in, float* out, std::size_t n);
  void (*tanh)(const float* in, float* out, std::size_t n);
  void (*erf)(const float* in, float* out, std::size_t n);

  // The GPT's element-wise arithmetic (gpt_pass.hpp), each operation rounded as written, in the
  // order written: any width gives the same bits.
  // out[i] = a[i] + b[i]
  void (*add)(const float* a, const float* b, float* out, std::size_t n);
  // out[i] = in[i] * factor
  void (*scale)(const float* in, float factor, float* out, std::size_t n);
  // out[i] = in[i] / divisor
  void (*divide)(const float* in, float divisor, float* out, std::size_t n);
  // out[i] = p[i] * (dp[i] - dot): a softmax row's gradient from its output's
  void (*softmax_gradient)(const float* p, const float* dp, float dot, float* out, std::size_t n);
  // sum[f] = the sum over n < columns of values[n * rows + f], from zero, column after column (each
  // feature's additions in the columns' order, whatever the lanes).
  void (*sum_columns)(const float* values, std::size_t rows, std::size_t columns, float* sum);
  // The same of a[n * rows + f] * b[n * rows + f], each product rounded before it is added.
  void (*sum_column_products)(const float* a, const float* b, std::size_t rows, std::size_t columns, float* sum);
  // LayerNorm's column: xhat[i] = (in[i] - mean) * rstd, out[i] = gain[i] * xhat[i] + bias[i].
  void (*normalize)(const float* in, float mean, float rstd, const float* gain, const float* bias, float* xhat, float* out, std::size_t n);
  // LayerNorm's input gradient: rstd * (g[i] * gain[i] - mean_g - xhat[i] * mean_gx), written to
  // out[i], or added to it (out[i] + that) where `add`.
  void (*normalize_gradient)(const float* g, const float* gain, const float* xhat, float mean_g, float mean_gx, float rstd, float* out,
                             bool add, std::size_t n);
  // softmax_cross_entropy_row (softmax_cross_entropy.hpp, stride 1) of `rows` rows of `classes`
  // logits, row r at logits + r * classes with label labels[r]: its gradient to gradient + r *
  // classes (not overlapping the logits), its loss to losses[r]; the same bits (a NaN's payload
  // aside, where a sum meets two NaNs: which it keeps is the compiler's operand order).
  void (*cross_entropy_rows)(const float* logits, std::size_t classes, std::size_t rows, const int* labels, float factor, float* gradient,
                             float* losses);
};

extern const ElementwisePasses scalar_passes;
extern const ElementwisePasses avx2_passes;
extern const ElementwisePasses avx512_passes;

// How lanes M::Lane meet memory: M::width floats at a time (load, store), and the first n of them
// (load_first, store_first) for the last few elements. A vector lane type is its own M.
struct ScalarMemory {
  using Lane = float;
  static constexpr std::size_t width = 1;
  static float load(const float* p) { return *p; }
  static void store(float* p, float x) { *p = x; }
  static float load_first(const float* p, std::size_t) { return *p; }
  static void store_first(float* p, float x, std::size_t) { *p = x; }
};

// out[i] = function(in[i]) over n elements.
template <typename M, typename Function>
inline void map_lanes(const float* in, float* out, std::size_t n, Function function) {
  std::size_t i = 0;
  for (; i + M::width <= n; i += M::width) M::store(out + i, function(M::load(in + i)));
  if (i < n) M::store_first(out + i, function(M::load_first(in + i, n - i)), n - i);
}
// out[i] = function(a[i], b[i]).
template <typename M, typename Function>
inline void map_lanes(const float* a, const float* b, float* out, std::size_t n, Function function) {
  std::size_t i = 0;
  for (; i + M::width <= n; i += M::width) M::store(out + i, function(M::load(a + i), M::load(b + i)));
  if (i < n) M::store_first(out + i, function(M::load_first(a + i, n - i), M::load_first(b + i, n - i)), n - i);
}

// one(i, load, store) for the elements from i on: whole vectors, then the last few elements as one
// partial vector (load and store then touch only those), for passes of several inputs or outputs.
template <typename M, typename One>
inline void for_lanes(std::size_t n, One one) {
  std::size_t i = 0;
  for (; i + M::width <= n; i += M::width) one(i, [](const float* p) { return M::load(p); }, [](float* p, typename M::Lane x) { M::store(p, x); });
  if (i < n) {
    const std::size_t left = n - i;
    one(i, [left](const float* p) { return M::load_first(p, left); }, [left](float* p, typename M::Lane x) { M::store_first(p, x, left); });
  }
}

// sum[f] = the sum over columns of term(n, f) (a lane of features f...), from zero in the columns'
// order: four vectors of features at a time held in registers across the columns, then one, then
// the last few features as a partial vector.
template <typename M, typename Term>
inline void sum_over_columns(std::size_t rows, std::size_t columns, float* sum, Term term) {
  using L = typename M::Lane;
  constexpr std::size_t w = M::width;
  std::size_t f = 0;
  for (; f + 4 * w <= rows; f += 4 * w) {
    L s0(0.0f), s1(0.0f), s2(0.0f), s3(0.0f);
    for (std::size_t n = 0; n < columns; ++n) {
      s0 = s0 + term(n, f, [](const float* p) { return M::load(p); });
      s1 = s1 + term(n, f + w, [](const float* p) { return M::load(p); });
      s2 = s2 + term(n, f + 2 * w, [](const float* p) { return M::load(p); });
      s3 = s3 + term(n, f + 3 * w, [](const float* p) { return M::load(p); });
    }
    M::store(sum + f, s0), M::store(sum + f + w, s1), M::store(sum + f + 2 * w, s2), M::store(sum + f + 3 * w, s3);
  }
  for (; f + w <= rows; f += w) {
    L s(0.0f);
    for (std::size_t n = 0; n < columns; ++n) s = s + term(n, f, [](const float* p) { return M::load(p); });
    M::store(sum + f, s);
  }
  if (f < rows) {
    const std::size_t left = rows - f;
    L s(0.0f);
    for (std::size_t n = 0; n < columns; ++n) s = s + term(n, f, [left](const float* p) { return M::load_first(p, left); });
    M::store_first(sum + f, s, left);
  }
}

// The largest of n > 0 values by softmax_cross_entropy_row's rule (a NaN passed over; the first
// of equal values kept), the same bits as its loop: across lanes for the largest number, that
// loop itself where the answer is a zero (whose sign is the first one's) or there is no number
// above -infinity (the loop's NaN, or -infinity).
template <typename M>
inline float largest_logit(const float* in, std::size_t n) {
  using L = typename M::Lane;
  const auto in_order = [&] {
    float top = in[0];
    for (std::size_t c = 1; c < n; ++c) top = in[c] > top || top != top ? in[c] : top;
    return top;
  };
  L lanes(-INFINITY);
  std::size_t i = 0;
  for (; i + M::width <= n; i += M::width) {
    const L x = M::load(in + i);
    lanes = select(less(lanes, x), x, lanes);  // a NaN compares false
  }
  float each[M::width];
  M::store(each, lanes);
  float top = -INFINITY;
  for (const float x : each) top = x > top ? x : top;
  for (; i < n; ++i) top = in[i] > top ? in[i] : top;
  return top == 0.0f || !(top > -INFINITY) ? in_order() : top;
}

// ElementwisePasses::cross_entropy_rows over lanes M: each row's largest logit (largest_logit),
// exponentials (exp_of), sum from zero in the classes' order, loss and gradient as
// softmax_cross_entropy_row makes them; the sums of eight rows made side by side, each still in
// its own order (one addition's latency then covers eight).
template <typename M>
inline void cross_entropy_rows(const float* logits, std::size_t classes, std::size_t rows, const int* labels, float factor, float* gradient,
                               float* losses) {
  using L = typename M::Lane;
  constexpr std::size_t group = 8;
  for (std::size_t first = 0; first < rows; first += group) {
    const std::size_t count = std::min(group, rows - first);
    float sums[group] = {};
    for (std::size_t r = 0; r < count; ++r) {
      const float* row = logits + (first + r) * classes;
      const float top = largest_logit<M>(row, classes);
      map_lanes<M>(row, gradient + (first + r) * classes, classes, [top](L x) { return exp_of(x - L(top)); });
    }
    const float* exponentials = gradient + first * classes;
    if (count == group) {
      for (std::size_t c = 0; c < classes; ++c)
        for (std::size_t r = 0; r < group; ++r) sums[r] += exponentials[r * classes + c];
    } else {
      for (std::size_t r = 0; r < count; ++r)
        for (std::size_t c = 0; c < classes; ++c) sums[r] += exponentials[r * classes + c];
    }
    for (std::size_t r = 0; r < count; ++r) {
      float* row = gradient + (first + r) * classes;
      const float sum = sums[r];
      const auto label = static_cast<std::size_t>(labels[first + r]);
      const float at_label = row[label];
      losses[first + r] = -logf(at_label / sum);
      // x / sum - 0 is x / sum for every quotient (a -0 stays -0, a NaN itself): only the
      // label's element subtracts.
      map_lanes<M>(row, row, classes, [sum, factor](L x) { return (x / L(sum)) * L(factor); });
      row[label] = (at_label / sum - 1.0f) * factor;
    }
  }
}

// The table for lanes M; a unit defines its instruction set's with it, including this header after
// it switched its instruction set (the loops are compiled for that set).
template <typename M>
constexpr ElementwisePasses passes_for() {
  using L = typename M::Lane;
  return ElementwisePasses{
      [](Activation a, const float* z, float* out, std::size_t n) {
        switch (a) {  // one loop per activation: no switch inside it
          case Activation::relu: return map_lanes<M>(z, out, n, [](L x) { return activation_of(Activation::relu, x); });
          case Activation::gelu: return map_lanes<M>(z, out, n, [](L x) { return gelu_of(x); });
          case Activation::tanh: return map_lanes<M>(z, out, n, [](L x) { return tanh_of(x); });
        }
      },
      [](Activation a, const float* z, const float* gradient, float* out, std::size_t n) {
        switch (a) {
          case Activation::relu:
            return map_lanes<M>(z, gradient, out, n, [](L x, L g) { return g * activation_derivative_of(Activation::relu, x); });
          case Activation::gelu: return map_lanes<M>(z, gradient, out, n, [](L x, L g) { return g * gelu_derivative_of(x); });
          case Activation::tanh: return map_lanes<M>(z, gradient, out, n, [](L x, L g) { return g * tanh_derivative_of(x); });
        }
      },
      [](const float* in, float shift, float* out, std::size_t n) {
        map_lanes<M>(in, out, n, [shift](L x) { return exp_of(x - L(shift)); });
      },
      [](const float* in, float* out, std::size_t n) { map_lanes<M>(in, out, n, [](L x) { return exp_of(x); }); },
      [](const float* in, float* out, std::size_t n) { map_lanes<M>(in, out, n, [](L x) { return tanh_of(x); }); },
      [](const float* in, float* out, std::size_t n) { map_lanes<M>(in, out, n, [](L x) { return erf_of(x); }); },
      [](const float* a, const float* b, float* out, std::size_t n) { map_lanes<M>(a, b, out, n, [](L x, L y) { return x + y; }); },
      [](const float* in, float factor, float* out, std::size_t n) { map_lanes<M>(in, out, n, [factor](L x) { return x * L(factor); }); },
      [](const float* in, float divisor, float* out, std::size_t n) { map_lanes<M>(in, out, n, [divisor](L x) { return x / L(divisor); }); },
      [](const float* p, const float* dp, float dot, float* out, std::size_t n) {
        map_lanes<M>(p, dp, out, n, [dot](L x, L g) { return x * (g - L(dot)); });
      },
      [](const float* values, std::size_t rows, std::size_t columns, float* sum) {
        sum_over_columns<M>(rows, columns, sum, [&](std::size_t n, std::size_t f, auto load) { return load(values + n * rows + f); });
      },
      [](const float* a, const float* b, std::size_t rows, std::size_t columns, float* sum) {
        sum_over_columns<M>(rows, columns, sum, [&](std::size_t n, std::size_t f, auto load) {
          return load(a + n * rows + f) * load(b + n * rows + f);
        });
      },
      [](const float* in, float mean, float rstd, const float* gain, const float* bias, float* xhat, float* out, std::size_t n) {
        for_lanes<M>(n, [&](std::size_t i, auto load, auto store) {
          const L x = normalized_of(load(in + i), L(mean), L(rstd));
          store(xhat + i, x);
          store(out + i, layer_norm_output_of(load(gain + i), x, load(bias + i)));
        });
      },
      [](const float* g, const float* gain, const float* xhat, float mean_g, float mean_gx, float rstd, float* out, bool add, std::size_t n) {
        for_lanes<M>(n, [&](std::size_t i, auto load, auto store) {
          const L gradient = layer_norm_gradient_of(load(g + i), load(gain + i), load(xhat + i), L(mean_g), L(mean_gx), L(rstd));
          store(out + i, add ? load(out + i) + gradient : gradient);
        });
      },
      [](const float* logits, std::size_t classes, std::size_t rows, const int* labels, float factor, float* gradient, float* losses) {
        cross_entropy_rows<M>(logits, classes, rows, labels, factor, gradient, losses);
      },
  };
}

}  // namespace fpscope::element
