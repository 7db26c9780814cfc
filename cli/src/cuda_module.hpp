// Loading the CUDA training backend (libfpscope_cuda.so) on demand.
#pragma once

#include <memory>
#include <string>

#include "fpscope/gpu/trainer_backend.hpp"

namespace fpscope::cli {

// Loads the module once (beside the executable, or where the build put it). Number of devices,
// 0 when the module, the driver or a device is missing; `why` says which.
int cuda_device_count(std::string& why);
// A CUDA trainer; throws UsageError with the module's sentence when it cannot make one.
std::unique_ptr<TrainerBackend> make_cuda_trainer(const MlpConfig& config);

}  // namespace fpscope::cli
