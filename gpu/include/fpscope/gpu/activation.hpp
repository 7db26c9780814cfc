// Activation functions and their derivatives in float32, shared by the CPU backend and the CUDA kernels.
#pragma once

#include <math.h>

#include <cstdint>
#include <type_traits>

#include "fpscope/core/hd.hpp"

namespace fpscope {

enum class Activation : std::uint8_t { relu, gelu, tanh };

// GELU is the exact (erf) form.
FPSCOPE_HD inline float activate(Activation a, float z) {
  switch (a) {
    case Activation::relu: return z > 0 ? z : 0.0f;
    case Activation::gelu: return 0.5f * z * (1.0f + erff(z * 0.70710678f));
    case Activation::tanh: return tanhf(z);
  }
  return z;
}

FPSCOPE_HD inline float activation_derivative(Activation a, float z) {
  switch (a) {
    case Activation::relu: return z > 0 ? 1.0f : 0.0f;
    case Activation::gelu: return 0.5f * (1.0f + erff(z * 0.70710678f)) + z * 0.39894228f * expf(-0.5f * z * z);
    case Activation::tanh: {
      const float t = tanhf(z);
      return 1.0f - t * t;
    }
  }
  return 1.0f;
}

// Calls body(std::integral_constant<Activation, a>{}): loops written inside see the activation as a
// constant, so that the compiler vectorises them (a switch per element would stop it).
template <typename Body>
inline void with_activation(Activation a, Body body) {
  switch (a) {
    case Activation::relu: return body(std::integral_constant<Activation, Activation::relu>{});
    case Activation::gelu: return body(std::integral_constant<Activation, Activation::gelu>{});
    case Activation::tanh: return body(std::integral_constant<Activation, Activation::tanh>{});
  }
}

}  // namespace fpscope
