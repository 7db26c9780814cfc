// The E4M3 scale values NVFP4's block kernels read (whole_blocks.hpp), made in block_scaling.cpp:
// compiled for the baseline instruction set, not inline in the per-instruction-set kernels' units,
// where the linker could keep an AVX-512 copy for a processor without it.
#pragma once

#include <array>
#include <cstdint>

namespace fpscope {

// The float32 value of each E4M3 scale code, block_scale_value's for NVFP4, made once.
const std::array<float, 256>& nvfp4_scale_values();

// E4M3's grid as the vector kernels round NVFP4's block scales onto it (both instruction sets'
// nvfp4 scale functions): float32's bits of E4M3's smallest normal (2^-6), the float32 mantissa
// bits E4M3 drops (23 - 3), and its largest finite code (448).
struct E4m3ScaleGrid {
  static constexpr std::uint32_t min_normal32 = (127 - 6) << 23, drop = 20, max_code = 0x7E;
};

}  // namespace fpscope
