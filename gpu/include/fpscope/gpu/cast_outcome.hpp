// What one element's cast did, from its float32 bits before and after: flushed to zero, made
// subnormal, overflowed. FPSCOPE_HD and free of host-only headers, so the CPU backend's
// cast_and_record and the CUDA kernel (through cast_record_element) apply the same rule.
#pragma once

#include <cstdint>

#include "fpscope/core/format.hpp"
#include "fpscope/core/hd.hpp"

namespace fpscope {

struct CastOutcome {
  bool flushed_to_zero = false;  // a nonzero finite value became zero
  bool made_subnormal = false;   // the result is subnormal in the format
  bool overflowed = false;       // a finite value became infinite or NaN
  // The result is ±max from a larger input: an overflow under saturation, or plain rounding
  // down to max; which one depends on the rounding mode, so the caller decides (rare).
  bool reached_max_from_above = false;
};

// The float32 bit patterns of a format's smallest normal and largest finite magnitude (exact in
// float32 for every format at most as wide): the edges classify_cast and cast_and_record's
// vectorised counting compare magnitudes' bits against.
FPSCOPE_HD inline std::uint32_t f32_bits_of_min_normal(Format f) { return static_cast<std::uint32_t>(f.emin() + 127) << 23; }
FPSCOPE_HD inline std::uint32_t f32_bits_of_max_finite(Format f) {
  const std::uint64_t max_bits = f.max_finite_bits();
  const int max_exponent = static_cast<int>(max_bits >> f.mantissa_bits) - f.bias();
  const auto max_mantissa = static_cast<std::uint32_t>(max_bits & f.mantissa_mask());
  return (static_cast<std::uint32_t>(max_exponent + 127) << 23) | (max_mantissa << (23 - f.mantissa_bits));
}

// The outcome for one element, from its float32 bits before the cast and the float32 bits of
// the value it was rounded to (exact in float32 for every format at most as wide).
FPSCOPE_HD inline CastOutcome classify_cast(Format f, std::uint32_t before, std::uint32_t after) {
  const std::uint32_t in = before & 0x7FFFFFFFu, out = after & 0x7FFFFFFFu;
  const bool finite_in = in < 0x7F800000u;
  CastOutcome outcome;
  outcome.flushed_to_zero = finite_in && in != 0 && out == 0;
  outcome.made_subnormal = out != 0 && out < f32_bits_of_min_normal(f);  // magnitudes order like their bits
  const bool non_finite_out = out >= 0x7F800000u;
  // Saturation: the result is the largest finite value while the input was above it.
  const std::uint32_t max32 = f32_bits_of_max_finite(f);
  outcome.overflowed = finite_in && non_finite_out;
  outcome.reached_max_from_above = finite_in && out == max32 && in > max32;
  return outcome;
}

}  // namespace fpscope
