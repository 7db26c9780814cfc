// The optimizers' rule per element, written once for the CPU backend (optimizer.cpp) and the CUDA
// kernels: the step's settings (OptimizerStep, the same for every element of every parameter) and
// what one element's update does with them. Each operation as torch.optim's order has it, no
// fused multiply-add on either side (the CUDA kernels are compiled with --fmad=false), so both
// backends give the same bits for the same gradients.
#pragma once

#include <math.h>

#include <cstdint>

#include "fpscope/core/hd.hpp"

namespace fpscope {

enum class OptimizerKind : std::uint8_t { sgd, momentum, adamw };

struct OptimizerStep {
  OptimizerKind kind = OptimizerKind::sgd;
  float learning_rate = 0, loss_scale = 1;
  bool clip = false;
  float clip_coefficient = 1;  // max_norm / (norm + 1e-6) where the step clips
  float momentum = 0;
  float decay = 1, beta1 = 0, beta2 = 0, epsilon = 0, correction1 = 1, correction2 = 1;  // AdamW
};

// clip_grad_norm_'s rule on the unscaled gradients' global L2 norm: clip when the norm passes
// max_norm, by max_norm / (norm + 1e-6). max_norm 0: no clipping.
FPSCOPE_HD inline bool clips(float max_norm, double norm) { return max_norm > 0 && norm > max_norm; }
FPSCOPE_HD inline float clipping_coefficient(float max_norm, double norm) { return static_cast<float>(max_norm / (norm + 1e-6)); }

// The settings of update number t (1, 2, ...: AdamW's bias corrections) of a step run at loss_scale.
FPSCOPE_HD inline OptimizerStep optimizer_step(OptimizerKind kind, float learning_rate, float loss_scale, float momentum, float beta1,
                                               float beta2, float epsilon, float weight_decay, std::int64_t t, bool clip,
                                               float coefficient) {
  OptimizerStep s;
  s.kind = kind;
  s.learning_rate = learning_rate;
  s.loss_scale = loss_scale;
  s.clip = clip;
  s.clip_coefficient = clip ? coefficient : 1.0f;
  s.momentum = momentum;
  s.decay = 1.0f - learning_rate * weight_decay;
  s.beta1 = beta1;
  s.beta2 = beta2;
  s.epsilon = epsilon;
  s.correction1 = static_cast<float>(1.0 - pow(static_cast<double>(beta1), static_cast<double>(t)));
  s.correction2 = static_cast<float>(1.0 - pow(static_cast<double>(beta2), static_cast<double>(t)));
  return s;
}

// A gradient as the update sees it: unscaled by the step's loss scale, then clipped where it clips.
FPSCOPE_HD inline float unscaled_gradient(float scaled, const OptimizerStep& s) {
  const float g = scaled / s.loss_scale;
  return s.clip ? g * s.clip_coefficient : g;
}

// One element: w the master weight, first / second the optimizer's buffers (momentum's b, AdamW's
// m and v; unused where the kind keeps none).
FPSCOPE_HD inline void update_element(float& w, float& first, float& second, float scaled, const OptimizerStep& s) {
  const float g = unscaled_gradient(scaled, s);
  switch (s.kind) {
    case OptimizerKind::sgd: w -= s.learning_rate * g; return;
    case OptimizerKind::momentum:
      first = s.momentum * first + g;
      w -= s.learning_rate * first;
      return;
    case OptimizerKind::adamw: {
      w *= s.decay;
      first = s.beta1 * first + (1.0f - s.beta1) * g;
      second = s.beta2 * second + (1.0f - s.beta2) * g * g;
      const float m_hat = first / s.correction1;
      const float v_hat = second / s.correction2;
      w -= s.learning_rate * m_hat / (sqrtf(v_hat) + s.epsilon);
      return;
    }
  }
}

}  // namespace fpscope
