// Activation functions and their derivatives in float32, shared by the CPU backend and the CUDA kernels.
#pragma once

#include <math.h>

#include <cstdint>

#include "fpscope/core/hd.hpp"

namespace fpscope {

enum class Activation : std::uint8_t { relu, gelu, tanh };

// GELU in its exact (erf) form and its derivative, over float32 or a vector of them (the CPU
// backend's passes, activation_pass.cpp), erf and exp the functions named: the one formula, each
// operation in this order. Macros, so that the vector passes write them inside their own
// target("avx512f") / target("avx2") functions: Clang refuses AVX vectors passed to a function
// built without those instructions (a template instantiated for them would be one).
#define FPSCOPE_GELU(z, erf) (0.5f * (z) * (1.0f + erf((z) * 0.70710678f)))
#define FPSCOPE_GELU_DERIVATIVE(z, erf, exp) (0.5f * (1.0f + erf((z) * 0.70710678f)) + (z) * 0.39894228f * exp(-0.5f * (z) * (z)))
FPSCOPE_HD inline float gelu_of(float z) { return FPSCOPE_GELU(z, erff); }
FPSCOPE_HD inline float gelu_derivative_of(float z) { return FPSCOPE_GELU_DERIVATIVE(z, erff, expf); }

FPSCOPE_HD inline float activate(Activation a, float z) {
  switch (a) {
    case Activation::relu: return z > 0 ? z : 0.0f;
    case Activation::gelu: return gelu_of(z);
    case Activation::tanh: return tanhf(z);
  }
  return z;
}

FPSCOPE_HD inline float activation_derivative(Activation a, float z) {
  switch (a) {
    case Activation::relu: return z > 0 ? 1.0f : 0.0f;
    case Activation::gelu: return gelu_derivative_of(z);
    case Activation::tanh: {
      const float t = tanhf(z);
      return 1.0f - t * t;
    }
  }
  return 1.0f;
}

}  // namespace fpscope
