// The master-weight update of a step that was not skipped, written once for the CPU backend and the
// CUDA kernel. The gradient still carries the step's loss scale S: the update is
// w -= (learning_rate / S) * g, one quotient per step and two roundings per element (a product,
// then a difference; no fused multiply-add on either side), so both backends give the same bits
// for any scale, a power of two or not.
#pragma once

#include <cstdint>

#include "fpscope/core/hd.hpp"

namespace fpscope {

// learning_rate / S in float32: the step's one factor.
FPSCOPE_HD inline float sgd_step_factor(float learning_rate, float loss_scale) { return learning_rate / loss_scale; }

FPSCOPE_HD inline float sgd_update_element(float weight, float scaled_gradient, float step_factor) {
  const float change = step_factor * scaled_gradient;
  return weight - change;
}

// Whether a gradient is infinite or NaN: such a step is skipped and its loss scale backs off.
FPSCOPE_HD inline bool gradient_non_finite(float gradient) { return (float_bits(gradient) & 0x7F800000u) == 0x7F800000u; }

}  // namespace fpscope
