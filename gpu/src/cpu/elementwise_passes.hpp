// The CPU backend's element-wise passes, written once over a lane type (a float, or a vector of
// them: lanes_avx2.hpp, lanes_avx512.hpp) and compiled once per instruction set
// (elementwise_scalar.cpp, elementwise_avx2.cpp, elementwise_avx512.cpp). Whole vectors, then the
// last few elements as one partial vector through the same instructions: every element gets the
// scalar function's bits, wherever a thread's range begins.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fpscope/gpu/activation.hpp"

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
  // The largest magnitude bits of n values (hd.hpp's magnitude_bits; 0 for none): the step
  // sentinel's reduction.
  std::uint32_t (*largest_magnitude_bits)(const float* in, std::size_t n);
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
      [](const float* in, std::size_t n) {  // a plain loop: the unit's instruction set vectorises it
        std::uint32_t top = 0;
        for (std::size_t i = 0; i < n; ++i) {
          std::uint32_t bits;
          std::memcpy(&bits, in + i, sizeof bits);
          top = std::max(top, bits & 0x7FFFFFFFu);
        }
        return top;
      },
  };
}

}  // namespace fpscope::element
