// NaNs, infinities, signed zeros, integers, comparisons, min/max and neighbours.
#include <doctest/doctest.h>

#include "fpscope/core/arithmetic.hpp"
#include "fpscope/core/compare.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/integral.hpp"
#include "fpscope/core/neighbours.hpp"

using namespace fpscope;

namespace {
constexpr Format h = formats::fp16;
constexpr std::uint64_t one = 0x3C00, two = 0x4000, inf = 0x7C00, ninf = 0xFC00, qnan = 0x7E00, snan = 0x7D00;
}  // namespace

TEST_CASE("invalid operations give the platform's default NaN") {
  Context x86;
  CHECK(add(h, inf, ninf, x86) == 0xFE00);  // x86: sign set
  CHECK(x86.flags == flag::invalid);
  Context riscv;
  riscv.platform = platform_riscv;
  CHECK(mul(h, 0x0000, inf, riscv) == 0x7E00);
  CHECK(riscv.flags == flag::invalid);
  Context ctx;
  CHECK(div(h, 0x0000, 0x8000, ctx) == 0xFE00);
  CHECK(fpscope::sqrt(h, 0xBC00, ctx) == 0xFE00);
  CHECK(ctx.flags == flag::invalid);
}

TEST_CASE("NaN operands propagate quieted; signalling ones raise invalid") {
  Context ctx;
  CHECK(add(h, 0x7E05, one, ctx) == 0x7E05);
  CHECK(ctx.flags == 0);
  CHECK(add(h, one, 0xFD05, ctx) == 0xFF05);  // quieted, sign and payload kept
  CHECK(ctx.flags == flag::invalid);
  Context first;
  CHECK(mul(h, 0x7E01, 0x7E02, first) == 0x7E01);  // x86 SSE: the first operand's NaN
  Context riscv;
  riscv.platform = platform_riscv;
  CHECK(mul(h, 0x7E01, 0x7E02, riscv) == 0x7E00);  // RISC-V: canonical NaN
  Context conversion;
  CHECK(convert(formats::fp32, h, 0x7F800001, conversion) == 0x7E00);  // payload below fp16's bits
  CHECK(conversion.flags == flag::invalid);
  CHECK(convert(h, formats::fp32, 0x7E01, conversion) == 0x7FC02000);
}

TEST_CASE("fused multiply-add: 0 * inf is invalid even with a quiet NaN addend") {
  Context ctx;
  CHECK(is_nan(h, fma(h, 0x0000, inf, qnan, ctx)));
  CHECK(ctx.flags == flag::invalid);
  Context ctx2;
  CHECK(fma(h, inf, one, ninf, ctx2) == 0xFE00);
  CHECK(ctx2.flags == flag::invalid);
  Context ctx3;
  // (2^-24)(2^-1) + 0: the product alone underflows to zero in fp16 (tie to even); fused, the same.
  CHECK(fma(h, 0x0001, 0x3800, 0x0000, ctx3) == 0x0000);
  CHECK(ctx3.flags == (flag::underflow | flag::inexact));
  // A case where fusing matters: (1 + 2^-10)^2 - (1 + 2^-9) = 2^-20 exactly (a subnormal);
  // unfused, the product rounds to 1 + 2^-9 and the difference is 0.
  Context ctx4;
  CHECK(fma(h, 0x3C01, 0x3C01, 0xBC02, ctx4) == 0x0010);
  CHECK(ctx4.flags == 0);
}

TEST_CASE("signed zeros") {
  Context ctx;
  CHECK(sub(h, one, one, ctx) == 0x0000);
  ctx.rounding = RoundingMode::toward_negative;
  CHECK(sub(h, one, one, ctx) == 0x8000);
  CHECK(add(h, 0x8000, 0x8000, ctx) == 0x8000);
  Context near;
  CHECK(add(h, 0x8000, 0x0000, near) == 0x0000);
  CHECK(fpscope::sqrt(h, 0x8000, near) == 0x8000);
  CHECK(mul(h, 0x8000, one, near) == 0x8000);
  CHECK(near.flags == 0);
}

TEST_CASE("division by zero and by infinity") {
  Context ctx;
  CHECK(div(h, one, 0x8000, ctx) == ninf);
  CHECK(ctx.flags == flag::infinite);
  Context ctx2;
  CHECK(div(h, one, inf, ctx2) == 0x0000);
  CHECK(div(h, inf, 0x0000, ctx2) == inf);
  CHECK(ctx2.flags == 0);
}

TEST_CASE("integer conversions: rounding, range, invalid results per platform") {
  Context ctx;
  CHECK(to_integer(h, 0x3E00, 32, true, false, ctx) == 2);  // 1.5 -> 2 (ties to even)
  CHECK(to_integer(h, 0x4100, 32, true, false, ctx) == 2);  // 2.5 -> 2
  CHECK(ctx.flags == 0);                                      // -notexact: no inexact
  CHECK(to_integer(h, 0x4100, 32, true, true, ctx) == 2);
  CHECK(ctx.flags == flag::inexact);
  Context big;
  CHECK(to_integer(h, 0x7BFF, 32, true, false, big) == 65504);
  CHECK(to_integer(formats::fp32, 0x4F000000, 32, true, false, big) == 0x80000000);  // 2^31: out of range
  CHECK(big.flags == flag::invalid);
  Context neg;
  CHECK(to_integer(formats::fp32, 0xCF000000, 32, true, false, neg) == 0x80000000);  // -2^31 fits
  CHECK(neg.flags == 0);
  Context riscv;
  riscv.platform = platform_riscv;
  CHECK(to_integer(formats::fp32, 0x4F000000, 32, true, false, riscv) == 0x7FFFFFFF);
  CHECK(to_integer(formats::fp32, 0x7FC00000, 32, true, false, riscv) == 0x7FFFFFFF);
  CHECK(to_integer(formats::fp32, 0xBF800000, 32, false, false, riscv) == 0);  // -1 -> unsigned: invalid
  CHECK(to_integer(formats::fp32, 0xBE800000, 32, false, false, riscv) == 0);  // -0.25 -> 0: fine
  CHECK(riscv.flags == flag::invalid);
  Context from;
  CHECK(from_signed(h, 65519, from) == 0x7BFF);
  CHECK(from_signed(h, 65520, from) == inf);
  CHECK(from_signed(h, -3, from) == 0xC200);
  CHECK(from_unsigned(formats::fp32, 0xFFFFFFFFFFFFFFFFull, from) == 0x5F800000);
}

TEST_CASE("round to integral in each mode") {
  struct Case { std::uint64_t in; RoundingMode mode; std::uint64_t out; };
  const Case cases[] = {
      {0x3E00, RoundingMode::nearest_even, 0x4000}, {0x3E00, RoundingMode::toward_zero, 0x3C00},
      {0xBE00, RoundingMode::toward_positive, 0xBC00}, {0xBE00, RoundingMode::toward_negative, 0xC000},
      {0x3800, RoundingMode::nearest_even, 0x0000}, {0x3800, RoundingMode::nearest_away, 0x3C00},
      {0xB800, RoundingMode::nearest_even, 0x8000}, {0x3800, RoundingMode::odd, 0x3C00},
      {0x4100, RoundingMode::odd, 0x4200}, {0x0001, RoundingMode::toward_positive, 0x3C00},
  };
  for (const Case& c : cases) {
    Context ctx;
    ctx.rounding = c.mode;
    CAPTURE(c.in);
    CHECK(round_to_integral(h, c.in, true, ctx) == c.out);
    CHECK(ctx.flags == flag::inexact);
  }
  Context exact;
  CHECK(round_to_integral(h, 0x4900, true, exact) == 0x4900);
  CHECK(exact.flags == 0);
}

TEST_CASE("comparisons, quiet and signalling") {
  Context ctx;
  CHECK(eq(h, 0x0000, 0x8000, ctx));
  CHECK(lt(h, ninf, 0x8001, ctx));
  CHECK(le(h, one, one, ctx));
  CHECK_FALSE(lt(h, two, one, ctx));
  CHECK(ctx.flags == 0);
  CHECK_FALSE(eq(h, qnan, qnan, ctx));
  CHECK(ctx.flags == 0);
  CHECK_FALSE(eq(h, snan, one, ctx));
  CHECK(ctx.flags == flag::invalid);
  Context signalling;
  CHECK_FALSE(lt(h, qnan, one, signalling));
  CHECK(signalling.flags == flag::invalid);
  Context quiet;
  CHECK_FALSE(lt_quiet(h, qnan, one, quiet));
  CHECK_FALSE(le_quiet(h, one, qnan, quiet));
  CHECK(quiet.flags == 0);
  CHECK_FALSE(eq_signaling(h, qnan, qnan, quiet));
  CHECK(quiet.flags == flag::invalid);
}

TEST_CASE("minimum, maximum and their Number variants (IEEE 754-2019 9.6)") {
  Context ctx;
  CHECK(minimum(h, 0x0000, 0x8000, ctx) == 0x8000);
  CHECK(maximum(h, 0x8000, 0x0000, ctx) == 0x0000);
  CHECK(is_nan(h, minimum(h, qnan, one, ctx)));
  CHECK(minimum_number(h, qnan, one, ctx) == one);
  CHECK(maximum_number(h, two, qnan, ctx) == two);
  CHECK(ctx.flags == 0);
  CHECK(minimum_number(h, snan, one, ctx) == one);
  CHECK(ctx.flags == flag::invalid);
  Context both;
  CHECK(minimum_number(h, qnan, 0x7E01, both) == qnan);
}

TEST_CASE("next up, next down and ulp") {
  CHECK(next_up(h, 0x0000) == 0x0001);
  CHECK(next_up(h, 0x8000) == 0x0001);
  CHECK(next_down(h, 0x0000) == 0x8001);
  CHECK(next_up(h, 0x7BFF) == inf);
  CHECK(next_up(h, inf) == inf);
  CHECK(next_up(h, ninf) == 0xFBFF);
  CHECK(next_down(h, one) == 0x3BFF);
  CHECK(next_up(h, 0xBC00) == 0xBBFF);
  CHECK(next_up(formats::e4m3, 0x7E) == 0x7F);  // nothing above 448 but NaN
  CHECK(ulp_exponent(h, one) == -10);
  CHECK(ulp_exponent(h, 0x0001) == -24);
  CHECK(ulp_exponent(h, 0x0400) == -24);
  CHECK(ulp_exponent(h, 0x7BFF) == 5);
}
