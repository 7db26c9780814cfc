// Rounding to an integral value, and conversions to and from 32- and 64-bit integers.
#pragma once

#include <cstdint>

#include "fpscope/core/bits.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/core/hd.hpp"
#include "fpscope/core/nan.hpp"
#include "fpscope/core/round_pack.hpp"

namespace fpscope {

namespace detail {

// |value| of a finite operand rounded to an integer in ctx's mode. Sets inexact when the
// operand was not an integer; saturates at 2^127 (far outside every integer range).
FPSCOPE_HD inline u128 round_to_integer_magnitude(const Unpacked& value, Context& ctx, bool& inexact) {
  inexact = false;
  if (value.significand == 0) return 0;
  if (value.exponent >= 0) {
    const int lead = msb64(value.significand) + value.exponent;
    return lead >= 127 ? u128{1} << 127 : u128{value.significand} << value.exponent;
  }
  const std::uint64_t random = ctx.rounding == RoundingMode::stochastic ? ctx.next_random() : 0;
  return round_significand(value.significand, -value.exponent, value.sign, ctx.rounding, random, inexact);
}

}  // namespace detail

// roundToIntegral in ctx's rounding mode. `exact` chooses IEEE roundToIntegralExact (raises
// inexact) over roundToIntegral (never raises it), as TestFloat's -exact / -notexact.
FPSCOPE_HD inline std::uint64_t round_to_integral(Format f, std::uint64_t a, bool exact, Context& ctx) {
  if (is_nan(f, a)) return propagate_nan(f, a, a, ctx);
  a = read_operand(f, a, ctx);
  if (is_infinite(f, a) || is_zero(f, a)) return a;
  const Unpacked value = unpack_finite(f, a);
  if (value.exponent >= 0) return a;
  bool inexact = false;
  const u128 magnitude = detail::round_to_integer_magnitude(value, ctx, inexact);
  if (exact && inexact) ctx.raise(flag::inexact);
  Context exact_ctx = ctx;  // the integer is representable: packing it raises nothing
  exact_ctx.flush_to_zero = false;
  return round_pack(f, value.sign, 0, magnitude, exact_ctx);
}

// Conversion to an integer of `width` bits (32 or 64), signed or not. NaN and out-of-range
// operands raise invalid (never inexact) and return the platform's value for that case.
FPSCOPE_HD inline std::uint64_t to_integer(Format f, std::uint64_t a, int width, bool is_signed,
                                           bool exact, Context& ctx) {
  const std::uint64_t all_ones = width == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width) - 1;
  const std::uint64_t signed_min = std::uint64_t{1} << (width - 1);  // as bits
  const std::uint64_t signed_max = signed_min - 1;
  const bool nan = is_nan(f, a);
  a = read_operand(f, a, ctx);
  const bool negative = sign_of(f, a);
  auto invalid = [&](bool nan_operand) -> std::uint64_t {
    ctx.raise(flag::invalid);
    if (ctx.platform.invalid_integer == InvalidIntegerPolicy::x86)
      return is_signed ? signed_min : all_ones;
    if (is_signed) return nan_operand || !negative ? signed_max : signed_min;
    return nan_operand || !negative ? all_ones : 0;
  };
  if (nan) return invalid(true);
  if (is_infinite(f, a)) return invalid(false);
  bool inexact = false;
  const u128 magnitude = detail::round_to_integer_magnitude(unpack_finite(f, a), ctx, inexact);
  const u128 limit = is_signed ? (negative ? u128{signed_min} : u128{signed_max})
                               : (negative ? u128{0} : u128{all_ones});
  if (magnitude > limit) return invalid(false);
  if (exact && inexact) ctx.raise(flag::inexact);
  const auto low = static_cast<std::uint64_t>(magnitude);
  return (negative ? (0 - low) : low) & all_ones;
}

// Conversion from an integer, correctly rounded.
FPSCOPE_HD inline std::uint64_t from_signed(Format f, std::int64_t value, Context& ctx) {
  const bool negative = value < 0;
  const std::uint64_t magnitude = negative ? 0 - static_cast<std::uint64_t>(value)
                                           : static_cast<std::uint64_t>(value);
  return round_pack(f, negative, 0, magnitude, ctx);
}
FPSCOPE_HD inline std::uint64_t from_unsigned(Format f, std::uint64_t value, Context& ctx) {
  return round_pack(f, false, 0, value, ctx);
}

}  // namespace fpscope
