// The CUDA backend's DeviceOps (device_ops.hpp): device memory from cudaMalloc, products through
// cublasGemmStridedBatchedEx (fp16 / bf16 / float32 operands, float32 compute and output: no
// TF32), the kernels of kernels.cu and gpt_kernels.cu, all queued on one stream. Built only with
// FPSCOPE_ENABLE_CUDA, in the module libfpscope_cuda.so and the CUDA tests.
#pragma once

#include <memory>

#include "fpscope/gpu/device_ops.hpp"

namespace fpscope {

// Throws std::runtime_error with the runtime's sentence where no device answers.
std::unique_ptr<DeviceOps> make_cuda_device_ops();

}  // namespace fpscope
