// Choosing the training backend by name: the CPU backend, or the CUDA backend's module
// (libfpscope_cuda.so, loaded with dlopen on first use, so that a program that never trains on
// the GPU never maps cuBLAS). `fpscope train --backend` and the app's --backend both come here.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "fpscope/gpu/mlp.hpp"

namespace fpscope {

// Devices the CUDA module finds; 0 when the module, the driver or a device is missing, with the
// reason in `why` (a sentence: the runtime's own words where it gave some).
int cuda_device_count(std::string& why);

// "cpu", "cuda" or "auto" (cuda where a device answers, else cpu). Throws std::invalid_argument
// with one sentence for another name, and for "cuda" where no device answers or the module
// cannot make a trainer.
std::unique_ptr<TrainerBackend> make_trainer_backend(std::string_view backend, const TrainingConfig& config);

// Where a backend's products run, for a run log's header: cpu_products_description() for "cpu",
// "cuBLAS" for "cuda".
std::string products_description(std::string_view backend);

}  // namespace fpscope
