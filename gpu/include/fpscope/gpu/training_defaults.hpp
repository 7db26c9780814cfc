// The training settings fpscope train and fpscope-gui both start from: the example, the paper's
// effect small (Micikevicius et al. 2017). A tanh MLP whose loss is weighted by 2^-14, so its
// activation gradients sit around fp16's subnormal range, with a learning rate of 2^14 that undoes
// the weight (fp32 trains as with weight 1 and rate 1; without loss scaling fp16 ends with about
// twice fp32's loss, a gap a log-scale loss plot shows); fp16 without loss scaling, so the first run shows the flushing and the loss scale
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
inline constexpr float learning_rate = 16384.0f;
inline constexpr int loss_weight_log2 = -14;
inline constexpr OptimizerKind optimizer = OptimizerKind::sgd;
inline constexpr int record_every = 1;
inline constexpr const char* data = "synthetic";
inline constexpr int seed = 1;
inline constexpr std::int64_t cli_steps = 500;  // fpscope train; the app's form says 0, run until stopped

// A GPT's, where they differ (the model names one, gpt_shape.hpp): AdamW at 1e-3 on batches of 16
// sequences, the loss unweighted -- the MLP example's lr 2^14 and loss weight 2^-14 would wreck it.
namespace gpt {
inline constexpr int batch = 16;
inline constexpr float learning_rate = 1e-3f;
inline constexpr int loss_weight_log2 = 0;
inline constexpr OptimizerKind optimizer = OptimizerKind::adamw;
}  // namespace gpt

// The settings that differ between the two kinds of model.
struct KindSettings {
  int batch;
  float learning_rate;
  int loss_weight_log2;
  OptimizerKind optimizer;
  bool operator==(const KindSettings&) const = default;
};
inline constexpr KindSettings kind_defaults(bool gpt_model) {
  return gpt_model ? KindSettings{gpt::batch, gpt::learning_rate, gpt::loss_weight_log2, gpt::optimizer}
                   : KindSettings{batch, learning_rate, loss_weight_log2, optimizer};
}

// A form's settings after its model changed from one kind to the other (an MLP to a GPT or
// back): each still at the old kind's default takes the new kind's; what the user set stays.
inline constexpr KindSettings follow_model_kind(KindSettings settings, bool was_gpt, bool is_gpt) {
  if (was_gpt == is_gpt) return settings;
  const KindSettings from = kind_defaults(was_gpt), to = kind_defaults(is_gpt);
  if (settings.batch == from.batch) settings.batch = to.batch;
  if (settings.learning_rate == from.learning_rate) settings.learning_rate = to.learning_rate;
  if (settings.loss_weight_log2 == from.loss_weight_log2) settings.loss_weight_log2 = to.loss_weight_log2;
  if (settings.optimizer == from.optimizer) settings.optimizer = to.optimizer;
  return settings;
}

}  // namespace fpscope::training_defaults
