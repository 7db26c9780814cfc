// Rounding modes, exception flags and the explicit context object every operation reads and updates.
#pragma once

#include <cstdint>

#include "fpscope/core/hd.hpp"

namespace fpscope {

enum class RoundingMode : std::uint8_t {
  nearest_even,     // IEEE roundTiesToEven (default)
  nearest_away,     // IEEE roundTiesToAway
  toward_zero,      // IEEE roundTowardZero (truncate)
  toward_positive,  // IEEE roundTowardPositive
  toward_negative,  // IEEE roundTowardNegative
  odd,              // round to odd (von Neumann jamming): inexact results get an odd last bit
  stochastic,       // round up with probability equal to the discarded fraction of an ulp
};

inline constexpr int rounding_mode_count = 7;
inline constexpr RoundingMode all_rounding_modes[] = {RoundingMode::nearest_even, RoundingMode::nearest_away, RoundingMode::toward_zero,
                                                      RoundingMode::toward_positive, RoundingMode::toward_negative, RoundingMode::odd,
                                                      RoundingMode::stochastic};
// The modes that round a number deterministically (all but stochastic).
inline constexpr RoundingMode deterministic_rounding_modes[] = {RoundingMode::nearest_even, RoundingMode::nearest_away,
                                                                RoundingMode::toward_zero, RoundingMode::toward_positive,
                                                                RoundingMode::toward_negative, RoundingMode::odd};

// When an underflow is detected (IEEE 754-2019 7.5): after rounding (x86, RISC-V, ARM) or
// before rounding.
enum class Tininess : std::uint8_t { after_rounding, before_rounding };

// Exception flags. The bit values are Berkeley TestFloat's, so flag sets compare directly.
namespace flag {
inline constexpr std::uint8_t inexact = 0x01;
inline constexpr std::uint8_t underflow = 0x02;
inline constexpr std::uint8_t overflow = 0x04;
inline constexpr std::uint8_t infinite = 0x08;  // divide by zero
inline constexpr std::uint8_t invalid = 0x10;
inline constexpr std::uint8_t all = 0x1F;
}  // namespace flag

// What an invalid conversion to an integer returns (NaN, or out of range).
enum class InvalidIntegerPolicy : std::uint8_t {
  x86,     // the "integer indefinite": the most negative value for every invalid case
  riscv,   // saturate: NaN and +overflow -> max, -overflow -> min
};

// Platform conventions for NaNs and invalid integer results.
struct Platform {
  bool default_nan_negative = true;  // x86: default NaN has the sign bit set (fp16 0xFE00)
  bool propagate_nan_payload = true;  // x86: an operand NaN's payload is carried, quieted
  InvalidIntegerPolicy invalid_integer = InvalidIntegerPolicy::x86;
};

inline constexpr Platform platform_x86{true, true, InvalidIntegerPolicy::x86};
inline constexpr Platform platform_riscv{false, false, InvalidIntegerPolicy::riscv};  // 0x7E00

// All the state an operation needs besides its operands: no globals, so the same code runs
// in device code. Flags are sticky: operations only ever set bits in `flags`.
struct Context {
  RoundingMode rounding = RoundingMode::nearest_even;
  Tininess tininess = Tininess::after_rounding;
  bool flush_to_zero = false;       // tiny results become a signed zero (raises underflow, inexact)
  bool denormals_are_zero = false;  // subnormal operands are read as a signed zero
  bool saturate = false;            // overflow gives ±max finite (OCP FP8 "SAT" conversions)
  Platform platform = platform_x86;
  std::uint8_t flags = 0;
  // Stochastic rounding: a reproducible stream of random words (counter-based, see next_random).
  std::uint64_t stochastic_seed = 0;
  std::uint64_t stochastic_counter = 0;

  FPSCOPE_HD void raise(std::uint8_t raised) { flags = static_cast<std::uint8_t>(flags | raised); }
  FPSCOPE_HD bool test(std::uint8_t f) const { return (flags & f) != 0; }
  FPSCOPE_HD void clear_flags() { flags = 0; }
  FPSCOPE_HD std::uint64_t next_random();
};

// SplitMix64's finaliser (Steele, Lea, Flood 2014): a strong 64-bit mix. Random word number
// `index` of stream `seed` is mix(seed, index), so any element of a bulk array (or a GPU
// thread) can draw its word without shared state, and the result never depends on scheduling.
FPSCOPE_HD inline std::uint64_t stochastic_random(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

FPSCOPE_HD inline std::uint64_t Context::next_random() {
  return stochastic_random(stochastic_seed, stochastic_counter++);
}

}  // namespace fpscope
