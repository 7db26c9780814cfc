// A floating-point format as (exponent bits, mantissa bits, flavour), and every constant derived from it.
#pragma once

#include <cstdint>

#include "fpscope/core/hd.hpp"

namespace fpscope {

// IEEE: the all-ones exponent encodes infinities (mantissa 0) and NaNs (mantissa != 0); the
// mantissa's top bit set marks a quiet NaN.
// OCP FN ("finite, NaN"): no infinities; the all-ones exponent holds normal numbers, and only
// S.1…1.1…1 is NaN (OCP 8-bit Floating Point Specification, v1.0, 2023, section 5.3: E4M3).
// Finite: no infinities and no NaN; every encoding is a number, S.1…1.1…1 the largest (the OCP
// Microscaling Formats v1.0 element types FP6 E2M3, FP6 E3M2 and FP4 E2M1, section 5.3).
// A conversion saturates to ±max, as nothing else is left; a NaN becomes a zero of its sign.
// FNUZ ("finite, NaN, unsigned zero"; AMD's and GraphCore's FP8, ml_dtypes float8_e4m3fnuz and
// float8_e5m2fnuz): no infinities, no -0; the one NaN is the pattern of -0 (1.0…0.0…0), and the
// bias is one more than IEEE's (8 for E4M3, 16 for E5M2); all-ones is the largest number.
enum class Flavour : std::uint8_t { ieee, ocp_fn, finite, fnuz };

struct Format {
  int exponent_bits = 0;  // 2 ..= 11
  int mantissa_bits = 0;  // stored fraction bits, 1 ..= 52 (the hidden bit is not counted)
  Flavour flavour = Flavour::ieee;
  // Added to the flavour's usual bias: GraphCore's float8_e4m3b11fnuz (ml_dtypes) is E4M3 FNUZ
  // with bias 11, 3 above FNUZ's 8. 0 for every standard format.
  int bias_offset = 0;

  // Bit layout ------------------------------------------------------------------------------
  FPSCOPE_HD constexpr int width() const { return 1 + exponent_bits + mantissa_bits; }
  FPSCOPE_HD constexpr std::uint64_t mantissa_mask() const {
    return (std::uint64_t{1} << mantissa_bits) - 1;
  }
  FPSCOPE_HD constexpr std::uint64_t max_biased_exponent() const {  // the all-ones field
    return (std::uint64_t{1} << exponent_bits) - 1;
  }
  FPSCOPE_HD constexpr std::uint64_t exponent_mask() const {
    return max_biased_exponent() << mantissa_bits;
  }
  FPSCOPE_HD constexpr std::uint64_t sign_mask() const {
    return std::uint64_t{1} << (exponent_bits + mantissa_bits);
  }
  FPSCOPE_HD constexpr std::uint64_t magnitude_mask() const { return sign_mask() - 1; }
  FPSCOPE_HD constexpr std::uint64_t all_bits_mask() const {
    return width() == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width()) - 1;
  }
  FPSCOPE_HD constexpr std::uint64_t quiet_bit() const {
    return std::uint64_t{1} << (mantissa_bits - 1);
  }

  // Exponent range ----------------------------------------------------------------------------
  FPSCOPE_HD constexpr int bias() const {
    return (1 << (exponent_bits - 1)) - (flavour == Flavour::fnuz ? 0 : 1) + bias_offset;
  }
  FPSCOPE_HD constexpr int emin() const { return 1 - bias(); }
  FPSCOPE_HD constexpr int emax() const {
    const int top = static_cast<int>(max_biased_exponent());
    return (flavour == Flavour::ieee ? top - 1 : top) - bias();
  }
  FPSCOPE_HD constexpr bool has_infinity() const { return flavour == Flavour::ieee; }
  FPSCOPE_HD constexpr bool has_nan() const { return flavour != Flavour::finite; }
  FPSCOPE_HD constexpr bool has_negative_zero() const { return flavour != Flavour::fnuz; }

  // Encodings of the extreme values (magnitude bits, sign clear) ------------------------------
  // Largest finite: IEEE S.1…10.1…1; OCP FN S.1…1.1…10 (all ones is NaN); finite and FNUZ
  // S.1…1.1…1.
  FPSCOPE_HD constexpr std::uint64_t max_finite_bits() const {
    return flavour == Flavour::ieee     ? exponent_mask() - 1
           : flavour == Flavour::ocp_fn ? exponent_mask() | (mantissa_mask() - 1)
                                        : exponent_mask() | mantissa_mask();
  }
  FPSCOPE_HD constexpr std::uint64_t min_normal_bits() const {
    return std::uint64_t{1} << mantissa_bits;
  }
  FPSCOPE_HD constexpr std::uint64_t min_subnormal_bits() const { return 1; }
  FPSCOPE_HD constexpr std::uint64_t infinity_bits() const { return exponent_mask(); }  // IEEE only
  // The quiet NaN with an empty payload (IEEE) or the only NaN (FN, sign clear; FNUZ, the
  // pattern of -0). A finite format has none: callers check has_nan() first.
  FPSCOPE_HD constexpr std::uint64_t quiet_nan_bits() const {
    return flavour == Flavour::ieee     ? exponent_mask() | quiet_bit()
           : flavour == Flavour::ocp_fn ? exponent_mask() | mantissa_mask()
           : flavour == Flavour::fnuz   ? sign_mask()
                                        : 0;
  }

  // Values as powers of two: max = (2 - 2^-m') * 2^emax where m' counts the mantissa of max.
  FPSCOPE_HD constexpr int min_normal_exponent() const { return emin(); }                    // 2^emin
  FPSCOPE_HD constexpr int min_subnormal_exponent() const { return emin() - mantissa_bits; }  // 2^(emin-m)
  FPSCOPE_HD constexpr int epsilon_exponent() const { return -mantissa_bits; }  // 2^-m, ulp(1)

  // Number of finite encodings, counting +0 and -0 separately (FNUZ has one zero).
  FPSCOPE_HD constexpr std::uint64_t finite_count() const {
    const std::uint64_t all_per_sign = (max_biased_exponent() + 1) * (mantissa_mask() + 1);
    switch (flavour) {
      case Flavour::ieee: return 2 * (max_biased_exponent() << mantissa_bits);
      case Flavour::ocp_fn: return 2 * (all_per_sign - 1);
      case Flavour::finite: return 2 * all_per_sign;
      case Flavour::fnuz: return 2 * all_per_sign - 1;
    }
    return 0;
  }

  FPSCOPE_HD constexpr bool valid() const {
    return exponent_bits >= 2 && exponent_bits <= 11 && mantissa_bits >= 1 &&
           mantissa_bits <= 52 && width() <= 64 &&
           !(flavour == Flavour::ocp_fn && exponent_bits + mantissa_bits < 3) &&
           !(flavour != Flavour::ieee && flavour != Flavour::ocp_fn && exponent_bits > 8) &&  // finite, FNUZ: the narrow formats
           bias_offset >= -8 && bias_offset <= 8 && emin() - mantissa_bits >= -1074 && emax() <= 1023;
  }

  friend constexpr bool operator==(const Format&, const Format&) = default;
};

namespace formats {
inline constexpr Format fp16{5, 10, Flavour::ieee};   // IEEE 754 binary16
inline constexpr Format bf16{8, 7, Flavour::ieee};    // bfloat16
inline constexpr Format fp32{8, 23, Flavour::ieee};   // IEEE 754 binary32
inline constexpr Format fp64{11, 52, Flavour::ieee};  // IEEE 754 binary64
inline constexpr Format tf32{8, 10, Flavour::ieee};   // NVIDIA TensorFloat-32 (19 bits)
inline constexpr Format e4m3{4, 3, Flavour::ocp_fn};  // OCP FP8 E4M3 (FN: no inf, max 448)
inline constexpr Format e5m2{5, 2, Flavour::ieee};    // OCP FP8 E5M2 (IEEE-like)
inline constexpr Format e2m1{2, 1, Flavour::finite};  // OCP MX FP4 E2M1 (max 6, no inf, no NaN)
inline constexpr Format e2m3{2, 3, Flavour::finite};  // OCP MX FP6 E2M3 (max 7.5)
inline constexpr Format e3m2{3, 2, Flavour::finite};  // OCP MX FP6 E3M2 (max 28)
inline constexpr Format e4m3fnuz{4, 3, Flavour::fnuz};  // AMD / GraphCore FP8 E4M3 (bias 8, max 240)
inline constexpr Format e5m2fnuz{5, 2, Flavour::fnuz};  // AMD / GraphCore FP8 E5M2 (bias 16, max 57344)
inline constexpr Format e4m3b11fnuz{4, 3, Flavour::fnuz, 3};  // GraphCore FP8 E4M3 with bias 11 (max 30)
inline constexpr Format e3m4{3, 4, Flavour::ieee};            // IEEE-style FP8 E3M4 (ml_dtypes float8_e3m4, max 15.5)
}  // namespace formats

}  // namespace fpscope
