// A multi-layer perceptron trained with mixed precision on the CPU (Eigen): the reference backend.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/snapshot/snapshot.hpp"
#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/gpu/optimizer.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/gpu/activation.hpp"
#include "fpscope/gpu/fault_injection.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "fpscope/gpu/gpt_shape.hpp"
#include "fpscope/gpu/loss_scaler.hpp"

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

// The training settings of either model: an MLP of `layer_sizes` and `activation`, or where `gpt`
// is set that decoder (gpt.hpp; layer_sizes and activation unused).
struct MlpConfig {
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
};

// The model as run-log headers name it: "784-512-10 relu", or the GPT's gpt_shape_name.
std::string model_name(const MlpConfig& config);

struct StepResult {
  double loss = 0;        // float32 cross-entropy of the batch, unscaled
  double loss_scale = 1;  // the scale this step ran with
  bool skipped = false;   // non-finite gradients: master weights untouched
  std::optional<Snapshot> snapshot;  // when the step was recorded
  std::vector<OperandScaling> scaling;  // per-tensor FP8 recipes: every operand's amax and scale
  std::vector<BlockOperandStatistics> block_operands;  // block-scaled recipes: what each operand's blocks did
};

// The whole training state, for checkpoints: restoring it and stepping on gives the same bits.
struct TrainerState {
  std::int64_t steps = 0;
  std::vector<Eigen::MatrixXf> weights;  // layer l: out x in
  std::vector<Eigen::VectorXf> biases;
  LossScalerState scaler;
  std::uint64_t stochastic_counter = 0;
  OptimizerState optimizer;  // per parameter (layer l: weight 2l, bias 2l + 1); empty for plain SGD
  // Per-tensor FP8 recipes: layer l's input, weight and output gradient at 3l, 3l + 1, 3l + 2;
  // empty otherwise.
  std::vector<Fp8TensorState> fp8;
};

// Throws std::invalid_argument unless `state` is of an MLP of these layer sizes: weights (out x in)
// and biases per layer, optimizer buffers that fit (weight 2l, bias 2l + 1), `fp8_slots` FP8 scales.
void check_mlp_state(const std::vector<int>& layer_sizes, const TrainerState& state, std::size_t fp8_slots);

// What `fpscope train`, TrainingSession and the app drive: the CPU backend (MlpTrainer, below)
// and the CUDA backend (CudaMlpTrainer, in a module loaded on demand: backend_choice.hpp).
class TrainerBackend {
 public:
  virtual ~TrainerBackend() = default;
  virtual std::string_view name() const = 0;  // "cpu" or "cuda"
  // One step on a batch: inputs (batch x layer_sizes[0]) and class labels (for a GPT, token ids
  // and next-token targets: gpt.hpp); a Snapshot when `record`. `read_loss`: the host waits for the step's loss, scale and skip; otherwise a device
  // backend may return NaN for them and keep running ahead (the CPU always knows them).
  virtual StepResult step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool read_loss) = 0;
  virtual TrainerState state() const = 0;
  // Throws std::invalid_argument when the state's shapes are not this model's.
  virtual void restore(const TrainerState& state) = 0;
  // Puts a non-finite value into element (0, 0) of the layer's weight gradient at that step,
  // before it is cast and recorded (so the run log's histogram counts it) and checked.
  virtual void inject(const FaultInjection& fault) = 0;
  virtual LossScalerState scaler_state() const = 0;
  // A new scaling rule from now on, starting at its initial scale; the count of skipped steps
  // goes on (LossScaler::reconfigure). The app's loss-scale slider and its dynamic button.
  virtual void reconfigure_scaler(const LossScalerConfig& config) = 0;
  virtual std::int64_t step_count() const = 0;
  // Low-precision format of the policy (fp32 for the fp32 policy).
  virtual Format format() const = 0;
};

class MlpTrainer final : public TrainerBackend {
 public:
  explicit MlpTrainer(const MlpConfig& config);
  std::string_view name() const override { return "cpu"; }
  // One step on a batch: inputs (batch x layer_sizes[0]) and class labels. Records a Snapshot
  // when `record` is set.
  StepResult step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record);
  StepResult step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool /*read_loss*/) override {
    return step(inputs, labels, record);
  }
  // The loss and the gradients of the master weights in float64 arithmetic, for tests.
  double loss_in_double(const Eigen::MatrixXf& inputs, const std::vector<int>& labels) const;

  const MlpConfig& config() const { return config_; }
  LossScaler& scaler() { return scaler_; }
  const LossScaler& scaler() const { return scaler_; }
  std::int64_t step_count() const override { return steps_; }
  LossScalerState scaler_state() const override { return scaler_.state(); }
  void reconfigure_scaler(const LossScalerConfig& config) override { scaler_.reconfigure(config); }
  // Master weights (fp32; for fp16_pure, the fp16 weights as float32) and biases per layer.
  std::vector<Eigen::MatrixXf>& weights() { return weights_; }
  std::vector<Eigen::VectorXf>& biases() { return biases_; }
  Format format() const override;
  void inject(const FaultInjection& fault) override { faults_.push_back(fault); }

  using State = TrainerState;
  State state() const override;
  void restore(const State& state) override;

 private:
  MlpConfig config_;
  LossScaler scaler_;
  Context ctx_;
  std::vector<Eigen::MatrixXf> weights_;  // layer l: out x in
  std::vector<Eigen::VectorXf> biases_;
  std::int64_t steps_ = 0;
  std::vector<FaultInjection> faults_;
  OptimizerState optimizer_;
  std::vector<Fp8TensorState> fp8_;  // per-tensor FP8 recipes (TrainerState::fp8)
};

}  // namespace fpscope
