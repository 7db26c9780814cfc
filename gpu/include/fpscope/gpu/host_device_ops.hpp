// The host twin of the CUDA backend's DeviceOps: "device memory" is host memory, and every kernel
// is a loop over the same FPSCOPE_HD function the kernel runs per element, column or row, in the
// kernel's order where the order changes the bits (the optimizer's sum of squares). Products are
// plain float32 loops (each dot product summed in order of k; cuBLAS's order is its own, so a
// product is the same math, not the same bits). It lets DeviceGptTrainer run, and be tested, where
// no GPU is; the device tests hold each CUDA kernel to it.
#pragma once

#include <memory>

#include "fpscope/gpu/device_ops.hpp"

namespace fpscope {

std::unique_ptr<DeviceOps> make_host_device_ops();

}  // namespace fpscope
