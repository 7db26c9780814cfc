// TrainerBackend: what the training driver (TrainingSession) steps -- the CPU backend's trainers
// (MlpTrainer, GptTrainer) and the CUDA backend's, in the module loaded on demand (cuda_module.hpp,
// backend_choice.hpp) -- with what a step returns and the state a checkpoint keeps.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "fpscope/core/format.hpp"
#include "fpscope/gpu/fault_injection.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "fpscope/gpu/loss_scaler.hpp"
#include "fpscope/gpu/optimizer.hpp"
#include "fpscope/gpu/training_config.hpp"
#include "fpscope/snapshot/culprit.hpp"
#include "fpscope/snapshot/snapshot.hpp"

namespace fpscope {

struct StepResult {
  double loss = 0;        // float32 cross-entropy of the batch, unscaled
  double loss_scale = 1;  // the scale this step ran with
  bool skipped = false;   // non-finite gradients: master weights untouched
  std::optional<Snapshot> snapshot;  // when the step was recorded
  std::vector<OperandScaling> scaling;  // per-tensor FP8 recipes: every operand's amax and scale
  std::vector<BlockOperandStatistics> block_operands;  // block-scaled recipes: what each operand's blocks did
  // The step sentinel's readings (step_sentinel.hpp), in execution order: always on the CPU; on a
  // device where the step was read back (read_loss) and skipped or lost its loss, else empty.
  std::vector<SentinelReading> sentinel;
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

// The CPU backend (MlpTrainer, GptTrainer) and the CUDA backend (in a module loaded on demand).
class TrainerBackend {
 public:
  virtual ~TrainerBackend() = default;
  virtual std::string_view name() const = 0;  // "cpu" or "cuda"
  // One step on a batch: inputs (batch x layer_sizes[0]) and class labels (for a GPT, token ids
  // and next-token targets: gpt.hpp); a Snapshot when `record`. `read_loss`: the host waits for the step's loss, scale and skip; otherwise a device
  // backend may return NaN for them and keep running ahead (the CPU always knows them).
  virtual StepResult step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool read_loss) = 0;
  virtual TrainerState state() const = 0;
  // What a step moves even where it skips -- the step count, the scaler, the stochastic counter and
  // the FP8 histories -- as state() has them, without the weights, biases and optimizer buffers
  // (empty): cheap enough to take before every step (replay_skipped_step).
  virtual TrainerState position() const = 0;
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

}  // namespace fpscope
