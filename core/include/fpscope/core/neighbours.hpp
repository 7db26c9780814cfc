// The next representable value up and down (IEEE nextUp / nextDown), and the ulp of a value.
#pragma once

#include <cstdint>

#include "fpscope/core/bits.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/core/hd.hpp"

namespace fpscope {

// nextUp: the least value of f that compares greater. NaN gives the quiet NaN; +inf stays;
// -inf gives -max; ±0 give the smallest positive subnormal. Above max there is nothing in a
// format without infinity: nextUp(max) is NaN (OCP FN, FNUZ), or max itself in a finite format.
FPSCOPE_HD constexpr std::uint64_t next_up(Format f, std::uint64_t bits) {
  if (is_nan(f, bits)) return bits | (f.flavour == Flavour::ieee ? f.quiet_bit() : 0);
  const bool negative = sign_of(f, bits);
  const std::uint64_t magnitude = magnitude_of(f, bits);
  if (magnitude == 0) return f.min_subnormal_bits();
  if (negative) return magnitude == 1 ? signed_zero(f, true) : bits - 1;  // toward zero; -inf - 1 is -max
  if (is_infinite(f, bits)) return bits;
  if (!f.has_infinity() && magnitude == f.max_finite_bits()) return f.has_nan() ? f.quiet_nan_bits() : bits;
  return bits + 1;  // max + 1 is +inf in IEEE formats
}

// nextDown(x) = -nextUp(-x); ±0 give the smallest negative subnormal.
FPSCOPE_HD constexpr std::uint64_t next_down(Format f, std::uint64_t bits) {
  if (is_nan(f, bits)) return next_up(f, bits);
  if (is_zero(f, bits)) return f.sign_mask() | f.min_subnormal_bits();
  const std::uint64_t up = next_up(f, bits ^ f.sign_mask());  // -x is nonzero: negating it is a sign flip
  if (is_nan(f, up)) return up;                           // nothing below -max (OCP FN, FNUZ)
  if (is_zero(f, up)) return signed_zero(f, false);       // nextDown(min subnormal) = +0
  return up ^ f.sign_mask();
}

// The exponent k of ulp(x) = 2^k: the spacing of f's values in x's binade (for subnormals and
// zero, the subnormal spacing 2^(emin - m)). Precondition: x finite.
FPSCOPE_HD constexpr int ulp_exponent(Format f, std::uint64_t bits) {
  const std::uint64_t biased = biased_exponent_of(f, bits);
  const int binade = biased == 0 ? f.emin() : static_cast<int>(biased) - f.bias();
  return binade - f.mantissa_bits;
}

}  // namespace fpscope
