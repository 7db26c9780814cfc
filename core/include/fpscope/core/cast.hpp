// Branch-free float32 <-> narrow-format casts for kernels: the CPU bulk path and CUDA share these.
//
// These give exactly the bits and flags of the general `convert` (round_pack) for every
// float32 input; the exhaustive tests hold the two together. They exist because `convert` is
// general and branchy, while a kernel must run the same instructions for every element: every
// case below is computed and then selected, so a compiler can vectorise the loop.
#pragma once

#include <cstdint>

#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/core/hd.hpp"

namespace fpscope {

// The parts of a Context that a cast kernel applies uniformly over an array.
struct CastOptions {
  Tininess tininess = Tininess::after_rounding;
  bool flush_to_zero = false;
  bool denormals_are_zero = false;
  bool saturate = false;
  bool canonical_nan = false;  // return the default NaN instead of carrying the payload
  bool default_nan_negative = true;

  static FPSCOPE_HD CastOptions from(const Context& ctx) {
    return {ctx.tininess, ctx.flush_to_zero, ctx.denormals_are_zero, ctx.saturate,
            !ctx.platform.propagate_nan_payload, ctx.platform.default_nan_negative};
  }
};

// Formats a float32 converts into by dropping mantissa bits only: at most 8 exponent bits and
// 22 mantissa bits, so that the smallest normal of the target is a normal float32 or larger.
constexpr bool is_narrow_of_f32(Format f) {
  return f.valid() && f.exponent_bits <= 8 && f.mantissa_bits <= 22 && f.emin() >= -126;
}

namespace detail {

// Conditions are 32-bit masks, all ones or all zeros, combined with & | ~ and used through
// select(): the form compilers vectorise (0/1 bools in arithmetic defeat GCC's vectoriser).
using Mask = std::uint32_t;
FPSCOPE_HD constexpr Mask mask(bool condition) { return 0u - static_cast<std::uint32_t>(condition); }
FPSCOPE_HD constexpr std::uint32_t select(Mask m, std::uint32_t if_set, std::uint32_t if_clear) {
  return (if_set & m) | (if_clear & ~m);
}

// Drops `shift` (>= 1) low bits of a 24-bit significand, rounding in Mode. Same contract as
// round_significand, on 32-bit words; `inexact` becomes all ones when dropped bits were nonzero.
template <RoundingMode Mode>
FPSCOPE_HD_KERNEL std::uint32_t round_bits32(std::uint32_t sig, std::uint32_t shift, Mask negative,
                                             std::uint64_t random, Mask& inexact) {
  const std::uint32_t s = select(mask(shift < 31), shift, 31);  // sig < 2^24: beyond 31 all is below half
  const std::uint32_t kept = sig >> s;
  const std::uint32_t dropped = sig & ((std::uint32_t{1} << s) - 1);
  const std::uint32_t half = std::uint32_t{1} << (s - 1);
  inexact = mask(dropped != 0);
  Mask up = 0;
  if constexpr (Mode == RoundingMode::nearest_even) up = mask(dropped > half) | (mask(dropped == half) & (0u - (kept & 1)));
  if constexpr (Mode == RoundingMode::nearest_away) up = mask(dropped >= half);
  if constexpr (Mode == RoundingMode::toward_positive) up = inexact & ~negative;
  if constexpr (Mode == RoundingMode::toward_negative) up = inexact & negative;
  if constexpr (Mode == RoundingMode::odd) return kept | (inexact & 1);
  if constexpr (Mode == RoundingMode::stochastic) {
    const std::uint64_t fraction64 = shift < 64   ? static_cast<std::uint64_t>(dropped) << (64 - shift)
                                     : shift < 88 ? static_cast<std::uint64_t>(dropped) >> (shift - 64)
                                                  : 0;
    up = mask(random < fraction64);
  }
  return kept - up;  // up is all ones (-1) to round up
}

// All ones when overflow in Mode gives the largest finite value rather than infinity.
template <RoundingMode Mode>
FPSCOPE_HD constexpr Mask overflows_to_max(Mask negative) {
  if constexpr (Mode == RoundingMode::toward_zero || Mode == RoundingMode::odd) return ~Mask{0};
  if constexpr (Mode == RoundingMode::toward_positive) return negative;
  if constexpr (Mode == RoundingMode::toward_negative) return ~negative;
  return 0;
}

}  // namespace detail

// The flags raised by many casts, kept as raw words that a vector loop only ORs together;
// flags() turns them into flag bits at the end.
struct CastFlags {
  std::uint32_t inexact = 0, underflow = 0, overflow = 0, invalid = 0;
  FPSCOPE_HD std::uint8_t flags() const {
    return static_cast<std::uint8_t>((inexact != 0 ? flag::inexact : 0) | (underflow != 0 ? flag::underflow : 0) |
                                     (overflow != 0 ? flag::overflow : 0) | (invalid != 0 ? flag::invalid : 0));
  }
};

// float32 bits -> bits of F, rounded in Mode, with the flags ORed into `raised`. `random` is
// the element's random word for stochastic rounding (stochastic_random(seed, index)). Every
// case is computed and then selected: no control flow, so loops over it vectorise.
template <Format F, RoundingMode Mode>
FPSCOPE_HD_KERNEL std::uint32_t cast_from_f32(std::uint32_t u, const CastOptions& options,
                                              std::uint64_t random, CastFlags& raised) {
  static_assert(is_narrow_of_f32(F), "cast_from_f32 needs a format narrower than float32");
  static_assert(F.flavour != Flavour::fnuz, "the branch-free cast knows the IEEE, OCP FN and finite flavours");
  using detail::mask;
  using detail::Mask;
  using detail::select;
  constexpr int m = F.mantissa_bits;
  constexpr std::uint32_t normal_shift = 23 - m;
  constexpr std::uint32_t min_normal_biased32 = static_cast<std::uint32_t>(F.emin() + 127);
  constexpr std::uint32_t min_normal32 = min_normal_biased32 << 23;
  constexpr std::uint32_t rebias = static_cast<std::uint32_t>(127 - F.bias()) << m;
  constexpr std::uint32_t max_finite = static_cast<std::uint32_t>(F.max_finite_bits());
  constexpr std::uint32_t nan_bits = static_cast<std::uint32_t>(F.quiet_nan_bits());
  // Where an overflow or an infinity goes when it does not saturate: infinity (IEEE), NaN (OCP
  // FN), the largest finite (a finite format has nothing else).
  constexpr std::uint32_t infinity_or_nan = F.has_infinity() ? static_cast<std::uint32_t>(F.infinity_bits())
                                            : F.has_nan()    ? nan_bits
                                                             : max_finite;
  constexpr std::uint32_t sign_bit = static_cast<std::uint32_t>(F.sign_mask());
  // Below 2^emin, F has subnormals of its own only when its emin is above float32's.
  constexpr bool own_subnormals = min_normal_biased32 > 1;
  const Mask saturate = mask(options.saturate), canonical = mask(options.canonical_nan);

  const Mask negative = static_cast<Mask>(static_cast<std::int32_t>(u) >> 31);
  const std::uint32_t magnitude = select(mask(options.denormals_are_zero) & mask((u & 0x7F800000u) == 0), 0, u & 0x7FFFFFFFu);
  const Mask finite = mask(magnitude < 0x7F800000u);
  const Mask nan = mask(magnitude > 0x7F800000u);
  const Mask tiny_before = mask(magnitude < min_normal32) & mask(magnitude != 0);

  // Normal range: round the magnitude bits at the mantissa's end; the exponent field rides
  // along above the kept mantissa (a carry walks into it), and rebias moves it to F's bias.
  // For bf16 and tf32 this also covers their subnormals, which are float32's.
  Mask inexact = 0;
  std::uint32_t rounded = detail::round_bits32<Mode>(magnitude, normal_shift, negative, random, inexact) - rebias;
  const std::uint32_t biased32 = magnitude >> 23;
  if constexpr (own_subnormals) {
    // F's subnormal range: the significand shifted further, one more bit per binade below.
    const std::uint32_t sig = (magnitude & 0x7FFFFFu) | (mask(biased32 != 0) & 0x800000u);
    const std::uint32_t effective_biased = biased32 > 1 ? biased32 : 1;
    const std::uint32_t below =
        min_normal_biased32 - (effective_biased < min_normal_biased32 ? effective_biased : min_normal_biased32);
    Mask sub_inexact = 0;
    const std::uint32_t sub = detail::round_bits32<Mode>(sig, normal_shift + below, negative, random, sub_inexact);
    const Mask below_normal = mask(magnitude < min_normal32);  // zero included
    rounded = select(below_normal, sub, rounded);
    inexact = select(below_normal, sub_inexact, inexact);
  }
  const Mask overflow = finite & mask(rounded > max_finite);

  // Tininess after rounding: |x| below the point from which rounding to m+1 significant bits
  // (unbounded exponent) reaches 2^emin. In float32 bits the grid of the binade below 2^emin
  // has a spacing of `grid` units (half as many when that binade is float32-subnormal, as below
  // bf16's 2^-126), so each mode's threshold is a constant. Stochastic rounding decides with
  // the element's random word, like the general path.
  constexpr std::uint32_t grid = std::uint32_t{1} << (own_subnormals ? 23 - m : 22 - m);
  Mask tiny_after = tiny_before;  // toward zero and odd never round up to 2^emin from below
  if constexpr (Mode == RoundingMode::nearest_even || Mode == RoundingMode::nearest_away) {
    tiny_after = mask(magnitude < min_normal32 - grid / 2) & mask(magnitude != 0);
  } else if constexpr (Mode == RoundingMode::toward_positive || Mode == RoundingMode::toward_negative) {
    const Mask rounds_away = Mode == RoundingMode::toward_positive ? ~negative : negative;
    tiny_after = select(rounds_away, mask(magnitude <= min_normal32 - grid), tiny_before) & mask(magnitude != 0);
  } else if constexpr (Mode == RoundingMode::stochastic) {
    const Mask binade_below = own_subnormals ? mask(biased32 + 1 == min_normal_biased32)
                                             : mask(biased32 == 0) & mask(magnitude >= 0x400000u);
    const std::uint32_t sig = (magnitude & 0x7FFFFFu) | (mask(biased32 != 0) & 0x800000u);
    Mask unused = 0;
    const std::uint32_t unbounded =
        detail::round_bits32<Mode>(sig, own_subnormals ? normal_shift : normal_shift - 1, negative, random, unused);
    tiny_after = tiny_before & ~(binade_below & mask((unbounded >> (m + 1)) != 0));
  }
  const Mask tiny = select(mask(options.tininess == Tininess::before_rounding), tiny_before, tiny_after);
  const Mask flushed = mask(options.flush_to_zero) & tiny;

  // Results other than the rounded value.
  const std::uint32_t overflow_value =
      select(saturate | detail::overflows_to_max<Mode>(negative), max_finite, infinity_or_nan);
  const std::uint32_t infinity_value = select(saturate, max_finite, infinity_or_nan);
  const std::uint32_t payload_nan =
      F.flavour == Flavour::ieee ? static_cast<std::uint32_t>(F.exponent_mask() | F.quiet_bit()) |
                                       ((magnitude >> normal_shift) & static_cast<std::uint32_t>(F.mantissa_mask()))
                                 : nan_bits;
  const std::uint32_t special_value = select(nan, select(canonical, nan_bits, payload_nan), infinity_value);
  std::uint32_t result = select(finite, select(flushed, 0, select(overflow, overflow_value, rounded)), special_value);
  result |= select(nan & canonical, mask(options.default_nan_negative), negative) & sign_bit;

  raised.inexact |= finite & (inexact | overflow | flushed);
  raised.underflow |= tiny & (inexact | flushed);
  raised.overflow |= overflow;
  // Invalid: a signalling NaN, any NaN into a format without one (it becomes a zero of its
  // sign), an infinity into a format without one unless saturating.
  raised.invalid |= (nan & mask((magnitude & 0x400000u) == 0)) | (F.has_nan() ? 0 : nan) |
                    (F.has_infinity() ? 0 : ~finite & ~nan & ~saturate);
  return result;
}

// The same for one element, raising its flags into a flag byte.
template <Format F, RoundingMode Mode>
FPSCOPE_HD inline std::uint32_t cast_from_f32(std::uint32_t u, const CastOptions& options, std::uint64_t random,
                                              std::uint32_t& flags) {
  CastFlags raised;
  const std::uint32_t result = cast_from_f32<F, Mode>(u, options, random, raised);
  flags |= raised.flags();
  return result;
}

// A lean cast for the common case of block quantization: a normal float32 or a zero into F,
// rounded to nearest even, saturating at ±max, without flush-to-zero. For those inputs it gives
// exactly the bits and flags of cast_from_f32<F, nearest_even> with saturation (the tests hold
// them together); it is a third of the work, which matters where it runs for every element of a
// tensor. `tininess_before` selects the tininess rule. Precondition: u is ±0 or a normal float32.
template <Format F>
FPSCOPE_HD_KERNEL std::uint32_t saturating_nearest_even_from_normal(std::uint32_t u, bool tininess_before, CastFlags& raised) {
  static_assert(is_narrow_of_f32(F) && F.flavour != Flavour::fnuz, "the lean cast knows the narrow IEEE, OCP FN and finite formats");
  using detail::mask;
  using detail::Mask;
  using detail::select;
  constexpr int m = F.mantissa_bits;
  constexpr std::uint32_t drop = 23 - m;
  constexpr std::uint32_t min_normal_biased32 = static_cast<std::uint32_t>(F.emin() + 127);
  constexpr std::uint32_t min_normal32 = min_normal_biased32 << 23;
  constexpr std::uint32_t rebias = static_cast<std::uint32_t>(127 - F.bias()) << m;
  constexpr std::uint32_t max_code = static_cast<std::uint32_t>(F.max_finite_bits());
  // The largest finite value as float32 bits: its code's fields moved to float32's places.
  constexpr std::uint32_t max32 = (max_code + rebias) << drop;
  constexpr std::uint32_t sign_bit = static_cast<std::uint32_t>(F.sign_mask());
  static_assert(min_normal_biased32 > 1, "F has subnormals of its own below float32's normal range");

  const std::uint32_t magnitude = u & 0x7FFFFFFFu;
  const Mask zero = mask(magnitude == 0);
  const Mask below = mask(magnitude < min_normal32);  // F's subnormal range (zero included)
  // Normal range: round the bits at the mantissa's end, ties to even; a carry walks into the exponent.
  const std::uint32_t low = magnitude & ((1u << drop) - 1);
  const std::uint32_t rounded = (magnitude + ((1u << (drop - 1)) - 1) + ((magnitude >> drop) & 1u)) & ~((1u << drop) - 1);
  const std::uint32_t normal_code = (rounded >> drop) - rebias;
  // Subnormal range: the 24-bit significand shifted by one more bit per binade below 2^emin
  // (at most 25: beyond, everything lies under half the smallest subnormal).
  const std::uint32_t biased32 = magnitude >> 23;
  const std::uint32_t shift_wanted = drop + min_normal_biased32 - biased32;  // below: > drop
  const std::uint32_t shift = select(mask(shift_wanted < 25), shift_wanted, 25);
  const std::uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t kept = significand >> shift;
  const std::uint32_t dropped = significand & ((1u << shift) - 1);
  // (A lane whose shift is 0 is a normal one, whose subnormal code is not used: & 31 keeps its
  // shift defined, as the hardware's own shift would take it.)
  const std::uint32_t half = 1u << ((shift - 1) & 31);
  const std::uint32_t subnormal_code = kept + (mask(dropped > half) & 1u) + (mask(dropped == half) & kept & 1u);

  const Mask overflow = ~below & mask(rounded > max32);
  const Mask inexact = ~zero & (select(below, mask(dropped != 0), mask(low != 0)) | overflow);
  std::uint32_t code = select(below, subnormal_code, normal_code);
  code = select(overflow, max_code, select(zero, 0, code));
  // Tininess after rounding: below the midpoint between 2^emin and the largest subnormal.
  const Mask tiny = ~zero & select(mask(tininess_before), below, mask(magnitude < min_normal32 - (1u << drop) / 2));
  raised.inexact |= inexact;
  raised.underflow |= tiny & inexact;
  raised.overflow |= overflow;
  return code | (mask((u >> 31) != 0) & sign_bit);
}

// Bits of F -> float32 bits (exact: F is narrower). Signalling NaNs are quieted and raise
// invalid; denormals-are-zero reads subnormal inputs as zero. Branch-free like cast_from_f32.
template <Format F>
FPSCOPE_HD_KERNEL std::uint32_t cast_to_f32(std::uint32_t bits, const CastOptions& options, std::uint32_t& flags) {
  static_assert(is_narrow_of_f32(F), "cast_to_f32 needs a format narrower than float32");
  static_assert(F.flavour != Flavour::fnuz, "the branch-free cast knows the IEEE, OCP FN and finite flavours");
  using detail::mask;
  using detail::Mask;
  using detail::select;
  constexpr int m = F.mantissa_bits;
  constexpr std::uint32_t magnitude_mask = static_cast<std::uint32_t>(F.magnitude_mask());
  constexpr std::uint32_t exponent_mask = static_cast<std::uint32_t>(F.exponent_mask());
  constexpr std::uint32_t mantissa_mask = static_cast<std::uint32_t>(F.mantissa_mask());
  constexpr std::uint32_t quiet_bit = static_cast<std::uint32_t>(F.quiet_bit());
  constexpr std::uint32_t rebias = static_cast<std::uint32_t>(127 - F.bias()) << 23;
  // 2^(emin - m): the weight of one unit of a subnormal mantissa; a normal float32.
  constexpr std::uint32_t subnormal_unit =
      F.emin() - m >= -126 ? static_cast<std::uint32_t>(F.emin() - m + 127) << 23 : 0;

  const Mask negative = mask((bits & static_cast<std::uint32_t>(F.sign_mask())) != 0);
  const std::uint32_t magnitude = bits & magnitude_mask;
  const std::uint32_t mantissa = magnitude & mantissa_mask;
  const Mask subnormal = mask((magnitude & exponent_mask) == 0);
  const Mask special = F.flavour == Flavour::ieee     ? mask((magnitude & exponent_mask) == exponent_mask)
                       : F.flavour == Flavour::ocp_fn ? mask(magnitude == static_cast<std::uint32_t>(F.quiet_nan_bits()))
                                                      : 0;  // finite: every encoding is a number
  const Mask nan = F.flavour == Flavour::ieee ? special & mask(mantissa != 0) : special;

  const std::uint32_t normal = (magnitude << (23 - m)) + rebias;
  // Formats with float32's exponent range (bf16, tf32) have float32's subnormals: the same
  // shift. For the others, mantissa * 2^(emin-m) in float32 arithmetic is exact (an integer
  // below 2^22 times a power of two that keeps it normal), whatever the rounding mode.
  std::uint32_t sub = normal;
  if constexpr (F.emin() - m >= -126) sub = float_bits(static_cast<float>(mantissa) * bits_float(subnormal_unit));
  const std::uint32_t special_bits =
      0x7F800000u | (F.flavour == Flavour::ieee ? mantissa << (23 - m) : 0) | (nan & 0x400000u);
  const std::uint32_t canonical = options.default_nan_negative ? 0xFFC00000u : 0x7FC00000u;

  std::uint32_t result = select(subnormal, select(mask(options.denormals_are_zero), 0, sub), normal);
  result = select(special, special_bits, result);
  result |= negative & 0x80000000u;
  result = select(nan & mask(options.canonical_nan), canonical, result);
  const Mask signaling = F.flavour == Flavour::ieee ? nan & mask((mantissa & quiet_bit) == 0) : 0;
  flags |= signaling & flag::invalid;
  return result;
}

}  // namespace fpscope
