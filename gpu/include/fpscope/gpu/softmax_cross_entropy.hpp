// Softmax cross-entropy of one row of logits in float32, written once for the CPU backend and the
// CUDA kernel: the same operations in the same order on both.
#pragma once

#include <math.h>

#include "fpscope/core/hd.hpp"
#include "fpscope/gpu/elementwise_math.hpp"

namespace fpscope {

// The row's logits are logits[c * stride] for c in [0, cols); `label` is the true class. Writes
// the gradient of the loss with respect to each logit, (softmax - one-hot) * gradient_factor (the
// loss scale times the loss weight over the batch), to gradient[c * stride], and returns the
// row's loss, -log softmax[label]. The largest logit is subtracted first, so no exp overflows.
// `gradient` must not overlap `logits` (it holds the exponentials on the way).
// `exponentials(top)` writes exp(logits[c * stride] - top) to gradient[c * stride] for every c:
// element by element by default; the CPU backend passes its vector pass (activation_pass.hpp), the
// same bits.
template <typename Exponentials>
FPSCOPE_HD inline float softmax_cross_entropy_row(const float* logits, int cols, int stride, int label, float gradient_factor,
                                                  float* gradient, Exponentials exponentials) {
  float top = logits[0];
  // fmaxf's rule (a NaN loses to a number) written out: the call is not inlined on the CPU, and
  // was 1.4% of a GPT step's time there. The sign of a zero maximum cannot matter: exp(l - top)
  // is the same for either.
  for (int c = 1; c < cols; ++c) {
    const float v = logits[c * stride];
    top = v > top || top != top ? v : top;
  }
  // Each exponential once, kept where its gradient goes, then summed in order.
  exponentials(top);
  float sum = 0;
  for (int c = 0; c < cols; ++c) sum += gradient[c * stride];
  const float loss = -logf(gradient[label * stride] / sum);
  for (int c = 0; c < cols; ++c) gradient[c * stride] = (gradient[c * stride] / sum - (c == label ? 1.0f : 0.0f)) * gradient_factor;
  return loss;
}
FPSCOPE_HD inline float softmax_cross_entropy_row(const float* logits, int cols, int stride, int label, float gradient_factor,
                                                  float* gradient) {
  return softmax_cross_entropy_row(logits, cols, stride, label, gradient_factor, gradient, [&](float top) {
    for (int c = 0; c < cols; ++c) gradient[c * stride] = element::exp_of(logits[c * stride] - top);
  });
}

}  // namespace fpscope
