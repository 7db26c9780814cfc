// The training settings fpscope train and fpscope-gui both start from: the example, the paper's
// effect small (Micikevicius et al. 2017). A tanh MLP whose loss is weighted by 2^-10, so its
// activation gradients sit around fp16's subnormal range, with a learning rate of 1024 that undoes
// the weight; fp16 without loss scaling, so the first run shows the flushing and the loss scale
// shows the rescue. Only the length differs: fpscope train stops, the app runs until stopped.
// A GPT's batch, learning rate, loss weight and optimizer are its own (training_defaults::gpt).
#pragma once

#include <cstdint>

#include "fpscope/core/context.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/optimizer_element.hpp"

namespace fpscope::training_defaults {

inline constexpr const char* model = "32-64-64-64-10";
inline constexpr Activation activation = Activation::tanh;
inline constexpr Precision precision = Precision::fp16;
inline constexpr RoundingMode rounding = RoundingMode::nearest_even;
inline constexpr const char* loss_scale = "none";
inline constexpr int batch = 256;
inline constexpr float learning_rate = 1024.0f;
inline constexpr int loss_weight_log2 = -10;
inline constexpr OptimizerKind optimizer = OptimizerKind::sgd;
inline constexpr int record_every = 1;
inline constexpr const char* data = "synthetic";
inline constexpr int seed = 1;
inline constexpr std::int64_t cli_steps = 500;  // fpscope train; the app's form says 0, run until stopped

// A GPT's, where they differ (the model names one, gpt_shape.hpp): AdamW at 1e-3 on batches of 16
// sequences, the loss unweighted -- the MLP example's lr 1024 and loss weight 2^-10 would wreck it.
namespace gpt {
inline constexpr int batch = 16;
inline constexpr float learning_rate = 1e-3f;
inline constexpr int loss_weight_log2 = 0;
inline constexpr OptimizerKind optimizer = OptimizerKind::adamw;
}  // namespace gpt

}  // namespace fpscope::training_defaults
