// One element of the CUDA backend's recorded cast, as FPSCOPE_HD code: the kernel runs it per
// thread, and the CPU tests run it per element against cast_and_record (its CPU twin), so the
// device's values, histogram slots and outcome counts are the host's, bit for bit.
#pragma once

#include <cstdint>

#include "fpscope/core/cast.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/gpu/cast_outcome.hpp"

namespace fpscope {

struct CastRecordElement {
  std::uint32_t narrow = 0;   // the value after the cast, in the format's own bits
  std::uint32_t rounded = 0;  // float32 bits of the value after the cast, widened back
  int slot = 0;               // histogram_slot_of_f32 of the value before it
  bool flushed_to_zero = false, made_subnormal = false, overflowed = false;
};

// Element `index` of a cast whose first random word is `first_random` (stochastic rounding draws
// stochastic_random(seed, first_random + index), as round_f32 does from ctx.stochastic_counter).
template <Format F, RoundingMode Mode>
FPSCOPE_HD inline CastRecordElement cast_record_element(std::uint32_t u, std::uint64_t stochastic_seed, std::uint64_t first_random,
                                                        std::uint64_t index) {
  const CastOptions options{};
  std::uint32_t flags = 0, widen_flags = 0;
  const std::uint64_t random = Mode == RoundingMode::stochastic ? stochastic_random(stochastic_seed, first_random + index) : 0;
  CastRecordElement e;
  e.narrow = cast_from_f32<F, Mode>(u, options, random, flags);
  e.rounded = cast_to_f32<F>(e.narrow, options, widen_flags);
  e.slot = histogram_slot_of_f32(u);
  const CastOutcome outcome = classify_cast(F, u, e.rounded);
  e.flushed_to_zero = outcome.flushed_to_zero;
  e.made_subnormal = outcome.made_subnormal;
  // From the cast's own flag: it also covers results that reached ±max from above, which
  // classify_cast leaves to its caller.
  e.overflowed = (flags & flag::overflow) != 0;
  return e;
}

}  // namespace fpscope
