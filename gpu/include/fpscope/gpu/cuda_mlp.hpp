// The CUDA backend of the MLP trainer: DeviceMlpTrainer (device_mlp.hpp) on the CUDA DeviceOps --
// cuBLAS products (fp16 / bf16 inputs, fp32 compute) and our kernels for the recorded casts, the
// loss, unscaling and the scaler, all on the device. Built only with FPSCOPE_ENABLE_CUDA; runs
// only where a device answers.
#pragma once

#include "fpscope/gpu/device_mlp.hpp"

namespace fpscope {

// True when the CUDA runtime finds at least one device.
bool cuda_device_available();

class CudaMlpTrainer final : public DeviceMlpTrainer {
 public:
  // Same model, initial weights and recipe as MlpTrainer(config), every rounding mode included
  // (stochastic rounding draws counter-based words, so a seed gives the same bits run after run).
  // Throws std::runtime_error when no device answers.
  explicit CudaMlpTrainer(const TrainingConfig& config);
};

}  // namespace fpscope
