// The per-instruction-set bulk kernels (bulk_kernels.inl), declared once for each set.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"

#define FPSCOPE_DECLARE_BULK_ISA(isa)                                                                              \
  namespace fpscope::isa {                                                                                         \
  bool f32_to_bits16(Format f, const std::uint32_t* in, std::uint16_t* out, std::size_t n, Context& ctx); \
  bool f32_to_bits8(Format f, const std::uint32_t* in, std::uint8_t* out, std::size_t n, Context& ctx);   \
  bool round_f32(Format f, const std::uint32_t* in, std::uint32_t* out, std::size_t n, Context& ctx);     \
  bool bits16_to_f32(Format f, const std::uint16_t* in, std::uint32_t* out, std::size_t n, Context& ctx); \
  bool bits8_to_f32(Format f, const std::uint8_t* in, std::uint32_t* out, std::size_t n, Context& ctx);   \
  }

FPSCOPE_DECLARE_BULK_ISA(bulk_generic)
FPSCOPE_DECLARE_BULK_ISA(bulk_avx2)
FPSCOPE_DECLARE_BULK_ISA(bulk_avx512)
