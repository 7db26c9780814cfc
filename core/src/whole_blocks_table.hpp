// The E4M3 scale values NVFP4's block kernels read (whole_blocks.hpp), made in block_scaling.cpp:
// compiled for the baseline instruction set, not inline in the per-instruction-set kernels' units,
// where the linker could keep an AVX-512 copy for a processor without it.
#pragma once

#include <array>

namespace fpscope {

// The float32 value of each E4M3 scale code, block_scale_value's for NVFP4, made once.
const std::array<float, 256>& nvfp4_scale_values();

}  // namespace fpscope
