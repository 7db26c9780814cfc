// The optimizers of the engine's recipe, on the fp32 master weights: SGD, SGD with momentum and
// AdamW, with clipping of the gradients' global norm.
//
// The gradients arrive carrying the step's loss scale S and are unscaled first (g / S in float32,
// exact for a power of two), clipped on those unscaled values (as GradScaler's unscale_ followed by
// clip_grad_norm_ does), then applied. A skipped step never reaches here: it is neither clipped
// nor counted. Plain SGD without clipping keeps sgd_update.hpp's rule instead (w -= (lr / S) g),
// the one the CUDA backend shares.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/gpu/optimizer_element.hpp"  // OptimizerKind, the rule per element

namespace fpscope {

inline constexpr OptimizerKind all_optimizers[] = {OptimizerKind::sgd, OptimizerKind::momentum, OptimizerKind::adamw};
std::string optimizer_name(OptimizerKind kind);          // "sgd", "momentum", "adamw"
OptimizerKind parse_optimizer(std::string_view name);    // throws std::invalid_argument with one sentence

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::sgd;
  float momentum = 0.9f;      // momentum: b = momentum * b + g; w -= lr * b (PyTorch's SGD, no dampening)
  float beta1 = 0.9f;         // AdamW (Loshchilov & Hutter 2019, as torch.optim.AdamW)
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float weight_decay = 0.0f;  // AdamW's decoupled decay: w *= 1 - lr * weight_decay
  float clip_grad_norm = 0.0f;  // > 0: the unscaled gradients' global L2 norm is clipped to this
  bool plain_sgd() const { return kind == OptimizerKind::sgd && clip_grad_norm == 0.0f; }
  friend bool operator==(const OptimizerConfig&, const OptimizerConfig&) = default;
};

// For people and run-log headers: "sgd", "momentum 0.9", "adamw betas 0.9,0.999 eps 1e-08 weight
// decay 0.01", each followed by ", clip N" where the gradients are clipped.
std::string describe(const OptimizerConfig& config);

// Per parameter, in order: the momentum buffer or AdamW's first moment, and AdamW's second moment
// (empty where the optimizer keeps none); `updates` counts the steps applied (AdamW's bias
// correction uses it).
struct OptimizerState {
  std::vector<std::vector<float>> first, second;
  std::int64_t updates = 0;
  friend bool operator==(const OptimizerState&, const OptimizerState&) = default;
};

// Whether a saved state fits parameters of these lengths, in order: each buffer list empty or one
// buffer per parameter, each buffer empty (not yet used) or of its parameter's length.
bool optimizer_state_fits(const OptimizerState& state, std::span<const std::size_t> parameter_sizes);

// Called with each range of a parameter's elements [begin, end) as soon as the update has written
// them, on the thread that wrote them, while they are in its cache (at most update_range_size
// elements; the ranges come in any order): for work on the new weights that would otherwise read
// them again, such as the next step's cast of them.
using UpdatedRange = std::function<void(std::size_t parameter, std::size_t begin, std::size_t end)>;
inline constexpr std::size_t update_range_size = 16384;

// One update of `parameters` from their `scaled_gradients` (same lengths, carrying loss_scale).
// Returns the unscaled gradients' global L2 norm before clipping (float64 sum of squares) where
// the config clips; nothing otherwise (it is not computed). Throws std::invalid_argument when the
// lengths or the state's buffers do not fit. `updated`, where given, sees every range written.
std::optional<double> optimizer_update(const OptimizerConfig& config, float learning_rate, float loss_scale,
                                       std::span<const std::span<float>> parameters, std::span<const std::span<const float>> scaled_gradients,
                                       OptimizerState& state, const UpdatedRange& updated = {});

// The update of a step that was not skipped, as both models apply it: plain SGD without clipping
// by sgd_update.hpp's rule (w -= (lr / S) g, the CUDA backend's), every other optimizer by
// optimizer_update. Same preconditions and exceptions as optimizer_update.
void update_parameters(const OptimizerConfig& config, float learning_rate, float loss_scale, std::span<const std::span<float>> parameters,
                       std::span<const std::span<const float>> scaled_gradients, OptimizerState& state, const UpdatedRange& updated = {});

}  // namespace fpscope
