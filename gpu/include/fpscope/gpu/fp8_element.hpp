// One element of a per-tensor FP8 recipe's operand (gemm_recipe.hpp's quantize_fp8_operand), as
// FPSCOPE_HD code: the CUDA kernel runs it per thread and the host twin per element, and the tests
// hold it to quantize_fp8_operand, bit for bit and count for count. Also the operand's amax as the
// largest magnitude's float32 bits: the largest of those is the same in any order, NaN included.
#pragma once

#include <cstdint>

#include "fpscope/core/cast.hpp"
#include "fpscope/gpu/cast_outcome.hpp"

namespace fpscope {

// tensor_amax from the largest of the elements' magnitude_bits (hd.hpp; a NaN where any element is one).
FPSCOPE_HD inline float amax_of_magnitude_bits(std::uint32_t largest) { return bits_float(largest); }

// fl32(x * scale) as the CPU backend's float32 product makes it (scale finite and positive): x86
// returns a NaN operand quieted with its payload, which E5M2 keeps the top of, where CUDA's product
// returns its canonical NaN; a NaN is therefore carried here rather than multiplied, on every side.
FPSCOPE_HD inline std::uint32_t fp8_scaled_bits(float x, float scale) {
  const std::uint32_t bits = float_bits(x);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return bits | 0x00400000u;
  return float_bits(x * scale);
}

struct Fp8Element {
  std::uint32_t rounded = 0;  // float32 bits of the FP8 value
  bool zero = false;          // x was zero (before scaling)
  bool flushed = false;       // x * scale, nonzero and finite, became zero
  bool saturated = false;     // x * scale, finite, overflowed F and was held at its largest value
};

// Element `index` of an operand quantized by cast(fl32(x * scale)) (fp8_scaled_bits) into F with saturation in
// `Mode` (stochastic rounding draws word first_random + index), with what cast_and_record counts:
// flushed to zero, and overflowed -- for a result held at F's largest value from above, whether
// the same cast without saturation (the same word) overflows. `saturating`: the run's options,
// saturation on.
template <Format F, RoundingMode Mode>
FPSCOPE_HD inline Fp8Element fp8_quantize_element(float x, float scale, const CastOptions& saturating, std::uint64_t stochastic_seed,
                                                  std::uint64_t first_random, std::uint64_t index) {
  const std::uint32_t u = fp8_scaled_bits(x, scale);
  const std::uint64_t random = Mode == RoundingMode::stochastic ? stochastic_random(stochastic_seed, first_random + index) : 0;
  std::uint32_t flags = 0, widen_flags = 0;
  Fp8Element e;
  e.rounded = cast_to_f32<F>(cast_from_f32<F, Mode>(u, saturating, random, flags), saturating, widen_flags);
  e.zero = x == 0.0f;
  const CastOutcome outcome = classify_cast(F, u, e.rounded);
  e.flushed = outcome.flushed_to_zero;
  e.saturated = outcome.overflowed;
  if (outcome.reached_max_from_above) {
    CastOptions plain = saturating;
    plain.saturate = false;
    std::uint32_t plain_flags = 0;
    (void)cast_from_f32<F, Mode>(u, plain, random, plain_flags);
    e.saturated = (plain_flags & flag::overflow) != 0;
  }
  return e;
}

}  // namespace fpscope
