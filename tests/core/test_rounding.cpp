// Rounding at every edge: modes, overflow thresholds, tininess, flush-to-zero, saturation, stochastic.
#include <doctest/doctest.h>

#include <cmath>

#include "fpscope/core/convert.hpp"
#include "fpscope/core/decimal.hpp"

using namespace fpscope;

namespace {
struct Rounded {
  std::uint64_t bits;
  std::uint8_t flags;
};
Rounded round_to(const Format& f, const char* text, RoundingMode mode = RoundingMode::nearest_even,
                 Tininess tininess = Tininess::after_rounding, bool ftz = false, bool saturate = false) {
  Context ctx;
  ctx.rounding = mode;
  ctx.tininess = tininess;
  ctx.flush_to_zero = ftz;
  ctx.saturate = saturate;
  const std::uint64_t bits = round_number(f, parse_number(text), ctx);
  return {bits, ctx.flags};
}
constexpr auto rne = RoundingMode::nearest_even;
constexpr auto rna = RoundingMode::nearest_away;
constexpr auto rz = RoundingMode::toward_zero;
constexpr auto ru = RoundingMode::toward_positive;
constexpr auto rd = RoundingMode::toward_negative;
constexpr auto odd = RoundingMode::odd;
}  // namespace

TEST_CASE("fp16 overflow threshold: 65504 + half an ulp") {
  CHECK(round_to(formats::fp16, "65504").bits == 0x7BFF);
  CHECK(round_to(formats::fp16, "65504").flags == 0);
  CHECK(round_to(formats::fp16, "65519.999").bits == 0x7BFF);
  CHECK(round_to(formats::fp16, "65519.999").flags == flag::inexact);
  const Rounded tie = round_to(formats::fp16, "65520");  // ties to even: the even neighbour is 2^16
  CHECK(tie.bits == 0x7C00);
  CHECK(tie.flags == (flag::overflow | flag::inexact));
  CHECK(round_to(formats::fp16, "-65520").bits == 0xFC00);
  // Toward zero 65520 rounds to 65504: not an overflow, since the rounded value is finite.
  CHECK(round_to(formats::fp16, "65520", rz).bits == 0x7BFF);
  CHECK(round_to(formats::fp16, "65520", rz).flags == flag::inexact);
  CHECK(round_to(formats::fp16, "65536", rz).bits == 0x7BFF);
  CHECK(round_to(formats::fp16, "65536", rz).flags == (flag::overflow | flag::inexact));
  CHECK(round_to(formats::fp16, "65505", ru).bits == 0x7C00);
  CHECK(round_to(formats::fp16, "-65505", ru).bits == 0xFBFF);
  CHECK(round_to(formats::fp16, "1e10", rd).bits == 0x7BFF);
  CHECK(round_to(formats::fp16, "1e10", odd).bits == 0x7BFF);
  CHECK(round_to(formats::fp16, "1e10", odd).flags == (flag::overflow | flag::inexact));
}

TEST_CASE("fp16 subnormals: 2^-24 and the tie at 2^-25") {
  CHECK(round_to(formats::fp16, "5.96e-8").bits == 0x0001);
  CHECK(round_to(formats::fp16, "5.96e-8").flags == (flag::underflow | flag::inexact));
  CHECK(round_to(formats::fp16, "5.9604644775390625e-8").bits == 0x0001);  // exactly 2^-24
  CHECK(round_to(formats::fp16, "5.9604644775390625e-8").flags == 0);       // exact: no underflow
  CHECK(round_to(formats::fp16, "2.98023223876953125e-8").bits == 0x0000);  // 2^-25: tie to even 0
  CHECK(round_to(formats::fp16, "2.98023223876953125e-8", rna).bits == 0x0001);
  CHECK(round_to(formats::fp16, "2.98023223876953126e-8").bits == 0x0001);
  CHECK(round_to(formats::fp16, "1e-30").bits == 0x0000);
  CHECK(round_to(formats::fp16, "1e-30", ru).bits == 0x0001);
  CHECK(round_to(formats::fp16, "-1e-30", rd).bits == 0x8001);
  CHECK(round_to(formats::fp16, "-1e-30").bits == 0x8000);
  CHECK(round_to(formats::fp16, "1e-30", odd).bits == 0x0001);
}

TEST_CASE("tininess after rounding versus before rounding") {
  // 2^-14 * (1 - 2^-12): below the smallest normal, but rounds to it with an unbounded exponent.
  const char* just_below = "0x1.ffep-15";
  const Rounded after = round_to(formats::fp16, just_below, rne, Tininess::after_rounding);
  const Rounded before = round_to(formats::fp16, just_below, rne, Tininess::before_rounding);
  CHECK(after.bits == 0x0400);
  CHECK(before.bits == 0x0400);
  CHECK(after.flags == flag::inexact);
  CHECK(before.flags == (flag::underflow | flag::inexact));
  // Slightly lower: tiny under both rules.
  CHECK(round_to(formats::fp16, "0x1.ffcp-15", rne, Tininess::after_rounding).flags == (flag::underflow | flag::inexact));
  // Toward zero never rounds up into the normal range.
  CHECK(round_to(formats::fp16, just_below, rz, Tininess::after_rounding).flags == (flag::underflow | flag::inexact));
  CHECK(round_to(formats::fp16, just_below, rz).bits == 0x03FF);
}

TEST_CASE("flush to zero and denormals are zero") {
  const Rounded flushed = round_to(formats::fp16, "5.9604644775390625e-8", rne, Tininess::after_rounding, true);
  CHECK(flushed.bits == 0x0000);
  CHECK(flushed.flags == (flag::underflow | flag::inexact));
  CHECK(round_to(formats::fp16, "-1e-6", rne, Tininess::after_rounding, true).bits == 0x8000);
  // A value that rounds up to the smallest normal is not tiny (after rounding): kept.
  CHECK(round_to(formats::fp16, "0x1.ffep-15", rne, Tininess::after_rounding, true).bits == 0x0400);
  Context daz;
  daz.denormals_are_zero = true;
  CHECK(convert(formats::fp16, formats::fp32, 0x0001, daz) == 0x00000000);
  CHECK(convert(formats::fp16, formats::fp32, 0x8200, daz) == 0x80000000);
  CHECK(daz.flags == 0);
}

TEST_CASE("OCP FP8: E4M3 has no infinity, E5M2 does; saturation") {
  CHECK(round_to(formats::e4m3, "448").bits == 0x7E);
  CHECK(round_to(formats::e4m3, "464").bits == 0x7E);  // tie between 448 and 480: even is 448
  CHECK(round_to(formats::e4m3, "464").flags == flag::inexact);
  const Rounded over = round_to(formats::e4m3, "465");
  CHECK(over.bits == 0x7F);  // NaN: E4M3FN has no infinity
  CHECK(over.flags == (flag::overflow | flag::inexact));
  CHECK(round_to(formats::e4m3, "-1000").bits == 0xFF);
  CHECK(round_to(formats::e4m3, "1000", rne, Tininess::after_rounding, false, true).bits == 0x7E);
  CHECK(round_to(formats::e4m3, "-1000", rne, Tininess::after_rounding, false, true).bits == 0xFE);
  CHECK(round_to(formats::e4m3, "0.001953125").bits == 0x01);  // 2^-9
  CHECK(round_to(formats::e5m2, "57344").bits == 0x7B);
  CHECK(round_to(formats::e5m2, "61440").bits == 0x7C);  // tie to even: infinity
  CHECK(round_to(formats::e5m2, "61440", rne, Tininess::after_rounding, false, true).bits == 0x7B);
  Context ctx;
  CHECK(convert(formats::fp32, formats::e4m3, 0x7F800000, ctx) == 0x7F);  // +inf -> NaN, invalid
  CHECK(ctx.flags == flag::invalid);
  Context sat;
  sat.saturate = true;
  CHECK(convert(formats::fp32, formats::e4m3, 0xFF800000, sat) == 0xFE);
  CHECK(convert(formats::fp32, formats::e5m2, 0x7F800000, sat) == 0x7B);
  CHECK(sat.flags == 0);
}

TEST_CASE("every mode on the four neighbours of a tie") {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10 in fp16; 1 + 3*2^-11 halfway between the next two.
  struct Case { const char* text; RoundingMode mode; std::uint64_t bits; };
  const Case cases[] = {
      {"0x1.002p0", rne, 0x3C00}, {"0x1.002p0", rna, 0x3C01}, {"0x1.002p0", rz, 0x3C00}, {"0x1.002p0", ru, 0x3C01},
      {"0x1.002p0", rd, 0x3C00}, {"0x1.002p0", odd, 0x3C01}, {"0x1.006p0", rne, 0x3C02}, {"0x1.006p0", rna, 0x3C02},
      {"0x1.006p0", odd, 0x3C01}, {"-0x1.002p0", rd, 0xBC01}, {"-0x1.002p0", ru, 0xBC00}, {"-0x1.002p0", rna, 0xBC01},
      {"0x1.004p0", odd, 0x3C01},  // exact: odd mode leaves exact values alone
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    CAPTURE(static_cast<int>(c.mode));
    CHECK(round_to(formats::fp16, c.text, c.mode).bits == c.bits);
  }
}

TEST_CASE("round to odd then round to nearest equals direct rounding (p >= q + 2)") {
  // Boldo and Melquiond 2008: rounding to odd at 24 bits and then to nearest at 11 bits is
  // the correct rounding at 11 bits. Checked on binary32 -> fp16 for many decimal inputs.
  for (int i = 1; i < 4000; ++i) {
    const std::string text = std::to_string(i) + ".000" + std::to_string(i * 7919 % 1000) + "3e-3";
    Context direct, via_odd, second;
    via_odd.rounding = RoundingMode::odd;
    const std::uint64_t expected = round_number(formats::fp16, parse_number(text), direct);
    const std::uint64_t odd32 = round_number(formats::fp32, parse_number(text), via_odd);
    CHECK(convert(formats::fp32, formats::fp16, odd32, second) == expected);
  }
}

TEST_CASE("stochastic rounding is reproducible and unbiased") {
  Context a, b;
  a.rounding = b.rounding = RoundingMode::stochastic;
  a.stochastic_seed = b.stochastic_seed = 42;
  // 1 + 2^-12 is a quarter of the way from 1 to 1 + 2^-10 in fp16.
  const std::uint64_t quarter = 0x3F800800;  // float32 bits of 1 + 2^-12
  int up = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const std::uint64_t x = convert(formats::fp32, formats::fp16, quarter, a);
    CHECK(x == convert(formats::fp32, formats::fp16, quarter, b));
    REQUIRE((x == 0x3C00 || x == 0x3C01));
    up += x == 0x3C01 ? 1 : 0;
  }
  // Binomial(n, 1/4): standard deviation ~194; 6 sigma.
  CHECK(std::abs(up - n / 4) < 1200);
  Context other = a;
  other.stochastic_seed = 7;
  other.stochastic_counter = 0;
  a.stochastic_counter = 0;
  int differences = 0;
  for (int i = 0; i < 1000; ++i)
    differences += convert(formats::fp32, formats::fp16, quarter, a) != convert(formats::fp32, formats::fp16, quarter, other);
  CHECK(differences > 100);  // another seed, another stream
  // Exact values never move.
  Context exact = a;
  CHECK(convert(formats::fp32, formats::fp16, 0x3F800000, exact) == 0x3C00);
}
