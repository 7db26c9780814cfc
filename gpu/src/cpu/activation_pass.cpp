// Activation passes (activation_pass.hpp): the widest element-wise passes the processor runs
// (elementwise_passes.hpp), on the engine's threads.
#include "activation_pass.hpp"

#include <algorithm>

#include "elementwise_passes.hpp"
#include "fpscope/core/bulk.hpp"
#include "fpscope/gpu/parallel.hpp"

namespace fpscope {

namespace {

constexpr std::size_t grain = 16384;

const element::ElementwisePasses& passes() {
  static const element::ElementwisePasses& chosen = elementwise_passes_for(bulk_kernel_isa());
  return chosen;
}

// [0, n) on the threads in ranges that start at multiples of 16 elements (whole vectors of either
// width): each range's last few elements go through one partial vector, so only the last range
// has one.
template <typename Body>
void in_whole_vectors(std::size_t n, Body body) {
  constexpr std::size_t lanes = 16;
  parallel_for((n + lanes - 1) / lanes, grain / lanes,
               [&](std::size_t first, std::size_t last) { body(first * lanes, std::min(last * lanes, n)); });
}

}  // namespace

const element::ElementwisePasses& elementwise_passes_for(std::string_view isa) {
  if (isa == "avx512") return element::avx512_passes;
  if (isa == "avx2") return element::avx2_passes;
  return element::scalar_passes;
}

void activation_forward(Activation a, const float* z, float* out, std::size_t n) {
  in_whole_vectors(n, [&](std::size_t begin, std::size_t end) { passes().forward(a, z + begin, out + begin, end - begin); });
}

void activation_backward(Activation a, const float* z, const float* gradient, float* out, std::size_t n) {
  in_whole_vectors(n, [&](std::size_t begin, std::size_t end) {
    passes().backward(a, z + begin, gradient + begin, out + begin, end - begin);
  });
}

void shifted_exponentials(const float* in, float shift, float* out, std::size_t n) { passes().shifted_exponentials(in, shift, out, n); }

void add_values(const float* a, const float* b, float* out, std::size_t n) { passes().add(a, b, out, n); }

void scale_values(const float* in, float factor, float* out, std::size_t n) { passes().scale(in, factor, out, n); }

void divide_values(const float* in, float divisor, float* out, std::size_t n) { passes().divide(in, divisor, out, n); }

void softmax_gradient_values(const float* p, const float* dp, float dot, float* out, std::size_t n) {
  passes().softmax_gradient(p, dp, dot, out, n);
}

void sum_columns(const float* values, std::size_t rows, std::size_t columns, float* sum) { passes().sum_columns(values, rows, columns, sum); }

void sum_column_products(const float* a, const float* b, std::size_t rows, std::size_t columns, float* sum) {
  passes().sum_column_products(a, b, rows, columns, sum);
}

void normalize_values(const float* in, float mean, float rstd, const float* gain, const float* bias, float* xhat, float* out, std::size_t n) {
  passes().normalize(in, mean, rstd, gain, bias, xhat, out, n);
}

void normalize_gradient_values(const float* g, const float* gain, const float* xhat, float mean_g, float mean_gx, float rstd, float* out,
                               bool add, std::size_t n) {
  passes().normalize_gradient(g, gain, xhat, mean_g, mean_gx, rstd, out, add, n);
}

void cross_entropy_rows(const float* logits, std::size_t classes, std::size_t rows, const int* labels, float factor, float* gradient,
                        float* losses) {
  passes().cross_entropy_rows(logits, classes, rows, labels, factor, gradient, losses);
}

}  // namespace fpscope
