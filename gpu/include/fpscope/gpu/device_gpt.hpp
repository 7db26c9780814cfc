// The GPT on a device backend: GptTrainer's model, initial weights, precision policy and recipe,
// its step made of DeviceOps (device_ops.hpp) -- cuBLAS and our kernels in the CUDA module, or the
// host twin of both where no GPU is. Every stored tensor is cast where GptTrainer casts it, in the
// same order, so stochastic rounding draws the same words for the same elements; products,
// LayerNorm and softmax sums and the exponentials are the same math in another order (cuBLAS's
// sums, CUDA's expf), so values agree within float32 rounding, not bit for bit.
//
// Block statistics (--record-blocks) are made on the device from each recorded tensor before its
// cast and read back (a recorded step then waits for the device); the attention triangles' on
// the host. Recipes quantize the four linear
// layers' operands on the device as the CPU does (device_step.hpp's DeviceRecipe) and multiply
// them as float32 there.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fpscope/gpu/device_ops.hpp"
#include "fpscope/gpu/gpt.hpp"

namespace fpscope {

class StepGraphOps;

class DeviceGptTrainer final : public TrainerBackend {
 public:
  // Throws std::invalid_argument for settings the device step does not run.
  DeviceGptTrainer(const GptShape& shape, const TrainingConfig& config, std::unique_ptr<DeviceOps> ops);
  ~DeviceGptTrainer() override;
  DeviceGptTrainer(const DeviceGptTrainer&) = delete;
  DeviceGptTrainer& operator=(const DeviceGptTrainer&) = delete;

  // "cuda" on the CUDA module's ops; the twin's name otherwise.
  std::string_view name() const override { return ops_->name(); }
  // As GptTrainer::step. The host waits for the device only where `record` or `read_loss`, at the
  // step's end; otherwise the loss and scale are NaN.
  StepResult step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool read_loss) override;
  TrainerState position() const override;
  TrainerState state() const override;
  void restore(const TrainerState& state) override;
  void inject(const FaultInjection& fault) override;
  LossScalerState scaler_state() const override;
  void reconfigure_scaler(const LossScalerConfig& config) override;
  std::int64_t step_count() const override { return steps_; }
  Format format() const override { return precision_format(config_.precision); }
  // The steps that ran as a graph so far (TrainingConfig::step_graphs).
  StepGraphStatistics graph_statistics() const;

 private:
  struct Memory;
  struct Pass;  // one step's phases (device_gpt.cpp)
  GptShape shape_;
  TrainingConfig config_;
  std::unique_ptr<DeviceOps> ops_;  // a StepGraphOps around the backend's
  StepGraphOps* graphs_;            // the same object
  std::unique_ptr<Memory> memory_;
  std::vector<GptParameter> layout_;
  std::int64_t steps_ = 0;
  std::vector<FaultInjection> faults_;
};

}  // namespace fpscope
