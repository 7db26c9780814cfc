// A float32 -> bfloat16 reference written for the tests: bfloat16 is the upper half of a float32
// with the same exponent range, so rounding is a decision on the lower 16 bits; tininess after
// rounding is decided in binary64 arithmetic.
#pragma once

#include <cmath>
#include <cstdint>

#include "fpscope/core/context.hpp"

namespace bf16_reference {

using fpscope::RoundingMode;
namespace flag = fpscope::flag;

constexpr RoundingMode modes[] = {RoundingMode::nearest_even, RoundingMode::nearest_away, RoundingMode::toward_zero,
                                  RoundingMode::toward_positive, RoundingMode::toward_negative, RoundingMode::odd};

inline bool rounds_up(RoundingMode mode, bool negative, std::uint32_t kept_lsb, std::uint32_t dropped, std::uint32_t half) {
  switch (mode) {
    case RoundingMode::nearest_even: return dropped > half || (dropped == half && kept_lsb != 0);
    case RoundingMode::nearest_away: return dropped >= half;
    case RoundingMode::toward_positive: return dropped != 0 && !negative;
    case RoundingMode::toward_negative: return dropped != 0 && negative;
    default: return false;
  }
}

struct Reference {
  std::uint32_t bits;
  std::uint8_t flags;
};

inline Reference reference_bf16(std::uint32_t u, RoundingMode mode) {
  const bool negative = (u >> 31) != 0;
  const std::uint32_t magnitude = u & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return {(u >> 16) | 0x0040u, (u & 0x00400000u) ? std::uint8_t{0} : flag::invalid};
  if (magnitude == 0x7F800000u) return {u >> 16, 0};
  const std::uint32_t upper = magnitude >> 16, lower = magnitude & 0xFFFFu;
  const bool inexact = lower != 0;
  std::uint32_t result = mode == RoundingMode::odd ? (upper | (inexact ? 1u : 0u))
                                                   : upper + (rounds_up(mode, negative, upper & 1, lower, 0x8000) ? 1u : 0u);
  std::uint8_t flags = inexact ? flag::inexact : 0;
  if (result >= 0x7F80u) flags |= flag::overflow;  // carried out of the largest binade: infinity
  if (magnitude < 0x00800000u && inexact) {
    // Tiny after rounding unless rounding to 8 significant bits, exponent unbounded, reaches 2^-126.
    const double value = std::ldexp(static_cast<double>(magnitude), -149);
    int exponent = 0;
    std::frexp(value, &exponent);  // value in [2^(exponent-1), 2^exponent)
    const double quantum = std::ldexp(1.0, exponent - 1 - 7);
    const double units = value / quantum;  // exact
    const double below = std::floor(units);
    const auto dropped = static_cast<std::uint32_t>((units - below) * 65536.0);  // 16 bits of fraction suffice
    double rounded = below + (rounds_up(mode, negative, static_cast<std::uint32_t>(below) & 1, dropped, 0x8000) ? 1 : 0);
    if (mode == RoundingMode::odd && units != below) rounded = below + ((static_cast<std::uint32_t>(below) & 1) ? 0 : 1);
    if (rounded * quantum < std::ldexp(1.0, -126)) flags |= flag::underflow;
  }
  return {result | (negative ? 0x8000u : 0u), flags};
}

}  // namespace bf16_reference
