// Unscaling gradients in float32 and finding non-finite values: the CPU twin of the CUDA kernel.
#pragma once

#include <cstdint>
#include <span>

#include "fpscope/core/hd.hpp"

namespace fpscope {

// One element: g / S as g * (1/S) -- exact for a power-of-two scale -- and whether g was inf or NaN.
FPSCOPE_HD inline float unscale_element(float gradient, float inverse_scale, bool& non_finite) {
  non_finite = non_finite || (float_bits(gradient) & 0x7F800000u) == 0x7F800000u;
  return gradient * inverse_scale;
}

// Unscales in place; true when any gradient was non-finite.
inline bool unscale_and_check(std::span<float> gradients, float inverse_scale) {
  bool non_finite = false;
  for (float& g : gradients) g = unscale_element(g, inverse_scale, non_finite);
  return non_finite;
}

}  // namespace fpscope
