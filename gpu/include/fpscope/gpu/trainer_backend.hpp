// TrainerBackend: what `fpscope train` needs from a backend; the CUDA backend implements it in a
// module loaded only when asked for (so that commands that never train never load cuBLAS).
#pragma once

#include <Eigen/Core>
#include <vector>

#include "fpscope/gpu/mlp.hpp"

namespace fpscope {

class TrainerBackend {
 public:
  virtual ~TrainerBackend() = default;
  // `read_loss`: the host waits for the step's loss, scale and skip; otherwise a device backend
  // may return NaN for them and keep running ahead.
  virtual StepResult step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool read_loss) = 0;
  virtual MlpTrainer::State state() const = 0;
  virtual void restore(const MlpTrainer::State& state) = 0;
  virtual void inject(const FaultInjection& fault) = 0;
  virtual LossScalerState scaler_state() const = 0;
  virtual Format format() const = 0;
};

// The entry points of the CUDA module (libfpscope_cuda.so), looked up with dlsym.
extern "C" {
// Devices found; 0 with the CUDA runtime's reason in `why` (a sentence) when there are none.
using fpscope_cuda_device_count_fn = int (*)(char* why, unsigned long why_size);
// Returns a new backend, or null with a sentence in `error`.
using fpscope_create_cuda_trainer_fn = TrainerBackend* (*)(const MlpConfig* config, char* error, unsigned long error_size);
}

}  // namespace fpscope
