// The MLP on a device backend: MlpTrainer's model, initial weights, precision policy and recipe,
// its step made of DeviceOps (device_ops.hpp) -- cuBLAS and our kernels in the CUDA module
// (CudaMlpTrainer, cuda_mlp.hpp), or the host twin of both where no GPU is. Matrices are
// column-major with MlpTrainer's shapes (activations batch x features, weights out x in), so
// element i is the same element on both backends and stochastic rounding draws the same word for
// it; the element math is the same FPSCOPE_HD code; products and the bias gradients' sums are
// summed in another order (cuBLAS's; a warp's per column).
//
// Block statistics (--record-blocks) are made on the device from each recorded tensor before its
// cast and read back (a recorded step then waits for the device). Recipes (--recipe) quantize each
// product's operands on the device as the CPU does (device_step.hpp's DeviceRecipe; an FP8 amax is
// read back for its scale) and multiply their float32 values there.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <memory>
#include <vector>

#include "fpscope/gpu/device_ops.hpp"
#include "fpscope/gpu/mlp.hpp"

namespace fpscope {

class StepGraphOps;

class DeviceMlpTrainer : public TrainerBackend {
 public:
  // Throws std::invalid_argument for settings the device step does not run.
  DeviceMlpTrainer(const TrainingConfig& config, std::unique_ptr<DeviceOps> ops);
  ~DeviceMlpTrainer() override;
  DeviceMlpTrainer(const DeviceMlpTrainer&) = delete;
  DeviceMlpTrainer& operator=(const DeviceMlpTrainer&) = delete;

  std::string_view name() const override { return ops_->name(); }
  // One step. The device runs it without waiting for the host; the host waits only when `record`
  // (the snapshot is read back) or `read_loss` (loss, scale and skip are read back), at the step's
  // end. Otherwise the result's loss is NaN.
  StepResult step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool read_loss = true) override;
  void inject(const FaultInjection& fault) override { faults_.push_back(fault); }
  TrainerState position() const override;
  TrainerState state() const override;  // copies the device state back
  void restore(const TrainerState& state) override;
  LossScalerState scaler_state() const override;
  void reconfigure_scaler(const LossScalerConfig& config) override;
  std::int64_t step_count() const override { return steps_; }
  Format format() const override { return precision_format(config_.precision); }
  // The steps that ran as a graph so far (TrainingConfig::step_graphs).
  StepGraphStatistics graph_statistics() const;
  const TrainingConfig& config() const { return config_; }

 private:
  struct Memory;
  class Pass;  // one step's phases (device_mlp.cpp)
  TrainingConfig config_;
  std::unique_ptr<DeviceOps> ops_;  // a StepGraphOps around the backend's
  StepGraphOps* graphs_;            // the same object
  std::unique_ptr<Memory> memory_;
  std::int64_t steps_ = 0;
  std::vector<FaultInjection> faults_;
};

}  // namespace fpscope
