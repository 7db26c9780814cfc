// The one place where an exact (or jammed) result becomes bits of a format: rounding, underflow, overflow.
#pragma once

#include <cstdint>

#include "fpscope/core/bits.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/core/hd.hpp"

namespace fpscope {

// Shifts x right by dist, OR-ing every bit shifted off into the lowest bit of the result
// ("jamming"), so that the result still says whether the dropped part was zero. dist >= 0.
FPSCOPE_HD inline u128 shift_right_jam(u128 x, int dist) {
  if (dist <= 0) return x;
  if (dist >= 128) return x != 0 ? 1 : 0;
  const u128 dropped = x & ((u128{1} << dist) - 1);
  return (x >> dist) | (dropped != 0 ? 1 : 0);
}

// Drops the low `shift` bits of sig and rounds what is kept in `mode`, for a value of sign
// `sign`. Returns the kept part, possibly incremented to the next power of two (the caller
// renormalises). Sets `inexact` when the dropped bits were not all zero.
// Preconditions: shift >= 1; sig < 2^126; any jammed sticky bit of sig lies at least two bits
// below the rounding position. `random` is used by stochastic rounding only: it rounds up
// when random < (dropped fraction of an ulp) * 2^64, so with probability equal to the
// distance from the value below, to 64-bit resolution.
FPSCOPE_HD inline u128 round_significand(u128 sig, int shift, bool sign, RoundingMode mode,
                                         std::uint64_t random, bool& inexact) {
  if (mode == RoundingMode::stochastic) {
    // The dropped fraction of an ulp, to 64 bits: sig / 2^shift.
    const u128 kept = shift >= 128 ? 0 : sig >> shift;
    const u128 dropped = shift >= 128 ? sig : sig & ((u128{1} << shift) - 1);
    const auto fraction64 = static_cast<std::uint64_t>(
        shift >= 192 ? 0 : shift >= 64 ? dropped >> (shift - 64) : dropped << (64 - shift));
    inexact = dropped != 0;
    return kept + (random < fraction64 ? 1 : 0);
  }
  if (shift > 126) {  // everything is dropped and lies strictly below half an ulp
    sig = sig != 0 ? 1 : 0;
    shift = 2;
  }
  const u128 one = 1;
  const u128 kept = sig >> shift;
  const u128 dropped = sig & ((one << shift) - 1);
  const u128 half = one << (shift - 1);
  inexact = dropped != 0;
  bool up = false;
  switch (mode) {
    case RoundingMode::nearest_even: up = dropped > half || (dropped == half && (kept & 1) != 0); break;
    case RoundingMode::nearest_away: up = dropped >= half; break;
    case RoundingMode::toward_zero: up = false; break;
    case RoundingMode::toward_positive: up = inexact && !sign; break;
    case RoundingMode::toward_negative: up = inexact && sign; break;
    case RoundingMode::odd: return inexact ? (kept | 1) : kept;
    case RoundingMode::stochastic: break;  // handled above
  }
  return kept + (up ? 1 : 0);
}

// The result of an overflow in the context's rounding mode: ±infinity (IEEE) or NaN (OCP FN,
// FNUZ), or ±max finite for the modes that round toward zero, under saturation, and always in a
// finite format (which has nothing else).
FPSCOPE_HD inline std::uint64_t overflow_result(Format f, bool sign, Context& ctx) {
  ctx.raise(flag::overflow | flag::inexact);
  const RoundingMode mode = ctx.rounding;
  const bool to_max_finite = ctx.saturate || mode == RoundingMode::toward_zero ||
                             mode == RoundingMode::odd ||
                             (mode == RoundingMode::toward_positive && sign) ||
                             (mode == RoundingMode::toward_negative && !sign);
  if (to_max_finite || !f.has_nan()) return max_finite(f, sign);
  if (f.has_infinity()) return infinity(f, sign);
  return signed_zero(f, sign) | f.quiet_nan_bits();
}

// Rounds the value (-1)^sign * sig * 2^exponent to format f under ctx, raising inexact,
// underflow and overflow exactly where IEEE 754 says so. sig may carry a jammed sticky bit
// (see shift_right_jam) provided it has at least m + 3 significant bits; an exact sig may be
// any width below 2^127. sig == 0 gives a zero of the given sign.
FPSCOPE_HD inline std::uint64_t round_pack(Format f, bool sign, int exponent, u128 sig,
                                           Context& ctx) {
  if (sig == 0) return signed_zero(f, sign);
  // Normalise so that the leading one sits at bit 125: plenty of guard bits for every format.
  const int lead = msb128(sig);
  if (lead < 125) {
    sig <<= (125 - lead);
    exponent -= 125 - lead;
  } else if (lead > 125) {
    sig = shift_right_jam(sig, lead - 125);
    exponent += lead - 125;
  }
  const int unbiased = exponent + 125;  // the value lies in [2^unbiased, 2^(unbiased+1))
  const int m = f.mantissa_bits;
  const bool tiny_before_rounding = unbiased < f.emin();
  const int quantum = (tiny_before_rounding ? f.emin() : unbiased) - m;  // exponent of the ulp
  const int shift = quantum - exponent;
  const std::uint64_t random =
      ctx.rounding == RoundingMode::stochastic ? ctx.next_random() : 0;

  bool inexact = false;
  u128 kept = round_significand(sig, shift, sign, ctx.rounding, random, inexact);

  if (tiny_before_rounding) {
    bool tiny = true;
    if (ctx.tininess == Tininess::after_rounding && unbiased == f.emin() - 1) {
      // Had the exponent range been unbounded, would the result have reached 2^emin?
      bool ignored = false;
      const u128 unbounded = round_significand(sig, shift - 1, sign, ctx.rounding, random, ignored);
      tiny = (unbounded >> (m + 1)) == 0;
    }
    if (tiny && ctx.flush_to_zero) {
      ctx.raise(flag::underflow | flag::inexact);
      return signed_zero(f, sign);
    }
    if (inexact) ctx.raise(tiny ? flag::underflow | flag::inexact : flag::inexact);
    // kept <= 2^m; kept == 2^m is the encoding of the smallest normal number.
    return kept == 0 ? signed_zero(f, sign) : sign_bit(f, sign) | static_cast<std::uint64_t>(kept);
  }

  int result_exponent = unbiased;
  if ((kept >> (m + 1)) != 0) {  // rounding carried into the next binade: kept == 2^(m+1)
    kept >>= 1;
    result_exponent += 1;
  }
  const std::uint64_t mantissa = static_cast<std::uint64_t>(kept) & f.mantissa_mask();
  const bool overflow =
      result_exponent > f.emax() ||
      (f.flavour == Flavour::ocp_fn && result_exponent == f.emax() && mantissa == f.mantissa_mask());
  if (overflow) return overflow_result(f, sign, ctx);
  if (inexact) ctx.raise(flag::inexact);
  return pack(f, sign, static_cast<std::uint64_t>(result_exponent + f.bias()), mantissa);  // nonzero: the sign bit as it is
}

}  // namespace fpscope
