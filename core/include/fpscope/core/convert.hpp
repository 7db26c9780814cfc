// Conversion between any two formats, correctly rounded, with IEEE flags.
#pragma once

#include <cstdint>

#include "fpscope/core/bits.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/core/hd.hpp"
#include "fpscope/core/nan.hpp"
#include "fpscope/core/round_pack.hpp"

namespace fpscope {

// Converts bits of `from` into `to`. Infinity into a format without one (OCP FN, FNUZ, finite)
// is invalid and gives NaN (±max in a finite format, which has no NaN), or ±max under
// saturation; saturation also sends ±infinity to ±max in IEEE targets (OCP "SAT" conversions).
FPSCOPE_HD inline std::uint64_t convert(Format from, Format to, std::uint64_t bits,
                                        Context& ctx) {
  if (is_nan(from, bits)) return convert_nan(from, to, bits, ctx);
  bits = read_operand(from, bits, ctx);
  const bool sign = sign_of(from, bits);
  if (is_infinite(from, bits)) {
    if (ctx.saturate) return max_finite(to, sign);
    if (to.has_infinity()) return infinity(to, sign);
    ctx.raise(flag::invalid);
    return to.has_nan() ? signed_zero(to, sign) | to.quiet_nan_bits() : max_finite(to, sign);
  }
  const Unpacked value = unpack_finite(from, bits);
  return round_pack(to, sign, value.exponent, value.significand, ctx);
}

// float32 value -> bits of f, and bits of f -> the nearest float32 (exact for every format
// with at most 8 exponent bits and 23 mantissa bits).
FPSCOPE_HD inline std::uint64_t from_float(Format f, float value, Context& ctx) {
  return convert(formats::fp32, f, float_bits(value), ctx);
}
FPSCOPE_HD inline float to_float(Format f, std::uint64_t bits, Context& ctx) {
  return bits_float(static_cast<std::uint32_t>(convert(f, formats::fp32, bits, ctx)));
}
FPSCOPE_HD inline std::uint64_t from_double(Format f, double value, Context& ctx) {
  return convert(formats::fp64, f, double_bits(value), ctx);
}
FPSCOPE_HD inline double to_double(Format f, std::uint64_t bits, Context& ctx) {
  return bits_double(convert(f, formats::fp64, bits, ctx));
}

// f's largest finite value (exact: every format's fits a double).
FPSCOPE_HD inline double largest_finite_value(Format f) {
  Context exact;
  return to_double(f, max_finite(f, false), exact);
}

}  // namespace fpscope
