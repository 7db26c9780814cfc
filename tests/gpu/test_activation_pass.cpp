// The CPU backend's element-wise passes (activation_pass.hpp, elementwise_passes.hpp) against the
// scalar functions (activation.hpp, elementwise_math.hpp): every instruction set this processor has
// gives the scalar code's bits for every element, for every tail length, in place, on any number
// of threads; and the scalar functions within their stated ulp of the exact ones on a sample (the
// whole float32 range: tests/exhaustive/elementwise_math.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "activation_pass.hpp"
#include "elementwise_passes.hpp"
#include "fpscope/core/bulk.hpp"
#include "float32_ulps.hpp"
#include "fpscope/gpu/elementwise_math.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/gpt_element.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/parallel.hpp"
#include "fpscope/gpu/softmax_cross_entropy.hpp"

using namespace fpscope;

namespace {
std::vector<float> inputs(std::size_t n) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> z(n);
  for (float& v : z) v = normal(rng);
  // The edges: zeros of both signs, tiny and huge magnitudes, where erf saturates.
  const float edges[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-4f, -1e-4f, 5.0f, -5.0f, 10.0f, -10.0f, 40.0f, -40.0f, 1e30f, -1e30f};
  for (std::size_t i = 0; i < std::size(edges) && i < n; ++i) z[i * 7 % n] = edges[i];
  return z;
}
std::uint32_t bits(float x) {
  std::uint32_t b = 0;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
float from_bits(std::uint32_t b) {
  float x = 0;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// Every special value and every region boundary of the functions, each with its neighbours; a
// dense ramp over [-12, 12]; and random bit patterns (NaNs with payloads, subnormals, infinities).
std::vector<float> hard_inputs() {
  std::vector<float> z;
  const float marks[] = {0.0f, 1e-45f, 1.17549435e-38f, 1e-30f, 1e-8f, 0.5f, 0.9f, 1.0f, 1.25f, 3.92f, 4.0f, 9.0f, 10.0f, 88.0f,
                         88.7228394f, 89.0f, 103.9f, 104.0f, 1e10f, 3.4028235e38f, INFINITY};
  for (const float m : marks)
    for (const float sign : {1.0f, -1.0f})
      for (int step = -2; step <= 2; ++step) z.push_back(from_bits(static_cast<std::uint32_t>(static_cast<int>(bits(m)) + step)) * sign);
  z.push_back(NAN);
  z.push_back(-NAN);
  z.push_back(from_bits(0x7f800001u));  // a signalling NaN
  z.push_back(from_bits(0xffc01234u));  // a quiet NaN with a payload, negative
  for (int i = -120000; i <= 120000; ++i) z.push_back(static_cast<float>(i) * 1e-4f);
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) z.push_back(from_bits(static_cast<std::uint32_t>(rng())));
  return z;
}

// The instruction sets this processor runs (always the scalar one).
std::vector<std::string> instruction_sets() {
  std::vector<std::string> sets;
  for (const char* isa : {"generic", "avx2", "avx512"})
    if (bulk_isa_supported(isa)) sets.emplace_back(isa);
  return sets;
}

// How many of out's n elements differ in their bits from reference(i).
template <typename Reference>
std::size_t differing(const std::vector<float>& out, Reference reference) {
  std::size_t differ = 0;
  for (std::size_t i = 0; i < out.size(); ++i) differ += bits(out[i]) != bits(reference(i));
  return differ;
}

// The same where both are NaN, whatever their payloads: where a sum meets two NaNs, which one it
// keeps is the compiler's choice of operand order (IEEE 754 leaves it open), and the vector units'
// loops are compiled apart from the reference.
std::size_t differing_numbers(const std::vector<float>& got, const std::vector<float>& want) {
  std::size_t differ = got.size() != want.size();
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) differ += bits(got[i]) != bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]);
  return differ;
}

using test::float32_ulps;
}  // namespace

TEST_CASE("element-wise math: every instruction set gives the scalar functions' bits, every element, every tail, in place") {
  const std::vector<float> z = hard_inputs();
  const std::vector<float> g = inputs(z.size());
  for (const std::string& isa : instruction_sets()) {
    CAPTURE(isa);
    const element::ElementwisePasses& passes = elementwise_passes_for(isa);
    std::vector<float> out(z.size());
    passes.exp(z.data(), out.data(), z.size());
    CHECK(differing(out, [&](std::size_t i) { return element::exp_of(z[i]); }) == 0);
    passes.tanh(z.data(), out.data(), z.size());
    CHECK(differing(out, [&](std::size_t i) { return element::tanh_of(z[i]); }) == 0);
    passes.erf(z.data(), out.data(), z.size());
    CHECK(differing(out, [&](std::size_t i) { return element::erf_of(z[i]); }) == 0);
    for (const Activation a : all_activations) {
      CAPTURE(activation_name(a));
      passes.forward(a, z.data(), out.data(), z.size());
      CHECK(differing(out, [&](std::size_t i) { return activate(a, z[i]); }) == 0);
      passes.backward(a, z.data(), g.data(), out.data(), z.size());
      CHECK(differing(out, [&](std::size_t i) { return g[i] * activation_derivative(a, z[i]); }) == 0);
    }
    // Every tail length of 16 and 8 lanes, nothing written past the end, in place the same.
    for (std::size_t n = 1; n <= 40; ++n) {
      CAPTURE(n);
      const float shift = z[n];
      std::vector<float> row(z.begin() + 1000, z.begin() + 1000 + static_cast<std::ptrdiff_t>(n)), shifted(n + 1, -7.0f);
      passes.shifted_exponentials(row.data(), shift, shifted.data(), n);
      CHECK(shifted[n] == -7.0f);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < n; ++i) differ += bits(shifted[i]) != bits(element::exp_of(row[i] - shift));
      CHECK(differ == 0);
      passes.forward(Activation::gelu, row.data(), row.data(), n);
      differ = 0;
      for (std::size_t i = 0; i < n; ++i) differ += bits(row[i]) != bits(activate(Activation::gelu, z[1000 + i]));
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("the GPT's element-wise arithmetic: every instruction set gives the scalar code's bits, every tail, nothing written past the end") {
  // Sums whose order shows in their bits (magnitudes over 2^20), LayerNorm's formulas
  // (gpt_element.hpp) against one float at a time, in place where the pass allows it.
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const auto random_values = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = std::ldexp(normal(rng), static_cast<int>(rng() % 21) - 10);
    return v;
  };
  for (const std::size_t rows : {std::size_t{1}, std::size_t{5}, std::size_t{16}, std::size_t{37}, std::size_t{64}, std::size_t{100}, std::size_t{256}}) {
    CAPTURE(rows);
    const std::size_t columns = 70;
    const std::vector<float> a = random_values(rows * columns), b = random_values(rows * columns), gain = random_values(rows),
                             bias = random_values(rows);
    // The references, one float at a time.
    std::vector<float> sum(rows, 0.0f), products(rows, 0.0f);
    for (std::size_t n = 0; n < columns; ++n)
      for (std::size_t f = 0; f < rows; ++f) {
        sum[f] += a[n * rows + f];
        const float product = a[n * rows + f] * b[n * rows + f];
        products[f] += product;
      }
    const float mean = 0.25f, rstd = 1.75f, mean_g = -0.125f, mean_gx = 0.375f, factor = 0.0883883476f;
    std::vector<float> xhat(rows), out(rows), gradient(rows), added(rows), sums(rows), scaled(rows), divided(rows), softmax(rows);
    for (std::size_t i = 0; i < rows; ++i) {
      xhat[i] = normalized_of(a[i], mean, rstd);
      out[i] = layer_norm_output_of(gain[i], xhat[i], bias[i]);
      gradient[i] = layer_norm_gradient_of(a[i], gain[i], b[i], mean_g, mean_gx, rstd);
      added[i] = b[rows + i] + gradient[i];
      sums[i] = a[i] + b[i];
      scaled[i] = a[i] * factor;
      divided[i] = a[i] / factor;
      softmax[i] = a[i] * (b[i] - mean_gx);
    }
    const auto same = [](const std::vector<float>& got, const std::vector<float>& want) {
      for (std::size_t i = 0; i < want.size(); ++i)
        if (bits(got[i]) != bits(want[i])) return false;
      return got.size() == want.size() || got[want.size()] == -3.0f;  // the guard past the end untouched
    };
    for (const std::string& isa : instruction_sets()) {
      CAPTURE(isa);
      const element::ElementwisePasses& passes = elementwise_passes_for(isa);
      std::vector<float> got(rows + 1, -3.0f), got_xhat(rows + 1, -3.0f);
      passes.sum_columns(a.data(), rows, columns, got.data());
      CHECK(same(got, sum));
      passes.sum_column_products(a.data(), b.data(), rows, columns, got.data());
      CHECK(same(got, products));
      passes.normalize(a.data(), mean, rstd, gain.data(), bias.data(), got_xhat.data(), got.data(), rows);
      CHECK(same(got_xhat, xhat));
      CHECK(same(got, out));
      passes.normalize_gradient(a.data(), gain.data(), b.data(), mean_g, mean_gx, rstd, got.data(), false, rows);
      CHECK(same(got, gradient));
      std::copy(b.begin() + static_cast<std::ptrdiff_t>(rows), b.begin() + static_cast<std::ptrdiff_t>(2 * rows), got.begin());
      passes.normalize_gradient(a.data(), gain.data(), b.data(), mean_g, mean_gx, rstd, got.data(), true, rows);
      CHECK(same(got, added));
      passes.add(a.data(), b.data(), got.data(), rows);
      CHECK(same(got, sums));
      std::copy(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(rows), got.begin());
      passes.scale(got.data(), factor, got.data(), rows);  // in place
      CHECK(same(got, scaled));
      std::copy(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(rows), got.begin());
      passes.divide(got.data(), factor, got.data(), rows);  // in place
      CHECK(same(got, divided));
      passes.softmax_gradient(a.data(), b.data(), mean_gx, got.data(), rows);
      CHECK(same(got, softmax));
    }
  }
}

TEST_CASE("cross-entropy rows: every instruction set gives softmax_cross_entropy_row's loss and gradient bits, any rows and classes") {
  // Rows of logits spread over many binades, and rows whose largest logit is a zero (either sign
  // first), a tie, an infinity, a NaN somewhere or everywhere, -infinity everywhere, the first or
  // the last.
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  for (const std::size_t classes : {std::size_t{1}, std::size_t{3}, std::size_t{10}, std::size_t{16}, std::size_t{17}, std::size_t{50}, std::size_t{256}, std::size_t{259}}) {
    for (const std::size_t rows : {std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9}, std::size_t{23}}) {
      CAPTURE(classes);
      CAPTURE(rows);
      std::vector<float> logits(rows * classes);
      for (float& x : logits) x = std::ldexp(normal(rng), static_cast<int>(rng() % 9) - 2);
      std::vector<int> labels(rows);
      for (int& label : labels) label = static_cast<int>(rng() % classes);
      const auto row = [&](std::size_t r) { return logits.data() + r * classes; };
      const auto at = [&](std::size_t r, std::size_t c) -> float& { return row(r)[c % classes]; };
      if (rows > 1) {  // zeros on top: -0 first, then +0 first
        for (std::size_t c = 0; c < classes; ++c) at(1, c) = -std::fabs(at(1, c)) - 1.0f;
        at(1, classes / 2) = -0.0f, at(1, classes - 1) = 0.0f;
      }
      if (rows > 2) {
        for (std::size_t c = 0; c < classes; ++c) at(2, c) = -std::fabs(at(2, c)) - 1.0f;
        at(2, 0) = 0.0f, at(2, classes / 3) = -0.0f;
      }
      if (rows > 3) at(3, 2) = NAN, at(3, classes / 2) = INFINITY;
      if (rows > 4) at(4, 0) = NAN;
      if (rows > 5) std::fill(row(5), row(5) + classes, NAN);
      if (rows > 6) std::fill(row(6), row(6) + classes, -INFINITY), at(6, 1) = NAN;
      if (rows > 7) at(7, 0) = at(7, classes - 1) = 40.0f;
      if (rows > 8) at(8, classes - 1) = -INFINITY, at(8, 0) = from_bits(0x7fc01234u);
      if (rows > 9) at(9, classes - 1) = 50.0f;  // the largest last: in the vectors' tail
      if (rows > 10) at(10, 0) = 50.0f;
      // The reference: the row function itself, one row at a time.
      std::vector<float> gradient(rows * classes), losses(rows);
      const float factor = 0.0883883476f;
      for (std::size_t r = 0; r < rows; ++r)
        losses[r] = softmax_cross_entropy_row(row(r), static_cast<int>(classes), 1, labels[r], factor, gradient.data() + r * classes);
      for (const std::string& isa : instruction_sets()) {
        CAPTURE(isa);
        std::vector<float> got(rows * classes + 1, -3.0f), got_losses(rows, -3.0f);
        elementwise_passes_for(isa).cross_entropy_rows(logits.data(), classes, rows, labels.data(), factor, got.data(), got_losses.data());
        CHECK(differing_numbers(got_losses, losses) == 0);
        CHECK(got.back() == -3.0f);  // nothing written past the end
        got.pop_back();
        CHECK(differing_numbers(got, gradient) == 0);
      }
    }
  }
}

TEST_CASE("element-wise math: exp, tanh and erf within 1, 1.5 and 1.5 ulp of the exact functions on every 4099th float32") {
  // The bounds are elementwise_math.hpp's; the exhaustive sweep checks every float32.
  double worst_exp = 0, worst_tanh = 0, worst_erf = 0;
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 4099) {
    const float x = from_bits(static_cast<std::uint32_t>(b));
    worst_exp = std::max(worst_exp, float32_ulps(element::exp_of(x), std::exp(static_cast<double>(x))));
    worst_tanh = std::max(worst_tanh, float32_ulps(element::tanh_of(x), std::tanh(static_cast<double>(x))));
    worst_erf = std::max(worst_erf, float32_ulps(element::erf_of(x), std::erf(static_cast<double>(x))));
  }
  MESSAGE("largest errors: exp " << worst_exp << " ulp, tanh " << worst_tanh << " ulp, erf " << worst_erf << " ulp");
  CHECK(worst_exp <= 1.0);
  CHECK(worst_tanh <= 1.5);
  CHECK(worst_erf <= 1.5);
}

TEST_CASE("activation passes: every activation is activate()'s bits on the threads, forward and backward, in place") {
  for (const std::size_t n : {std::size_t{1}, std::size_t{37}, std::size_t{70001}}) {
    const std::vector<float> z = inputs(n), g = inputs(n + 3);
    for (const Activation a : all_activations) {
      CAPTURE(n);
      CAPTURE(activation_name(a));
      std::vector<float> forward = z, backward = g;
      activation_forward(a, forward.data(), forward.data(), n);
      activation_backward(a, z.data(), backward.data(), backward.data(), n);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < n; ++i) {
        differ += bits(forward[i]) != bits(activate(a, z[i]));
        differ += bits(backward[i]) != bits(g[i] * activation_derivative(a, z[i]));
      }
      CHECK(differ == 0);
    }
  }
}

TEST_CASE("activation passes: GELU within 4 float32 epsilons of its terms of the float64 formula, forward and backward") {
  const std::size_t n = 100003;
  const std::vector<float> z = inputs(n), g = inputs(n + 1);
  std::vector<float> forward(n), backward(n);
  activation_forward(Activation::gelu, z.data(), forward.data(), n);
  activation_backward(Activation::gelu, z.data(), g.data(), backward.data(), n);
  // erf and exp within 1.5 ulp, and each operation's rounding: each term of the formula moves by at
  // most a few epsilons of its own size.
  const double epsilon = std::ldexp(1.0, -24);
  double worst_forward = 0, worst_backward = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = z[i];
    const double cdf = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0)));
    const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2.0 * 3.14159265358979323846);
    const double forward_scale = std::abs(0.5 * v) * 2 + 1e-38;
    const double backward_scale = std::abs(static_cast<double>(g[i])) * (1.0 + std::abs(v) * 0.4 * std::exp(-0.5 * v * v)) + 1e-38;
    worst_forward = std::max(worst_forward, std::abs(forward[i] - v * cdf) / (forward_scale * epsilon));
    worst_backward = std::max(worst_backward, std::abs(backward[i] - g[i] * (cdf + v * pdf)) / (backward_scale * epsilon));
  }
  MESSAGE("largest differences: forward " << worst_forward << ", backward " << worst_backward << " epsilons of the terms");
  CHECK(worst_forward <= 4);
  CHECK(worst_backward <= 4);
}

TEST_CASE("activation passes: GELU gives the same bits on any number of threads") {
  const std::size_t n = 262144 + 5;
  const std::vector<float> z = inputs(n), g = inputs(n + 3);
  set_parallel_threads(1);
  std::vector<float> forward_one(n), backward_one(n);
  activation_forward(Activation::gelu, z.data(), forward_one.data(), n);
  activation_backward(Activation::gelu, z.data(), g.data(), backward_one.data(), n);
  for (const int threads : {2, 3, 5, 7}) {
    CAPTURE(threads);
    set_parallel_threads(threads);
    std::vector<float> forward(n), backward(n);
    activation_forward(Activation::gelu, z.data(), forward.data(), n);
    activation_backward(Activation::gelu, z.data(), g.data(), backward.data(), n);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < n; ++i) differ += (bits(forward[i]) != bits(forward_one[i])) + (bits(backward[i]) != bits(backward_one[i]));
    CHECK(differ == 0);
  }
  set_parallel_threads(1);
}
