// add, sub, mul, div, sqrt and fused multiply-add in any format: exact intermediate, one rounding.
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

// The sign of an exact zero sum of operands of opposite signs (IEEE 754-2019 6.3).
FPSCOPE_HD inline bool zero_sum_sign(const Context& ctx) {
  return ctx.rounding == RoundingMode::toward_negative;
}

// Moves the leading one of a nonzero sig to bit `lead`, adjusting exponent; sig has at most
// lead + 1 bits, so this shifts left only.
FPSCOPE_HD inline void normalise_to(u128& sig, int& exponent, int lead) {
  const int dist = lead - msb128(sig);
  sig <<= dist;
  exponent -= dist;
}

// (-1)^sa sa_sig 2^ea + (-1)^sb sb_sig 2^eb, rounded once. Significands below 2^120, exact.
FPSCOPE_HD inline std::uint64_t add_exact(Format f, bool sa, int ea, u128 a, bool sb, int eb,
                                          u128 b, Context& ctx) {
  if (a == 0 && b == 0) return signed_zero(f, sa == sb ? sa : zero_sum_sign(ctx));
  if (a == 0) return round_pack(f, sb, eb, b, ctx);
  if (b == 0) return round_pack(f, sa, ea, a, ctx);
  normalise_to(a, ea, 124);
  normalise_to(b, eb, 124);
  if (eb > ea || (eb == ea && b > a)) {  // make a the operand of larger magnitude
    const bool ts = sa; sa = sb; sb = ts;
    const int te = ea; ea = eb; eb = te;
    const u128 tv = a; a = b; b = tv;
  }
  // Aligning b jams what falls off. When that happens the exponents differ by at least 2,
  // so a - b keeps its leading one within a bit of 124: far above the jammed bit.
  b = shift_right_jam(b, ea - eb);
  if (sa == sb) return round_pack(f, sa, ea, a + b, ctx);
  const u128 difference = a - b;
  if (difference == 0) return signed_zero(f, zero_sum_sign(ctx));
  return round_pack(f, sa, ea, difference, ctx);
}

FPSCOPE_HD inline u128 isqrt(u128 radicand, u128& remainder) {
  u128 root = 0;
  u128 bit = u128{1} << 126;
  while (bit > radicand) bit >>= 2;
  while (bit != 0) {
    if (radicand >= root + bit) {
      radicand -= root + bit;
      root = (root >> 1) + bit;
    } else {
      root >>= 1;
    }
    bit >>= 2;
  }
  remainder = radicand;
  return root;
}

}  // namespace detail

FPSCOPE_HD inline std::uint64_t add(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  if (is_nan(f, a) || is_nan(f, b)) return propagate_nan(f, a, b, ctx);
  a = read_operand(f, a, ctx);
  b = read_operand(f, b, ctx);
  const bool inf_a = is_infinite(f, a), inf_b = is_infinite(f, b);
  if (inf_a || inf_b) {
    if (inf_a && inf_b && sign_of(f, a) != sign_of(f, b)) {
      ctx.raise(flag::invalid);
      return default_nan(f, ctx);
    }
    return inf_a ? a : b;
  }
  const Unpacked x = unpack_finite(f, a), y = unpack_finite(f, b);
  return detail::add_exact(f, x.sign, x.exponent, x.significand, y.sign, y.exponent, y.significand, ctx);
}

FPSCOPE_HD inline std::uint64_t sub(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  // a - b is a + (-b), except that a NaN operand must come back with its own sign.
  if (is_nan(f, a) || is_nan(f, b)) return propagate_nan(f, a, b, ctx);
  return add(f, a, b ^ f.sign_mask(), ctx);
}

FPSCOPE_HD inline std::uint64_t mul(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  if (is_nan(f, a) || is_nan(f, b)) return propagate_nan(f, a, b, ctx);
  a = read_operand(f, a, ctx);
  b = read_operand(f, b, ctx);
  const bool sign = sign_of(f, a) != sign_of(f, b);
  const bool inf_a = is_infinite(f, a), inf_b = is_infinite(f, b);
  if (inf_a || inf_b) {
    if (is_zero(f, a) || is_zero(f, b)) {
      ctx.raise(flag::invalid);
      return default_nan(f, ctx);
    }
    return infinity(f, sign);
  }
  const Unpacked x = unpack_finite(f, a), y = unpack_finite(f, b);
  return round_pack(f, sign, x.exponent + y.exponent, u128{x.significand} * y.significand, ctx);
}

FPSCOPE_HD inline std::uint64_t div(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  if (is_nan(f, a) || is_nan(f, b)) return propagate_nan(f, a, b, ctx);
  a = read_operand(f, a, ctx);
  b = read_operand(f, b, ctx);
  const bool sign = sign_of(f, a) != sign_of(f, b);
  const bool inf_a = is_infinite(f, a), inf_b = is_infinite(f, b);
  const bool zero_a = is_zero(f, a), zero_b = is_zero(f, b);
  if ((inf_a && inf_b) || (zero_a && zero_b)) {
    ctx.raise(flag::invalid);
    return default_nan(f, ctx);
  }
  if (inf_a) return infinity(f, sign);
  if (inf_b || zero_a) return signed_zero(f, sign);
  if (zero_b) {
    ctx.raise(flag::infinite);
    // No infinity: NaN (OCP FN, FNUZ), or the largest number of that sign in a finite format.
    return f.has_infinity() ? infinity(f, sign) : f.has_nan() ? signed_zero(f, sign) | f.quiet_nan_bits() : max_finite(f, sign);
  }
  const Unpacked x = unpack_finite(f, a), y = unpack_finite(f, b);
  // Widen the dividend so the quotient has at least 72 bits; the remainder becomes sticky.
  u128 dividend = x.significand;
  int exponent = x.exponent;
  detail::normalise_to(dividend, exponent, 125);
  const u128 quotient = dividend / y.significand;
  const bool sticky = dividend % y.significand != 0;
  return round_pack(f, sign, exponent - y.exponent, quotient | (sticky ? 1 : 0), ctx);
}

FPSCOPE_HD inline std::uint64_t sqrt(Format f, std::uint64_t a, Context& ctx) {
  if (is_nan(f, a)) return propagate_nan(f, a, a, ctx);
  a = read_operand(f, a, ctx);
  if (is_zero(f, a)) return a;  // sqrt(-0) = -0
  if (sign_of(f, a)) {
    ctx.raise(flag::invalid);
    return default_nan(f, ctx);
  }
  if (is_infinite(f, a)) return a;
  const Unpacked x = unpack_finite(f, a);
  u128 radicand = x.significand;
  int exponent = x.exponent;
  // Leading one at bit 124 or 125 with an even exponent: the root has 63 bits.
  detail::normalise_to(radicand, exponent, 124);
  if ((exponent & 1) != 0) {
    radicand <<= 1;
    exponent -= 1;
  }
  u128 remainder = 0;
  const u128 root = detail::isqrt(radicand, remainder);
  return round_pack(f, false, exponent / 2, root | (remainder != 0 ? 1 : 0), ctx);
}

// a * b + c with a single rounding.
FPSCOPE_HD inline std::uint64_t fma(Format f, std::uint64_t a, std::uint64_t b, std::uint64_t c,
                                    Context& ctx) {
  // SoftFloat's x86 order: a NaN among a, b wins over c; 0 * inf is invalid even when c is a
  // quiet NaN, and then c's NaN is returned through the usual propagation.
  if (is_nan(f, a) || is_nan(f, b)) {
    const std::uint64_t product_nan = propagate_nan(f, a, b, ctx);
    return is_nan(f, c) ? propagate_nan(f, product_nan, c, ctx) : product_nan;
  }
  a = read_operand(f, a, ctx);
  b = read_operand(f, b, ctx);
  c = read_operand(f, c, ctx);
  const bool product_sign = sign_of(f, a) != sign_of(f, b);
  const bool inf_product = is_infinite(f, a) || is_infinite(f, b);
  if (inf_product && (is_zero(f, a) || is_zero(f, b))) {
    ctx.raise(flag::invalid);
    const std::uint64_t nan = default_nan(f, ctx);
    return is_nan(f, c) ? propagate_nan(f, nan, c, ctx) : nan;
  }
  if (is_nan(f, c)) return propagate_nan(f, c, c, ctx);
  if (inf_product) {
    if (is_infinite(f, c) && sign_of(f, c) != product_sign) {
      ctx.raise(flag::invalid);
      return default_nan(f, ctx);
    }
    return infinity(f, product_sign);
  }
  if (is_infinite(f, c)) return c;
  const Unpacked x = unpack_finite(f, a), y = unpack_finite(f, b), z = unpack_finite(f, c);
  return detail::add_exact(f, product_sign, x.exponent + y.exponent, u128{x.significand} * y.significand,
                           z.sign, z.exponent, z.significand, ctx);
}

}  // namespace fpscope
