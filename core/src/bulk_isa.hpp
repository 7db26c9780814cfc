// The per-instruction-set bulk kernels (bulk_kernels.inl), declared once for each set. compiled() is
// false for a set this build left out (bulk_kernels_left_out.inl).
#pragma once

#include <cstddef>
#include <cstdint>

#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"

#define FPSCOPE_DECLARE_BULK_ISA(isa)                                                                              \
  namespace fpscope::isa {                                                                                         \
  bool compiled();                                                                                                 \
  bool f32_to_bits16(Format f, const std::uint32_t* in, std::uint16_t* out, std::size_t n, Context& ctx); \
  bool f32_to_bits8(Format f, const std::uint32_t* in, std::uint8_t* out, std::size_t n, Context& ctx);   \
  bool round_f32(Format f, const std::uint32_t* in, std::uint32_t* out, std::size_t n, Context& ctx);     \
  bool bits16_to_f32(Format f, const std::uint16_t* in, std::uint32_t* out, std::size_t n, Context& ctx); \
  bool bits8_to_f32(Format f, const std::uint8_t* in, std::uint32_t* out, std::size_t n, Context& ctx);   \
  std::uint32_t largest_magnitude_bits(const std::uint32_t* in, std::size_t n, std::uint32_t top);         \
  bool mx_blocks(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, const std::uint32_t* values,      \
                 std::uint8_t* codes, std::uint8_t* scales, float tensor_scale, Context& ctx, BlockStatistics* statistics,            \
                 BlockOutcome* outcomes);                                                                                 \
  }

FPSCOPE_DECLARE_BULK_ISA(bulk_generic)
FPSCOPE_DECLARE_BULK_ISA(bulk_avx2)
FPSCOPE_DECLARE_BULK_ISA(bulk_avx512)

namespace fpscope {
// MX and NVFP4 blocks of float elements through the best instruction set's kernel where it takes
// them, else the baseline build's (bulk.cpp), NVFP4 under the given tensor scale; false when the
// element format has no branch-free cast (block_scaling.cpp then runs the scalar path).
bool bulk_mx_blocks(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, const std::uint32_t* values, std::uint8_t* codes,
                    std::uint8_t* scales, float tensor_scale, Context& ctx, BlockStatistics* statistics, BlockOutcome* outcomes);
}  // namespace fpscope
