// Exhaustive: all 2^32 float32 -> bfloat16 in six modes (nearest even, nearest away, toward zero,
// up, down, odd), bits and flags, against a reference written here for the test: bfloat16 is
// the upper half of a float32 with the same exponent range, so rounding is a decision on the
// lower 16 bits; tininess after rounding is decided in binary64 arithmetic.
#include <cmath>
#include <cstdio>

#include "fpscope/core/cast.hpp"
#include "fpscope/core/convert.hpp"
#include "sweep.hpp"

using namespace fpscope;

namespace {

constexpr RoundingMode modes[] = {RoundingMode::nearest_even, RoundingMode::nearest_away, RoundingMode::toward_zero,
                                  RoundingMode::toward_positive, RoundingMode::toward_negative, RoundingMode::odd};

bool rounds_up(RoundingMode mode, bool negative, std::uint32_t kept_lsb, std::uint32_t dropped, std::uint32_t half) {
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

Reference reference_bf16(std::uint32_t u, RoundingMode mode) {
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

template <RoundingMode Mode>
std::uint64_t sweep_mode(std::uint64_t first, std::uint64_t last) {
  std::uint64_t mismatches = 0;
  const CastOptions options{};
  for (std::uint64_t i = first; i < last; ++i) {
    const auto x = static_cast<std::uint32_t>(i);
    const Reference expected = reference_bf16(x, Mode);
    Context ctx;
    ctx.rounding = Mode;
    const std::uint64_t general = convert(formats::fp32, formats::bf16, x, ctx);
    std::uint32_t kernel_flags = 0;
    const std::uint32_t kernel = cast_from_f32<formats::bf16, Mode>(x, options, 0, kernel_flags);
    if (general != expected.bits || ctx.flags != expected.flags || kernel != expected.bits || kernel_flags != expected.flags) {
      if (++mismatches <= 3) {
        std::lock_guard lock(sweep::print_lock());
        std::printf("MISMATCH mode %d input %08X: reference %04X/%02X general %04llX/%02X kernel %04X/%02X\n",
                    static_cast<int>(Mode), x, expected.bits, expected.flags, static_cast<unsigned long long>(general),
                    ctx.flags, kernel, kernel_flags);
      }
    }
  }
  return mismatches;
}

}  // namespace

int main() {
  std::uint64_t (*bodies[])(std::uint64_t, std::uint64_t) = {
      sweep_mode<modes[0]>, sweep_mode<modes[1]>, sweep_mode<modes[2]>, sweep_mode<modes[3]>, sweep_mode<modes[4]>, sweep_mode<modes[5]>};
  const char* names[] = {"rne", "rna", "rz", "ru", "rd", "odd"};
  std::uint64_t total = 0, bad = 0;
  for (int m = 0; m < 6; ++m) {
    const sweep::Result r = sweep::run(std::uint64_t{1} << 32, bodies[m]);
    std::printf("f32->bf16 %s: 4294967296 inputs, %llu mismatches (%.1f s)\n", names[m],
                static_cast<unsigned long long>(r.mismatches), r.seconds);
    std::fflush(stdout);
    total += std::uint64_t{1} << 32;
    bad += r.mismatches;
  }
  std::printf("%llu passed, %llu failed\n", static_cast<unsigned long long>(total - bad), static_cast<unsigned long long>(bad));
  return bad == 0 ? 0 : 1;
}
