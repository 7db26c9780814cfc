// The CPU backend's activation passes (activation_pass.hpp) against activate() and
// activation_derivative() element by element: relu and tanh bit for bit, GELU through libmvec
// within a stated bound; lengths that leave tails, and in place.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "activation_pass.hpp"
#include "fpscope/gpu/parallel.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/mlp.hpp"

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
}  // namespace

TEST_CASE("activation passes: relu and tanh are activate()'s bits, forward and backward, in place") {
  for (const std::size_t n : {std::size_t{1}, std::size_t{37}, std::size_t{70001}}) {
    const std::vector<float> z = inputs(n), g = inputs(n + 3);
    for (const Activation a : {Activation::relu, Activation::tanh}) {
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

TEST_CASE("activation passes: GELU within 16 float32 epsilons of its terms of activate()'s, forward and backward") {
  if (!gelu_is_vectorised()) MESSAGE("GELU runs element by element here (no AVX2): the bound holds trivially");
  set_gemm_threads(2);
  const std::size_t n = 100003;  // not a multiple of 8 or 16
  const std::vector<float> z = inputs(n), g = inputs(n + 1);
  std::vector<float> forward(n), backward(n);
  activation_forward(Activation::gelu, z.data(), forward.data(), n);
  activation_backward(Activation::gelu, z.data(), g.data(), backward.data(), n);
  // libmvec's erff and expf are within 4 ulp of glibc's; each term of the formula then moves by
  // at most a few epsilons of its own size.
  const double epsilon = std::ldexp(1.0, -24);
  double worst_forward = 0, worst_backward = 0;
  std::size_t same = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double v = z[i];
    const double forward_scale = std::abs(0.5 * v) * 2 + 1e-38;
    const double backward_scale = std::abs(static_cast<double>(g[i])) * (1.0 + std::abs(v) * 0.4 * std::exp(-0.5 * v * v)) + 1e-38;
    worst_forward = std::max(worst_forward, std::abs(forward[i] - static_cast<double>(activate(Activation::gelu, z[i]))) / (forward_scale * epsilon));
    worst_backward = std::max(worst_backward, std::abs(backward[i] - static_cast<double>(g[i] * activation_derivative(Activation::gelu, z[i]))) /
                                                  (backward_scale * epsilon));
    same += bits(forward[i]) == bits(activate(Activation::gelu, z[i]));
  }
  CAPTURE(same);
  CHECK(worst_forward <= 16);
  CHECK(worst_backward <= 16);
  // In place gives the same as out of place.
  std::vector<float> in_place = z;
  activation_forward(Activation::gelu, in_place.data(), in_place.data(), n);
  CHECK(std::memcmp(in_place.data(), forward.data(), n * sizeof(float)) == 0);
  set_gemm_threads(1);
}

TEST_CASE("activation passes: a softmax row's exponentials within 4 ulp of std::exp, every tail length, in place") {
  // libmvec's expf is within 4 ulp of glibc's (its documentation); rows of 1 to 40 values leave
  // every tail of 16 and of 8 lanes; the shift is the row's largest, as the softmax takes it.
  const std::vector<float> z = inputs(40);
  for (std::size_t n = 1; n <= z.size(); ++n) {
    float top = z[0];
    for (std::size_t i = 1; i < n; ++i) top = std::max(top, z[i]);
    std::vector<float> out(n + 1, -7.0f);
    shifted_exponentials(z.data(), top, out.data(), n);
    CAPTURE(n);
    CHECK(out[n] == -7.0f);  // nothing written past the row
    for (std::size_t i = 0; i < n; ++i) {
      const float expected = std::exp(z[i] - top);
      const double ulp = std::max(std::abs(static_cast<double>(std::nextafter(expected, 2 * expected + 1) - expected)), 1e-45);
      CHECK(std::abs(static_cast<double>(out[i]) - expected) <= 4 * ulp);
    }
    std::vector<float> in_place(z.begin(), z.begin() + static_cast<std::ptrdiff_t>(n));
    shifted_exponentials(in_place.data(), top, in_place.data(), n);
    CHECK(std::memcmp(in_place.data(), out.data(), n * sizeof(float)) == 0);
  }
}

TEST_CASE("activation passes: GELU gives the same bits on any number of threads (vector tails only at the end)") {
  // Ranges split at other than whole vectors put a scalar tail (glibc's erff / expf) in the middle
  // of the array, where the lanes (libmvec's) may round the other way: 3 threads did that.
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
