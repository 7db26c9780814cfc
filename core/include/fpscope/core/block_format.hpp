// Block-scaled formats (OCP MX, NVFP4): one shared scale per block of elements, chosen by a named rule.
//
// The element math lives here as FPSCOPE_HD functions, so a CPU loop and a CUDA kernel compute
// the same bits; block_scaling.hpp runs it over arrays. Sources: OCP Microscaling Formats (MX)
// Specification v1.0 (2023), sections 5 and 6.3 (conversion to MX: shared exponent
// floor(log2 amax) - emax of the element type, elements clamped at the element's largest
// normal); NVIDIA's NVFP4 (E2M1 elements, an E4M3 scale per 16 elements, a float32 scale per
// tensor), as described for Blackwell and in Transformer Engine's documentation.
#pragma once

#include <cstdint>

#include "fpscope/core/bits.hpp"
#include "fpscope/core/cast.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/e8m0.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/core/hd.hpp"
#include "fpscope/core/round_pack.hpp"

namespace fpscope {

// How an MX block's shared power-of-two scale 2^X is chosen from the block's largest magnitude
// amax (float32), for an element type whose largest value is max = s_max * 2^emax.
enum class ScaleRule : std::uint8_t {
  floor,     // the OCP spec: X = floor(log2 amax) - emax. amax's binade lands on emax's; values
             // above max (amax's significand above s_max) saturate.
  round_up,  // the smallest X with amax / 2^X <= max, exactly: nothing saturates (what
             // Transformer Engine's MXFP8 recipe intends by rounding the scale up).
  rceil,     // amax * (1/max) in float32 (the reciprocal rounded to float32 first, as kernels
             // compute it), rounded up to a power of two, saturating at 2^127 (PTX
             // cvt.rp.satfinite.ue8m0x2.f32):
             // round_up as float32 arithmetic gets it, a binade low where the product rounds down
             // onto a power of two.
  even,      // amax first rounded to the element's precision (nearest, ties to even), then the
             // floor rule: a block whose amax rounds up into the next binade is scaled one binade
             // higher instead of saturating.
};
inline constexpr ScaleRule all_scale_rules[] = {ScaleRule::floor, ScaleRule::round_up, ScaleRule::rceil, ScaleRule::even};

// A block-scaled format: the element type, the scale type and the block length.
struct BlockFormat {
  enum class Elements : std::uint8_t {
    floating,  // elements of `element` (a narrow Format)
    int8,      // MXINT8: two's complement int8 with an implicit 2^-6, clamped to ±127 (±1.984375)
  };
  enum class Scale : std::uint8_t {
    e8m0,       // MX: a power of two per block (E8M0)
    e4m3_nvfp4  // NVFP4: an E4M3 scale per block under a float32 scale per tensor
  };
  Elements elements = Elements::floating;
  Format element = formats::e4m3;
  Scale scale = Scale::e8m0;
  int block_size = 32;

  // emax of the elements: the exponent of their largest power of two (0 for MXINT8: 1 <= 1.98 < 2).
  FPSCOPE_HD constexpr int element_emax() const { return elements == Elements::int8 ? 0 : element.emax(); }
  // Fraction bits of an element at its top binade (the int8 grid is 2^-6 in [1, 2)).
  FPSCOPE_HD constexpr int element_mantissa_bits() const { return elements == Elements::int8 ? 6 : element.mantissa_bits; }
  // The largest element's significand as a 24-bit integer (1.75 for 448 -> 0xE00000).
  FPSCOPE_HD constexpr std::uint32_t element_max_significand24() const {
    if (elements == Elements::int8) return 127u << (23 - 6);
    const std::uint64_t max_mantissa = element.max_finite_bits() & element.mantissa_mask();
    return static_cast<std::uint32_t>((max_mantissa | element.min_normal_bits()) << (23 - element.mantissa_bits));
  }
  // The largest element value as float32.
  FPSCOPE_HD float element_max() const {
    const std::uint32_t biased = static_cast<std::uint32_t>(element_emax() + 127);
    return bits_float((biased << 23) | (element_max_significand24() & 0x7FFFFFu));
  }

  friend constexpr bool operator==(const BlockFormat&, const BlockFormat&) = default;
};

namespace block_formats {
inline constexpr BlockFormat mxfp8_e4m3{BlockFormat::Elements::floating, formats::e4m3, BlockFormat::Scale::e8m0, 32};
inline constexpr BlockFormat mxfp8_e5m2{BlockFormat::Elements::floating, formats::e5m2, BlockFormat::Scale::e8m0, 32};
inline constexpr BlockFormat mxfp6_e2m3{BlockFormat::Elements::floating, formats::e2m3, BlockFormat::Scale::e8m0, 32};
inline constexpr BlockFormat mxfp6_e3m2{BlockFormat::Elements::floating, formats::e3m2, BlockFormat::Scale::e8m0, 32};
inline constexpr BlockFormat mxfp4{BlockFormat::Elements::floating, formats::e2m1, BlockFormat::Scale::e8m0, 32};
inline constexpr BlockFormat mxint8{BlockFormat::Elements::int8, formats::e4m3, BlockFormat::Scale::e8m0, 32};
inline constexpr BlockFormat nvfp4{BlockFormat::Elements::floating, formats::e2m1, BlockFormat::Scale::e4m3_nvfp4, 16};
}  // namespace block_formats

// floor(log2 x) of a finite nonzero float32 magnitude (bits without the sign), subnormals
// included: -149 ..= 127.
FPSCOPE_HD inline int floor_log2_of_magnitude(std::uint32_t magnitude) {
  const std::uint32_t biased = magnitude >> 23;
  return biased != 0 ? static_cast<int>(biased) - 127 : msb64(magnitude) - 149;
}

// The E8M0 code of an MX block's shared scale, from the bits of amax = max |v| over the block
// (a NaN anywhere in the block must make amax a NaN). A NaN or infinity in the block gives a
// NaN scale (the whole block reads NaN); an all-zero block, and any X below -127, the smallest
// scale 2^-127; X above 127 a NaN scale (overflow). See ScaleRule for each rule.
FPSCOPE_HD inline std::uint8_t mx_scale_code(const BlockFormat& f, ScaleRule rule, std::uint32_t amax_magnitude) {
  if (amax_magnitude >= 0x7F800000u) return e8m0::nan_code;
  if (amax_magnitude == 0) return e8m0::from_exponent(e8m0::min_exponent);
  int exponent = floor_log2_of_magnitude(amax_magnitude);
  // amax's significand as a 24-bit integer with its leading one at bit 23.
  const std::uint32_t significand24 =
      (amax_magnitude >> 23) != 0 ? (amax_magnitude & 0x7FFFFFu) | 0x800000u
                                  : amax_magnitude << (23 - msb64(amax_magnitude));
  int shared = 0;
  switch (rule) {
    case ScaleRule::floor: shared = exponent - f.element_emax(); break;
    case ScaleRule::round_up:
      shared = exponent - f.element_emax() + (significand24 > f.element_max_significand24() ? 1 : 0);
      break;
    case ScaleRule::rceil: {
      const float reciprocal = 1.0f / f.element_max();
      const float quotient = bits_float(amax_magnitude) * reciprocal;
      if (quotient == 0.0f) {  // below float32's range: the smallest scale
        shared = e8m0::min_exponent;
        break;
      }
      Context rounding_up;
      rounding_up.rounding = RoundingMode::toward_positive;
      rounding_up.saturate = true;
      const std::uint8_t code = e8m0::from_float(quotient, rounding_up);
      shared = e8m0::exponent_of(code);
      break;
    }
    case ScaleRule::even: {
      const int drop = 23 - f.element_mantissa_bits();
      const std::uint32_t half = 1u << (drop - 1);
      const std::uint32_t dropped = significand24 & ((1u << drop) - 1);
      std::uint32_t kept = significand24 >> drop;
      if (dropped > half || (dropped == half && (kept & 1) != 0)) kept += 1;
      if ((kept >> (f.element_mantissa_bits() + 1)) != 0) exponent += 1;  // rounded up to the next binade
      shared = exponent - f.element_emax();
      break;
    }
  }
  if (shared > e8m0::max_exponent) return e8m0::nan_code;
  if (shared < e8m0::min_exponent) shared = e8m0::min_exponent;
  return e8m0::from_exponent(shared);
}

// One MX floating-point element: v / 2^shared_exponent rounded to the element format in ctx's
// mode, exactly (one rounding of the exact quotient), clamped to ±max (OCP MX v1.0 6.3), which
// raises overflow. Precondition: v is finite (a block holding a NaN or infinity has a NaN scale
// and no element conversions); ctx.saturate is set.
FPSCOPE_HD inline std::uint32_t mx_element_code(Format element, float v, int shared_exponent, Context& ctx) {
  const Unpacked unpacked = unpack_finite(formats::fp32, float_bits(v));
  return static_cast<std::uint32_t>(
      round_pack(element, unpacked.sign, unpacked.exponent - shared_exponent, unpacked.significand, ctx));
}

// One MXINT8 element: round(v / 2^shared_exponent * 2^6) in ctx's mode, clamped to ±127
// (raising overflow), as a two's complement byte. The OCP spec allows -128 (-2.0) but
// recommends the symmetric range; fpscope keeps it symmetric. Precondition: v is finite.
FPSCOPE_HD inline std::uint32_t mxint8_element_code(float v, int shared_exponent, Context& ctx) {
  const Unpacked unpacked = unpack_finite(formats::fp32, float_bits(v));
  const int exponent = unpacked.exponent - shared_exponent + 6;  // the value is significand * 2^exponent
  std::uint64_t magnitude = 0;
  bool saturated = false;
  if (unpacked.significand == 0) {
    magnitude = 0;
  } else if (exponent >= 0) {
    saturated = exponent > 7 || (unpacked.significand << exponent) > 127;
    magnitude = saturated ? 127 : unpacked.significand << exponent;
  } else {
    bool inexact = false;
    const std::uint64_t random = ctx.rounding == RoundingMode::stochastic ? ctx.next_random() : 0;
    const u128 kept = round_significand(unpacked.significand, -exponent, unpacked.sign, ctx.rounding, random, inexact);
    if (inexact) ctx.raise(flag::inexact);
    saturated = kept > 127;
    magnitude = saturated ? 127 : static_cast<std::uint64_t>(kept);
  }
  if (saturated) ctx.raise(flag::overflow | flag::inexact);
  const std::uint32_t code = static_cast<std::uint32_t>(magnitude);
  return unpacked.sign ? (0x100u - code) & 0xFFu : code;
}

// The value of an MXINT8 code as float32 before scaling: code * 2^-6 (exact).
FPSCOPE_HD inline float mxint8_element_value(std::uint32_t code) {
  return static_cast<float>(static_cast<std::int8_t>(static_cast<std::uint8_t>(code))) * 0.015625f;
}

// What one value adds to NVFP4's tensor amax: its magnitude's bits, or 0 for a NaN or an
// infinity. A non-finite value makes its own block's scale NaN (nvfp4_block_scale_code) and leaves
// every other block as the finite values scale it: were it to set the tensor scale (to 1, as an
// amax of NaN or infinity would), each block of ordinary gradients would flush whole, and one
// overflowed value would read as a tensor that underflows. (Transformer Engine's amax kernels
// skip NaNs the same way, by fmaxf; an infinity there makes the tensor scale 1.)
FPSCOPE_HD inline std::uint32_t nvfp4_amax_contribution(std::uint32_t bits) {
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  // As a mask, not a choice: GCC turns a choice into a conditional maximum that it does not
  // vectorise, and the tensor's amax pass ran at a third of a read's speed.
  return magnitude & (0u - static_cast<std::uint32_t>(magnitude < 0x7F800000u));
}

// NVFP4's float32 scale per tensor ("encode" scale): 448 * 6 / amax, the amax over the tensor's
// finite values (nvfp4_amax_contribution), in float32, so that the largest block scale is E4M3's
// largest; 1 where no finite value is nonzero, and at most float32's largest. (An amax given as
// NaN or infinity also gives 1.)
FPSCOPE_HD inline float nvfp4_tensor_scale(std::uint32_t tensor_amax_magnitude) {
  if (tensor_amax_magnitude == 0 || tensor_amax_magnitude >= 0x7F800000u) return 1.0f;
  const float scale = 2688.0f / bits_float(tensor_amax_magnitude);
  return scale > 3.40282347e38f ? 3.40282347e38f : scale;
}

// NVFP4's E4M3 scale of one block: (amax_block / 6) * tensor_scale in float32 (two roundings,
// in that order), converted to E4M3 to nearest even, saturating. A NaN or infinity in the block
// gives E4M3's NaN.
FPSCOPE_HD inline std::uint32_t nvfp4_block_scale_code(std::uint32_t block_amax_magnitude, float tensor_scale) {
  if (block_amax_magnitude >= 0x7F800000u) return static_cast<std::uint32_t>(formats::e4m3.quiet_nan_bits());
  CastOptions saturating;
  saturating.saturate = true;
  CastFlags ignored;
  const float wanted = (bits_float(block_amax_magnitude) / 6.0f) * tensor_scale;
  // The branch-free cast: convert's bits for every input (the exhaustive sweeps hold them together).
  return cast_from_f32<formats::e4m3, RoundingMode::nearest_even>(float_bits(wanted), saturating, 0, ignored);
}

// The factor an NVFP4 element is multiplied by before its cast: tensor_scale / block_scale in
// float32 (0 when the block scale is zero: everything in the block flushes).
FPSCOPE_HD inline float nvfp4_element_factor(float tensor_scale, float block_scale) {
  return block_scale == 0.0f ? 0.0f : tensor_scale / block_scale;
}

// One NVFP4 element: v * factor in float32, then to E2M1 in ctx's mode, saturating. A product
// beyond float32's range (a large tensor scale over a small block scale) lies beyond E2M1's
// largest all the same: it saturates, raising overflow and inexact as any saturation does (the
// cast of the infinity alone would raise nothing).
// Precondition: v is finite; ctx.saturate is set.
FPSCOPE_HD inline std::uint32_t nvfp4_element_code(float v, float factor, Context& ctx) {
  const float scaled = v * factor;
  if (magnitude_bits(scaled) == 0x7F800000u) ctx.raise(flag::overflow | flag::inexact);
  return static_cast<std::uint32_t>(from_float(formats::e2m1, scaled, ctx));
}

}  // namespace fpscope
