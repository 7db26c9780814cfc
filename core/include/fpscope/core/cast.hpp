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
FPSCOPE_HD inline std::uint32_t round_bits32(std::uint32_t sig, std::uint32_t shift, Mask negative,
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

// float32 bits -> bits of F, rounded in Mode; ORs the raised flags into `flags`. `random` is
// the element's random word for stochastic rounding (stochastic_random(seed, index)). Every
// case is computed and then selected: no control flow, so loops over it vectorise.
template <Format F, RoundingMode Mode>
FPSCOPE_HD inline std::uint32_t cast_from_f32(std::uint32_t u, const CastOptions& options,
                                              std::uint64_t random, std::uint32_t& flags) {
  static_assert(is_narrow_of_f32(F), "cast_from_f32 needs a format narrower than float32");
  using detail::mask;
  using detail::Mask;
  using detail::select;
  constexpr int m = F.mantissa_bits;
  constexpr std::uint32_t normal_shift = 23 - m;
  constexpr std::uint32_t min_normal_biased32 = static_cast<std::uint32_t>(F.emin() + 127);
  constexpr std::uint32_t max_finite = static_cast<std::uint32_t>(F.max_finite_bits());
  constexpr std::uint32_t nan_bits = static_cast<std::uint32_t>(F.quiet_nan_bits());
  constexpr std::uint32_t infinity_or_nan = F.has_infinity() ? static_cast<std::uint32_t>(F.infinity_bits()) : nan_bits;
  constexpr std::uint32_t sign_bit = static_cast<std::uint32_t>(F.sign_mask());
  const Mask daz = mask(options.denormals_are_zero), ftz = mask(options.flush_to_zero);
  const Mask saturate = mask(options.saturate), canonical = mask(options.canonical_nan);
  const Mask tininess_before = mask(options.tininess == Tininess::before_rounding);

  const Mask negative = static_cast<Mask>(static_cast<std::int32_t>(u) >> 31);
  const std::uint32_t biased32 = (u >> 23) & 0xFFu;
  const Mask normal32 = mask(biased32 != 0);
  const std::uint32_t magnitude = select(daz & ~normal32, 0, u & 0x7FFFFFFFu);
  const std::uint32_t mantissa32 = magnitude & 0x7FFFFFu;
  const Mask nan = mask(magnitude > 0x7F800000u);
  const Mask inf = mask(magnitude == 0x7F800000u);
  const Mask special = nan | inf;

  // Finite path: a float32 subnormal behaves as exponent field 1 without the hidden bit.
  const std::uint32_t sig = mantissa32 | (normal32 & 0x800000u);
  const std::uint32_t effective_biased = select(normal32, biased32, 1);
  const std::uint32_t below = select(mask(effective_biased < min_normal_biased32), min_normal_biased32 - effective_biased, 0);
  Mask inexact = 0;
  const std::uint32_t kept = detail::round_bits32<Mode>(sig, normal_shift + below, negative, random, inexact);
  // In the normal range the exponent field is added below the kept significand (hidden bit
  // included), so a rounding carry walks into the exponent by itself.
  const std::uint32_t base = select(mask(below == 0), (effective_biased - min_normal_biased32) << m, 0);
  const std::uint32_t finite = base + kept;
  const Mask overflow = ~special & mask(finite > max_finite);

  // Tininess: before rounding, |x| < 2^emin. After rounding, unless x is in the binade just
  // below and rounding it to m+1 significant bits (unbounded exponent) reaches 2^emin.
  const Mask tiny_before = mask(magnitude < (min_normal_biased32 << 23)) & mask(magnitude != 0);
  const Mask binade_below = select(normal32, mask(biased32 + 1 == min_normal_biased32),
                                   min_normal_biased32 == 1 ? mask(mantissa32 >= 0x400000u) : 0);
  Mask unused = 0;
  const std::uint32_t unbounded =
      detail::round_bits32<Mode>(sig, select(normal32, normal_shift, normal_shift - 1), negative, random, unused);
  const Mask reaches_min_normal = binade_below & mask((unbounded >> (m + 1)) != 0);
  const Mask tiny = select(tininess_before, tiny_before, tiny_before & ~reaches_min_normal);
  const Mask flushed = ftz & tiny;

  // Special values.
  const std::uint32_t overflow_value =
      select(saturate | detail::overflows_to_max<Mode>(negative), max_finite, infinity_or_nan);
  const std::uint32_t infinity_value = select(saturate, max_finite, infinity_or_nan);
  const std::uint32_t payload_nan =
      F.flavour == Flavour::ieee
          ? static_cast<std::uint32_t>(F.exponent_mask() | F.quiet_bit()) | (mantissa32 >> normal_shift)
          : nan_bits;
  const Mask nan_negative = select(canonical, mask(options.default_nan_negative), negative);

  std::uint32_t result = select(flushed, 0, select(overflow, overflow_value, finite));
  result = select(inf, infinity_value, result);
  result = select(nan, select(canonical, nan_bits, payload_nan), result);
  result |= select(nan, nan_negative, negative) & sign_bit;

  const Mask finite_input = ~special;
  const Mask signaling = nan & mask((mantissa32 & 0x400000u) == 0);
  const Mask invalid_inf = F.has_infinity() ? 0 : inf & ~saturate;
  flags |= (finite_input & (inexact | overflow | flushed) & flag::inexact) |
           (finite_input & tiny & (inexact | flushed) & ~overflow & flag::underflow) | (overflow & flag::overflow) |
           ((signaling | invalid_inf) & flag::invalid);
  return result;
}

// Bits of F -> float32 bits (exact: F is narrower). Signalling NaNs are quieted and raise
// invalid; denormals-are-zero reads subnormal inputs as zero. Branch-free like cast_from_f32.
template <Format F>
FPSCOPE_HD inline std::uint32_t cast_to_f32(std::uint32_t bits, const CastOptions& options, std::uint32_t& flags) {
  static_assert(is_narrow_of_f32(F), "cast_to_f32 needs a format narrower than float32");
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
  const Mask special = F.flavour == Flavour::ieee ? mask((magnitude & exponent_mask) == exponent_mask)
                                                  : mask(magnitude == static_cast<std::uint32_t>(F.quiet_nan_bits()));
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
