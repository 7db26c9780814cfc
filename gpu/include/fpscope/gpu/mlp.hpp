// A multi-layer perceptron trained with mixed precision on the CPU (Eigen): the reference backend.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <vector>

#include "fpscope/core/context.hpp"
#include "fpscope/gpu/fault_injection.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/loss_scaler.hpp"
#include "fpscope/gpu/optimizer.hpp"
#include "fpscope/gpu/trainer_backend.hpp"
#include "fpscope/gpu/training_config.hpp"

namespace fpscope {

// Throws std::invalid_argument unless `state` is of an MLP of these layer sizes: weights (out x in)
// and biases per layer, optimizer buffers that fit (weight 2l, bias 2l + 1), `fp8_slots` FP8 scales.
void check_mlp_state(const std::vector<int>& layer_sizes, const TrainerState& state, std::size_t fp8_slots);

class MlpTrainer final : public TrainerBackend {
 public:
  explicit MlpTrainer(const TrainingConfig& config);
  std::string_view name() const override { return "cpu"; }
  // One step on a batch: inputs (batch x layer_sizes[0]) and class labels. Records a Snapshot
  // when `record` is set.
  StepResult step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record);
  StepResult step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool /*read_loss*/) override {
    return step(inputs, labels, record);
  }
  // The loss and the gradients of the master weights in float64 arithmetic, for tests.
  double loss_in_double(const Eigen::MatrixXf& inputs, const std::vector<int>& labels) const;

  const TrainingConfig& config() const { return config_; }
  LossScaler& scaler() { return scaler_; }
  const LossScaler& scaler() const { return scaler_; }
  std::int64_t step_count() const override { return steps_; }
  LossScalerState scaler_state() const override { return scaler_.state(); }
  void reconfigure_scaler(const LossScalerConfig& config) override { scaler_.reconfigure(config); }
  // Master weights (fp32; for fp16_pure, the fp16 weights as float32) and biases per layer. The
  // writable weights may be changed before the next step: that step casts them afresh.
  std::vector<Eigen::MatrixXf>& weights() {
    next_weight_cast_made_ = false;
    return weights_;
  }
  const std::vector<Eigen::MatrixXf>& weights() const { return weights_; }
  std::vector<Eigen::VectorXf>& biases() { return biases_; }
  // Whether the next step's products take the cast of the weights that the last update made as it
  // wrote them (their bf16 bits, where the products go to the bf16 kernels, else their rounded
  // values), in place of the step's own cast of them -- the same bits, flags and random-word count:
  // mixed precision (not fp16-pure) without a recipe, in a rounding mode that draws no random
  // words, after an update by an unrecorded step, where the weights were not asked for writable
  // since. A step that records its weights casts them itself.
  bool next_weight_cast_made() const { return next_weight_cast_made_; }
  Format format() const override;
  void inject(const FaultInjection& fault) override { faults_.push_back(fault); }

  using State = TrainerState;
  State state() const override;
  State position() const override;
  void restore(const State& state) override;

 private:
  class Pass;  // one step's tensors and phases (mlp_step.cpp)
  TrainingConfig config_;
  LossScaler scaler_;
  Context ctx_;
  std::vector<Eigen::MatrixXf> weights_;  // layer l: out x in
  std::vector<Eigen::VectorXf> biases_;
  std::int64_t steps_ = 0;
  std::vector<FaultInjection> faults_;
  OptimizerState optimizer_;
  std::vector<Fp8TensorState> fp8_;  // per-tensor FP8 recipes (TrainerState::fp8)
  // Each layer's weights as the products take them -- their low-precision copy (empty in fp32,
  // where the products take the master weights) and its operand, packed for the bf16 kernels --
  // kept from step to step, so that an update can make the next step's cast (next_weight_cast_made).
  // The operands refer to the copies (or the master weights): a trainer is moved, never copied.
  std::vector<Eigen::MatrixXf> low_weights_;
  std::vector<ProductOperand> weight_operands_;
  bool next_weight_cast_made_ = false;
  std::uint8_t next_weight_flags_ = 0;  // the flags those casts raised, raised by the step that takes them
};

}  // namespace fpscope
