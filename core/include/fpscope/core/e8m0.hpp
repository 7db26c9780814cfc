// E8M0, the OCP MX scale format: eight exponent bits, no sign, no mantissa; a power of two or NaN.
//
// OCP Microscaling Formats (MX) v1.0, section 5.4.1: bias 127, the 255 codes 0x00..0xFE are
// 2^-127 .. 2^127, 0xFF is NaN; there is no zero, no infinity and no sign. ml_dtypes calls it
// float8_e8m0fnu. It is not a `Format` (which always has a sign and a mantissa): its few rules
// live here, and its rounding is round_significand's, as for every other format.
#pragma once

#include <cstdint>

#include "fpscope/core/bits.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/core/hd.hpp"
#include "fpscope/core/round_pack.hpp"

namespace fpscope::e8m0 {

inline constexpr int bias = 127;
inline constexpr int min_exponent = -127;  // code 0x00
inline constexpr int max_exponent = 127;   // code 0xFE
inline constexpr std::uint8_t nan_code = 0xFF;

FPSCOPE_HD constexpr bool is_nan(std::uint8_t code) { return code == nan_code; }

// The code of 2^exponent. Precondition: min_exponent <= exponent <= max_exponent.
FPSCOPE_HD constexpr std::uint8_t from_exponent(int exponent) { return static_cast<std::uint8_t>(exponent + bias); }

// The exponent a code stands for. Precondition: not NaN.
FPSCOPE_HD constexpr int exponent_of(std::uint8_t code) { return static_cast<int>(code) - bias; }

// The value as float32: 2^(code - 127), exact (2^-127 is a float32 subnormal); NaN for 0xFF.
FPSCOPE_HD inline float to_float(std::uint8_t code) {
  if (is_nan(code)) return bits_float(0x7FC00000u);
  return code == 0 ? bits_float(0x00400000u) : bits_float(static_cast<std::uint32_t>(code) << 23);
}

// float32 -> E8M0, as ml_dtypes converts to float8_e8m0fnu in round to nearest even:
// - NaN, ±0 and negative numbers have no E8M0 value: NaN (invalid, except for a NaN input).
// - A positive number is rounded to a power of two in ctx's mode: its significand keeps no
//   fraction bit, so in the nearest modes 1.5 * 2^k and above goes up to 2^(k+1) (the kept
//   significand, 1, is odd: a tie goes up under ties-to-even too).
// - Above 2^127 after rounding: overflow, NaN (0xFE, 2^127, under saturation or in the modes
//   that round toward zero). Below 2^-127 after rounding: 2^-127, the smallest code (there is
//   no zero to underflow to), raising underflow and inexact.
FPSCOPE_HD inline std::uint8_t from_float(float value, Context& ctx) {
  const std::uint32_t u = float_bits(value);
  const std::uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) {
    if ((magnitude & 0x400000u) == 0) ctx.raise(flag::invalid);  // signalling
    return nan_code;
  }
  if (magnitude == 0 || (u >> 31) != 0) {
    ctx.raise(flag::invalid);
    return nan_code;
  }
  if (magnitude == 0x7F800000u) return ctx.saturate ? from_exponent(max_exponent) : nan_code;  // +inf: exact, NaN
  const Unpacked unpacked = unpack_finite(formats::fp32, u);
  const int lead = msb64(unpacked.significand);
  int exponent = unpacked.exponent + lead;  // floor(log2 value)
  bool inexact = false;
  const std::uint64_t random = ctx.rounding == RoundingMode::stochastic ? ctx.next_random() : 0;
  const u128 kept = lead == 0 ? u128{1}
                              : round_significand(unpacked.significand, lead, false, ctx.rounding, random, inexact);
  if (kept == 2) exponent += 1;
  if (exponent > max_exponent) {
    ctx.raise(flag::overflow | flag::inexact);
    const bool to_max = ctx.saturate || ctx.rounding == RoundingMode::toward_zero ||
                        ctx.rounding == RoundingMode::toward_negative || ctx.rounding == RoundingMode::odd;
    return to_max ? from_exponent(max_exponent) : nan_code;
  }
  if (exponent < min_exponent) {
    ctx.raise(flag::underflow | flag::inexact);
    return from_exponent(min_exponent);
  }
  if (inexact) ctx.raise(flag::inexact);
  return from_exponent(exponent);
}

}  // namespace fpscope::e8m0
