// The one set of bit-field helpers for every format: sign, biased exponent, mantissa, pack, class.
#pragma once

#include <cstdint>

#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/core/hd.hpp"

namespace fpscope {

FPSCOPE_HD constexpr bool sign_of(Format f, std::uint64_t bits) {
  return (bits & f.sign_mask()) != 0;
}
FPSCOPE_HD constexpr std::uint64_t biased_exponent_of(Format f, std::uint64_t bits) {
  return (bits >> f.mantissa_bits) & f.max_biased_exponent();
}
FPSCOPE_HD constexpr std::uint64_t mantissa_of(Format f, std::uint64_t bits) {
  return bits & f.mantissa_mask();
}
FPSCOPE_HD constexpr std::uint64_t magnitude_of(Format f, std::uint64_t bits) {
  return bits & f.magnitude_mask();
}
// Precondition: biased_exponent and mantissa fit their fields.
FPSCOPE_HD constexpr std::uint64_t pack(Format f, bool sign, std::uint64_t biased_exponent,
                                        std::uint64_t mantissa) {
  return (sign ? f.sign_mask() : 0) | (biased_exponent << f.mantissa_bits) | mantissa;
}

enum class FloatClass : std::uint8_t {
  zero, subnormal, normal, infinite, quiet_nan, signaling_nan
};

FPSCOPE_HD constexpr bool is_nan(Format f, std::uint64_t bits) {
  const std::uint64_t magnitude = magnitude_of(f, bits);
  switch (f.flavour) {
    case Flavour::ieee: return magnitude > f.exponent_mask();
    case Flavour::ocp_fn: return magnitude == f.quiet_nan_bits();
    case Flavour::finite: return false;
    case Flavour::fnuz: return (bits & f.all_bits_mask()) == f.sign_mask();
  }
  return false;
}
FPSCOPE_HD constexpr bool is_signaling_nan(Format f, std::uint64_t bits) {
  return f.flavour == Flavour::ieee && is_nan(f, bits) && (bits & f.quiet_bit()) == 0;
}
FPSCOPE_HD constexpr bool is_infinite(Format f, std::uint64_t bits) {
  return f.flavour == Flavour::ieee && magnitude_of(f, bits) == f.exponent_mask();
}
FPSCOPE_HD constexpr bool is_zero(Format f, std::uint64_t bits) {
  return magnitude_of(f, bits) == 0 && !is_nan(f, bits);  // FNUZ's NaN has a zero magnitude
}
FPSCOPE_HD constexpr bool is_subnormal(Format f, std::uint64_t bits) {
  return biased_exponent_of(f, bits) == 0 && mantissa_of(f, bits) != 0;
}
FPSCOPE_HD constexpr bool is_finite(Format f, std::uint64_t bits) {
  return !is_nan(f, bits) && !is_infinite(f, bits);
}

FPSCOPE_HD constexpr FloatClass classify(Format f, std::uint64_t bits) {
  if (is_nan(f, bits)) return is_signaling_nan(f, bits) ? FloatClass::signaling_nan : FloatClass::quiet_nan;
  if (is_infinite(f, bits)) return FloatClass::infinite;
  if (is_zero(f, bits)) return FloatClass::zero;
  return biased_exponent_of(f, bits) == 0 ? FloatClass::subnormal : FloatClass::normal;
}

FPSCOPE_HD constexpr std::uint64_t infinity(Format f, bool sign) {
  return (sign ? f.sign_mask() : 0) | f.infinity_bits();
}
FPSCOPE_HD constexpr std::uint64_t max_finite(Format f, bool sign) {
  return (sign ? f.sign_mask() : 0) | f.max_finite_bits();
}
// A zero of that sign; +0 in formats without -0 (FNUZ).
FPSCOPE_HD constexpr std::uint64_t signed_zero(Format f, bool sign) {
  return sign && f.has_negative_zero() ? f.sign_mask() : 0;
}
// The sign bit of a nonzero result (signed_zero is for zeros: FNUZ has no -0).
FPSCOPE_HD constexpr std::uint64_t sign_bit(Format f, bool sign) {
  return sign ? f.sign_mask() : 0;
}

// A finite value as sign * significand * 2^exponent, exactly. Zero has significand 0.
struct Unpacked {
  bool sign = false;
  int exponent = 0;
  std::uint64_t significand = 0;
};

// Precondition: bits is finite (not NaN, not infinite).
FPSCOPE_HD constexpr Unpacked unpack_finite(Format f, std::uint64_t bits) {
  const std::uint64_t biased = biased_exponent_of(f, bits);
  const std::uint64_t mantissa = mantissa_of(f, bits);
  if (biased == 0) return {sign_of(f, bits), f.emin() - f.mantissa_bits, mantissa};
  return {sign_of(f, bits), static_cast<int>(biased) - f.bias() - f.mantissa_bits,
          mantissa | f.min_normal_bits()};
}

// Reads an operand under denormals-are-zero: a subnormal becomes a zero of the same sign.
FPSCOPE_HD inline std::uint64_t read_operand(Format f, std::uint64_t bits, const Context& ctx) {
  return ctx.denormals_are_zero && is_subnormal(f, bits) ? signed_zero(f, sign_of(f, bits)) : bits;
}

}  // namespace fpscope
