// The CUDA backend of the MLP trainer: cuBLAS GEMMs (cublasGemmEx: fp16/bf16 inputs, fp32 compute)
// and our kernels for the recorded casts, the loss, unscaling and the scaler, all on the device.
// Built only with FPSCOPE_ENABLE_CUDA; runs only where a device answers.
#pragma once

#include <Eigen/Core>
#include <memory>
#include <vector>

#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/trainer_backend.hpp"

namespace fpscope {

// True when the CUDA runtime finds at least one device.
bool cuda_device_available();

class CudaMlpTrainer final : public TrainerBackend {
 public:
  // Same model, initial weights and recipe as MlpTrainer(config), every rounding mode included
  // (stochastic rounding draws counter-based words, so a seed gives the same bits run after run).
  // Throws std::runtime_error when no device answers.
  explicit CudaMlpTrainer(const MlpConfig& config);
  ~CudaMlpTrainer() override;
  std::string_view name() const override { return "cuda"; }
  CudaMlpTrainer(const CudaMlpTrainer&) = delete;
  CudaMlpTrainer& operator=(const CudaMlpTrainer&) = delete;

  // One step. The device runs it without waiting for the host; the host waits only when
  // `record` (the snapshot is read back) or `read_loss` (loss, scale and skip are read back).
  // Otherwise the result's loss is NaN.
  StepResult step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool read_loss = true) override;

  void inject(const FaultInjection& fault) override { faults_.push_back(fault); }
  MlpTrainer::State state() const override;  // copies the device state back
  void restore(const MlpTrainer::State& state) override;
  LossScalerState scaler_state() const override;  // copies it back
  void reconfigure_scaler(const LossScalerConfig& config) override;
  std::int64_t step_count() const override { return steps_; }
  Format format() const override;
  const MlpConfig& config() const { return config_; }

 private:
  struct Device;
  MlpConfig config_;
  std::unique_ptr<Device> device_;
  std::int64_t steps_ = 0;
  std::uint64_t stochastic_counter_ = 0;  // the next random word's index, as MlpTrainer's ctx
  std::vector<FaultInjection> faults_;
};

}  // namespace fpscope
