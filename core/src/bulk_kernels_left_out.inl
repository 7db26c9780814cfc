// An instruction set's bulk kernels left out of this build (FPSCOPE_BULK_KERNELS, core/CMakeLists.txt):
// included instead of bulk_kernels.inl by bulk_<set>_left_out.cpp, inside nothing, for BULK_ISA.
// compiled() says so, and bulk.cpp's dispatch never takes this set; should anything call in anyway,
// the casts decline (false: the caller's scalar path runs) and the reduction computes its answer, so
// a result is never wrong, only slower.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "bulk_isa.hpp"
#include "fpscope/core/hd.hpp"

namespace fpscope::BULK_ISA {

bool compiled() { return false; }
bool f32_to_bits16(Format, const std::uint32_t*, std::uint16_t*, std::size_t, Context&) { return false; }
bool f32_to_bits8(Format, const std::uint32_t*, std::uint8_t*, std::size_t, Context&) { return false; }
bool round_f32(Format, const std::uint32_t*, std::uint32_t*, std::size_t, Context&) { return false; }
bool bits16_to_f32(Format, const std::uint16_t*, std::uint32_t*, std::size_t, Context&) { return false; }
bool bits8_to_f32(Format, const std::uint8_t*, std::uint32_t*, std::size_t, Context&) { return false; }
std::uint32_t largest_magnitude_bits(const std::uint32_t* in, std::size_t n, std::uint32_t top) {
  for (std::size_t i = 0; i < n; ++i) top = std::max(top, magnitude_bits(bits_float(in[i])));
  return top;
}
bool mx_blocks(const BlockFormat&, ScaleRule, const BlockLayout&, const std::uint32_t*, std::uint8_t*, std::uint8_t*, float, Context&,
               BlockStatistics*, BlockOutcome*) {
  return false;
}

}  // namespace fpscope::BULK_ISA
