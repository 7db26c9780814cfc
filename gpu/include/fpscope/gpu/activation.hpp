// Activation functions and their derivatives in float32, shared by the CPU backend and the CUDA kernels.
#pragma once

#include <math.h>

#include <cstdint>

#include "fpscope/core/hd.hpp"

namespace fpscope {

enum class Activation : std::uint8_t { relu, gelu, tanh };

// GELU in its exact (erf) form and its derivative, over float32 or a vector of them (the CPU
// backend's passes, activation_pass.hpp), erf and exp given by `math`: the one formula.
struct ScalarMath {
  FPSCOPE_HD float erf(float x) const { return erff(x); }
  FPSCOPE_HD float exp(float x) const { return expf(x); }
};
template <typename V, typename Math>
FPSCOPE_HD inline V gelu_of(V z, const Math& math) {
  return 0.5f * z * (1.0f + math.erf(z * 0.70710678f));
}
template <typename V, typename Math>
FPSCOPE_HD inline V gelu_derivative_of(V z, const Math& math) {
  return 0.5f * (1.0f + math.erf(z * 0.70710678f)) + z * 0.39894228f * math.exp(-0.5f * z * z);
}

FPSCOPE_HD inline float activate(Activation a, float z) {
  switch (a) {
    case Activation::relu: return z > 0 ? z : 0.0f;
    case Activation::gelu: return gelu_of(z, ScalarMath{});
    case Activation::tanh: return tanhf(z);
  }
  return z;
}

FPSCOPE_HD inline float activation_derivative(Activation a, float z) {
  switch (a) {
    case Activation::relu: return z > 0 ? 1.0f : 0.0f;
    case Activation::gelu: return gelu_derivative_of(z, ScalarMath{});
    case Activation::tanh: {
      const float t = tanhf(z);
      return 1.0f - t * t;
    }
  }
  return 1.0f;
}

}  // namespace fpscope
