// The CUDA backend's trainers and the module's entry points (cuda_module.hpp): the MLP's and the
// GPT's device steps (device_mlp.cpp, device_gpt.cpp) on the CUDA DeviceOps (cuda_device_ops.cpp).
#include "fpscope/gpu/cuda_mlp.hpp"

#include <cstdio>
#include <string>

#include "fpscope/gpu/cuda_device_ops.hpp"
#include "fpscope/gpu/cuda_kernels.hpp"
#include "fpscope/gpu/device_gpt.hpp"
#include "fpscope/gpu/cuda_module.hpp"

namespace fpscope {

bool cuda_device_available() { return cuda::device_count() > 0; }

CudaMlpTrainer::CudaMlpTrainer(const TrainingConfig& config) : DeviceMlpTrainer(config, make_cuda_device_ops()) {}

}  // namespace fpscope

// The module's entry points (see cuda_module.hpp): the MLP's CUDA trainer, or the GPT's device
// step (device_gpt.hpp) on the CUDA DeviceOps.
extern "C" __attribute__((visibility("default"))) int fpscope_cuda_device_count(char* why, unsigned long why_size) {
  std::string reason;
  const int count = fpscope::cuda::device_count(&reason);
  if (why != nullptr && why_size > 0) std::snprintf(why, why_size, "%s", reason.c_str());
  return count;
}

extern "C" __attribute__((visibility("default"))) fpscope::TrainerBackend* fpscope_create_cuda_trainer(const fpscope::TrainingConfig* config,
                                                                                                    char* error, unsigned long error_size) {
  try {
    if (config->gpt) return new fpscope::DeviceGptTrainer(*config->gpt, *config, fpscope::make_cuda_device_ops());
    return new fpscope::CudaMlpTrainer(*config);
  } catch (const std::exception& e) {
    std::snprintf(error, error_size, "%s", e.what());
    return nullptr;
  }
}
