// The entry points of the CUDA backend's module (libfpscope_cuda.so), looked up with dlsym by
// backend_choice.cpp: a module loaded only when asked for, so that commands that never train
// never map cuBLAS. The interface the module's trainers implement is trainer_backend.hpp's.
#pragma once

#include "fpscope/gpu/trainer_backend.hpp"

namespace fpscope {

extern "C" {
// Devices found; 0 with the CUDA runtime's reason in `why` (a sentence) when there are none.
using fpscope_cuda_device_count_fn = int (*)(char* why, unsigned long why_size);
// Returns a new backend, or null with a sentence in `error`.
using fpscope_create_cuda_trainer_fn = TrainerBackend* (*)(const TrainingConfig* config, char* error, unsigned long error_size);
}

}  // namespace fpscope
