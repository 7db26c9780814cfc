// TrainingConfig: how a model trains -- the model (an MLP's layers and activation, or a GPT's
// shape), the precision policy, rounding, loss scaling, learning rate, optimizer, GEMM recipe and
// block recording -- with the names each choice is parsed from and printed as.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/gpu/activation.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "fpscope/gpu/gpt_shape.hpp"
#include "fpscope/gpu/loss_scaler.hpp"
#include "fpscope/gpu/optimizer.hpp"

namespace fpscope {

// fp32: everything in float32. fp16 / bf16: Micikevicius et al. 2018 -- float32 master weights,
// low-precision copies for the forward and backward passes, GEMMs on low-precision inputs with
// float32 accumulation and outputs rounded to the format, float32 loss, loss scaling, float32
// update. fp16_pure: the same without master weights (weights live in fp16).
enum class Precision : std::uint8_t { fp32, fp16, bf16, fp16_pure };

// Every choice, in the order menus list them; parse_* accepts exactly their *_name()s.
inline constexpr Activation all_activations[] = {Activation::relu, Activation::gelu, Activation::tanh};
inline constexpr Precision all_precisions[] = {Precision::fp32, Precision::fp16, Precision::bf16, Precision::fp16_pure};
Activation parse_activation(std::string_view name);  // relu, gelu, tanh; throws std::invalid_argument
Precision parse_precision(std::string_view name);    // fp32, fp16, bf16, fp16-pure
std::string precision_name(Precision precision);
// The policy's low-precision format: fp16 (fp16 and fp16-pure), bf16, or fp32 for the fp32 policy.
inline Format precision_format(Precision precision) {
  switch (precision) {
    case Precision::fp32: return formats::fp32;
    case Precision::bf16: return formats::bf16;
    default: return formats::fp16;
  }
}
std::string activation_name(Activation activation);
// The widest layer a model may have (parse_layer_sizes; a checkpoint holding a wider one is corrupt).
inline constexpr int max_layer_size = 1 << 20;
// "784-512-512-10": at least two sizes, each 1 ..= max_layer_size; throws std::invalid_argument naming the text.
std::vector<int> parse_layer_sizes(std::string_view text);
// The inverse: "784-512-512-10".
std::string layer_sizes_name(const std::vector<int>& sizes);
// About how much memory training this model on batches of `batch` takes at its peak: the master
// weights, their low-precision copies, gradients and a checkpoint's copies, and a batch's inputs,
// activations and their gradients (saturating). Checked against what is available before
// anything is allocated.
std::uint64_t estimated_training_bytes(const std::vector<int>& layer_sizes, std::int64_t batch);

// A block-scaled format whose statistics every recorded tensor carries beside its histogram
// (TensorRecord::blocks): what MXFP8, MXFP4 or NVFP4 would flush and saturate in this run's
// tensors, computed from the values before their cast, elements rounded to nearest even. It
// changes nothing in the training. The CPU backend records it.
struct BlockRecording {
  BlockFormat format;
  ScaleRule rule = ScaleRule::floor;
};

// "FORMAT" or "FORMAT:RULE" (mxfp8-e4m3, mxfp4:even, nvfp4): a block format and, for MX, its
// scale rule (default floor). Throws std::invalid_argument with one sentence naming the text.
BlockRecording parse_block_recording(std::string_view text);
// The text parse_block_recording reads back: "mxfp4:even", "mxfp8-e4m3" for the floor rule.
std::string block_recording_name(const BlockRecording& blocks);

// False where the environment sets FPSCOPE_STEP_GRAPHS to 0 or "off"; true otherwise.
bool step_graphs_by_default();

// The training settings of either model: an MLP of `layer_sizes` and `activation`, or where `gpt`
// is set that decoder (gpt.hpp; layer_sizes and activation unused).
struct TrainingConfig {
  std::vector<int> layer_sizes{784, 512, 512, 10};
  std::optional<GptShape> gpt;
  Activation activation = Activation::relu;
  Precision precision = Precision::fp16;
  RoundingMode rounding = RoundingMode::nearest_even;
  LossScalerConfig scaler = LossScalerConfig::pytorch();
  float learning_rate = 0.01f;
  // The loss is multiplied by this before the backward pass, as a term of a multi-task loss
  // often is; its gradients shrink by the same factor (scale learning_rate up to compensate).
  float loss_weight = 1.0f;
  std::uint64_t seed = 1;
  std::optional<BlockRecording> record_blocks;
  OptimizerConfig optimizer;  // plain SGD by default (both backends); the others on the CPU backend
  RecipeConfig recipe;        // FP8 or block-scaled GEMM operands (gemm_recipe.hpp; CPU backend)
  // The step sentinel (step_sentinel.hpp) reads every tensor a step would record, on every step.
  // Off only to measure what it costs and to hold a run to one without it.
  bool sentinel = true;
  // The device backends replay a step's launches as one graph (step_graphs.hpp) from the third step
  // of a shape on; the CPU backend has none. On unless the environment says FPSCOPE_STEP_GRAPHS=0,
  // which is how the CUDA tests run both ways.
  bool step_graphs = step_graphs_by_default();
};

// The model as run-log headers name it: "784-512-10 relu", or the GPT's gpt_shape_name.
std::string model_name(const TrainingConfig& config);
// An MLP layer's name in records, faults and files: fc1 for the layer of index 0.
std::string mlp_layer_name(std::size_t index);

}  // namespace fpscope
