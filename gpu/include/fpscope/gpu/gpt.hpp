// A GPT-style decoder trained with mixed precision on the CPU backend, beside the MLP: token and
// position embeddings, pre-LayerNorm blocks of causal multi-head self-attention and a GELU MLP with
// residuals, a final LayerNorm and an output head tied to the token embedding (Radford et al. 2019,
// the GPT-2 layout). The precision policy is training_config.hpp's: float32 master weights and
// low-precision copies; every GEMM on low-precision operands with float32 accumulation; every
// tensor a step stores -- GEMM outputs, attention scores and probabilities, LayerNorm and GELU
// outputs, the residual stream -- rounded to the format, and every gradient too; LayerNorm
// statistics, softmax sums and the loss in float32.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/core/context.hpp"
#include "fpscope/gpu/mlp.hpp"

namespace fpscope {

// One trainable tensor, in the model's fixed order (checkpoints, optimizer states, exports):
// named as PyTorch would name it ("h0.attn.qkv.weight"; a vector is rows x 1). `recorded` names
// the weight the run log records it as ("h0.attn.qkv", "h0.ln1"; empty for biases).
struct GptParameter {
  std::string name;
  int rows = 0;
  int cols = 1;
  std::string recorded;
};
std::vector<GptParameter> gpt_parameters(const GptShape& shape);
// The weights a run log records, in that order ("embed.tokens", "h0.ln1", "h0.attn.qkv", ...):
// what --inject and the app's Inject name.
std::vector<std::string> gpt_recorded_weights(const GptShape& shape);
std::int64_t gpt_parameter_count(const GptShape& shape);
// As estimated_training_bytes (mlp.hpp) for this shape: parameters, optimizer states and a
// batch's stored tensors (attention probabilities included).
std::uint64_t estimated_gpt_training_bytes(const GptShape& shape, std::int64_t batch);

// GPT-2's initialisation from the seed: N(0, 0.02) for matrices and embeddings, N(0, 0.02 /
// sqrt(2 layers)) for the two projections into the residual stream, LayerNorm gains 1, biases 0.
std::vector<Eigen::MatrixXf> initial_gpt_parameters(const GptShape& shape, std::uint64_t seed);

// The mean next-token cross-entropy of a batch in float64 arithmetic, nothing rounded, and where
// `gradients` is given its gradient with respect to every parameter (same order and shapes): the
// reference the tests hold the analytic backward pass and finite differences to. `tokens` is
// batch x context ids, `targets` the next id at each position, row by row.
double gpt_loss_in_double(const GptShape& shape, const std::vector<Eigen::MatrixXd>& parameters, const Eigen::MatrixXi& tokens,
                          const std::vector<int>& targets, std::vector<Eigen::MatrixXd>* gradients = nullptr);

// A stored tensor's name in run logs: "h2.attn.qkv" for block 2's, the name alone for block -1
// (embed, ln_f, head).
std::string gpt_tensor_name(int block, std::string_view name);

// What every GPT backend checks, said once:
// The token ids of a step's batch (batch x context, exact integers in float32), row by row, each
// below the vocab, and the targets (one per token) likewise; throws std::invalid_argument with
// one sentence otherwise.
std::vector<int> gpt_batch_tokens(const GptShape& shape, const Eigen::MatrixXf& inputs, const std::vector<int>& targets);
// Throws std::invalid_argument unless `state` is of this shape: every parameter in `weights` (in
// gpt_parameters' order and shapes, `biases` empty), optimizer buffers that fit, `fp8_slots` FP8 scales.
void check_gpt_state(const GptShape& shape, const TrainerState& state, std::size_t fp8_slots);
// Throws std::invalid_argument for a fault on a weight the model does not record.
void check_gpt_fault(const GptShape& shape, const FaultInjection& fault);

// Under an FP8 or block-scaled recipe (gemm_recipe.hpp), the products of each block's four linear
// layers (attn.qkv, attn.proj, mlp.fc, mlp.proj) see the recipe's operands, made as the MLP makes
// them; the attention products (q.k, softmax.v) and the tied head keep the precision policy's, as
// Transformer Engine and torchao float8 leave them by default. A per-tensor FP8 recipe keeps one
// scale and amax history per block, linear layer and operand: slot gpt_recipe_slot(block, name,
// operand) of gpt_recipe_slots(shape).
std::size_t gpt_recipe_slots(const GptShape& shape);
// Throws std::invalid_argument for a name that is not one of the four linear layers.
std::size_t gpt_recipe_slot(int block, std::string_view linear, GemmOperand operand);

// The CPU backend's GPT. Takes TrainingConfig for everything but the shape (precision, rounding,
// scaler, optimizer, learning rate, loss weight, seed, block recording, recipe).
//
// step(): `inputs` is batch x context token ids (exact integers in float32), `labels` the next
// token at each position, batch * context of them, row by row. The loss is the mean over all
// positions. A recorded step holds, per block hN: ln1, attn.qkv, attn.scores (the causal part of
// q.k / sqrt(head width), every head), attn.softmax, attn.context, attn.proj, residual1, ln2,
// mlp.fc, mlp.gelu, mlp.proj, residual2 as activations and activation gradients, and embed, ln_f
// and head (the logits); the weights and weight gradients of embed.tokens, embed.positions, each
// block's ln1, attn.qkv, attn.proj, ln2, mlp.fc, mlp.proj, and ln_f.
class GptTrainer final : public TrainerBackend {
 public:
  // Throws std::invalid_argument for settings it does not run (a width that is no multiple of the heads).
  GptTrainer(const GptShape& shape, const TrainingConfig& config);
  std::string_view name() const override { return "cpu"; }
  StepResult step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool read_loss) override;
  StepResult step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record) { return step(inputs, labels, record, true); }
  TrainerState state() const override;
  TrainerState position() const override;
  void restore(const TrainerState& state) override;
  // A NaN or infinity into element (0, 0) of a recorded weight's gradient (fault.tensor, such as
  // "h0.attn.qkv") at fault.step, before its cast and check. Throws std::invalid_argument for a
  // tensor the model does not record.
  void inject(const FaultInjection& fault) override;
  LossScalerState scaler_state() const override { return scaler_.state(); }
  void reconfigure_scaler(const LossScalerConfig& config) override { scaler_.reconfigure(config); }
  std::int64_t step_count() const override { return steps_; }
  Format format() const override;

  const GptShape& shape() const { return shape_; }
  // Master weights in gpt_parameters' order (for fp16-pure, the fp16 weights as float32). The
  // writable ones may be changed before the next step: that step casts them afresh.
  std::vector<Eigen::MatrixXf>& parameters() {
    next_cast_made_ = false;
    return parameters_;
  }
  const std::vector<Eigen::MatrixXf>& parameters() const { return parameters_; }
  // Whether the next step takes the cast of the parameters that the last update made as it wrote
  // them (the linear layers' weights as their bf16 bits, where the products go to the bf16
  // kernels, else every parameter's rounded values) in place of the step's own cast -- the same
  // bits, flags and random-word count: MlpTrainer::next_weight_cast_made's conditions.
  bool next_cast_made() const { return next_cast_made_; }

 private:
  // The optimizer's update of a step that was not skipped, making the next step's cast where it can.
  void update(float scale, std::span<const std::span<float>> parameters, std::span<const std::span<const float>> gradients, bool recorded);

  GptShape shape_;
  TrainingConfig config_;
  LossScaler scaler_;
  Context ctx_;
  std::vector<GptParameter> layout_;
  std::vector<Eigen::MatrixXf> parameters_;
  std::int64_t steps_ = 0;
  OptimizerState optimizer_;
  std::vector<FaultInjection> faults_;
  std::vector<Fp8TensorState> fp8_;  // per-tensor FP8 recipes (TrainerState::fp8, gpt_recipe_slot's order)
  // The parameters as the pass takes them -- their low-precision copies (empty in fp32, where it
  // takes the master weights) and, for the blocks' linear weights, their operands packed for the
  // bf16 kernels (empty elsewhere) -- kept from step to step, so that an update can make the next
  // step's cast (next_cast_made). The operands refer to the copies: a trainer is moved, never copied.
  std::vector<Eigen::MatrixXf> copies_;
  std::vector<std::optional<ProductOperand>> weight_operands_;
  bool next_cast_made_ = false;
  std::uint8_t next_flags_ = 0;  // the flags those casts raised, raised by the step that takes them
};

}  // namespace fpscope
