// Activation functions and their derivatives in float32, shared by the CPU backend and the CUDA
// kernels: written once over a lane type (a float, or a vector of floats in the CPU backend's
// passes, elementwise_math.hpp), so that the scalar code, every vector width and the GPU give the
// same bits.
#pragma once

#include <cstdint>

#include "fpscope/core/hd.hpp"
#include "fpscope/gpu/elementwise_math.hpp"

namespace fpscope {

enum class Activation : std::uint8_t { relu, gelu, tanh };

namespace element {

// GELU in its exact (erf) form, 0.5 z (1 + erf(z / sqrt 2)), and its derivative
// 0.5 (1 + erf(z / sqrt 2)) + z phi(z), each operation in this order.
template <typename V>
FPSCOPE_HD_KERNEL V gelu_of(V z) {
  return V(0.5f) * z * (V(1.0f) + erf_of(z * V(0.70710678f)));
}
template <typename V>
FPSCOPE_HD_KERNEL V gelu_derivative_of(V z) {
  return V(0.5f) * (V(1.0f) + erf_of(z * V(0.70710678f))) + z * V(0.39894228f) * exp_of(V(-0.5f) * z * z);
}
// 1 - tanh(z)^2, rounded once after the square.
template <typename V>
FPSCOPE_HD_KERNEL V tanh_derivative_of(V z) {
  const V t = tanh_of(z);
  return fused_multiply_add(V(0.0f) - t, t, V(1.0f));
}

// relu passes a NaN on as 0 (z > 0 is false), as its derivative does.
template <typename V>
FPSCOPE_HD_KERNEL V activation_of(Activation a, V z) {
  switch (a) {
    case Activation::relu: return select(less(V(0.0f), z), z, V(0.0f));
    case Activation::gelu: return gelu_of(z);
    case Activation::tanh: return tanh_of(z);
  }
  return z;
}
template <typename V>
FPSCOPE_HD_KERNEL V activation_derivative_of(Activation a, V z) {
  switch (a) {
    case Activation::relu: return select(less(V(0.0f), z), V(1.0f), V(0.0f));
    case Activation::gelu: return gelu_derivative_of(z);
    case Activation::tanh: return tanh_derivative_of(z);
  }
  return V(1.0f);
}

}  // namespace element

FPSCOPE_HD inline float activate(Activation a, float z) { return element::activation_of(a, z); }
FPSCOPE_HD inline float activation_derivative(Activation a, float z) { return element::activation_derivative_of(a, z); }

}  // namespace fpscope
