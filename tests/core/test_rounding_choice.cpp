// explain_rounding: the neighbours of an exact result, ties decided exactly, and each mode's reason.
#include <doctest/doctest.h>

#include "fpscope/core/decimal.hpp"
#include "fpscope/core/rounding_choice.hpp"

using namespace fpscope;

namespace {
std::uint64_t bits_of(Format f, const char* text) {
  Context ctx;
  return round_text(f, text, ctx);
}
Context mode(RoundingMode m) {
  Context ctx;
  ctx.rounding = m;
  return ctx;
}
}  // namespace

TEST_CASE("fp16: 1 + 2^-11 is exactly halfway between 1 and 1 + 2^-10; each mode says which it takes and why") {
  const Format f = formats::fp16;
  const std::uint64_t one = 0x3C00, half_ulp = bits_of(f, "0.00048828125");  // 2^-11
  RoundingChoice c = explain_rounding(f, Operation::add, one, half_ulp, mode(RoundingMode::nearest_even));
  CHECK(c.lower == 0x3C00);
  CHECK(c.upper == 0x3C01);
  CHECK(c.tie);
  CHECK(c.result == 0x3C00);  // even last bit
  CHECK(c.reason == RoundingReason::tie_to_even);
  CHECK((c.flags & flag::inexact) != 0);
  c = explain_rounding(f, Operation::add, one, half_ulp, mode(RoundingMode::nearest_away));
  CHECK(c.result == 0x3C01);
  CHECK(c.reason == RoundingReason::tie_away);
  c = explain_rounding(f, Operation::add, one, half_ulp, mode(RoundingMode::odd));
  CHECK(c.result == 0x3C01);
  CHECK(c.reason == RoundingReason::to_odd);
  c = explain_rounding(f, Operation::add, one, half_ulp, mode(RoundingMode::toward_positive));
  CHECK(c.result == c.upper);
  CHECK(c.reason == RoundingReason::toward_positive);
  // -1 - 2^-11 toward zero: the neighbour nearer zero, -1.
  c = explain_rounding(f, Operation::sub, one | 0x8000, half_ulp, mode(RoundingMode::toward_zero));
  CHECK(c.result == 0xBC00);
  CHECK(c.reason == RoundingReason::toward_zero);
}

TEST_CASE("not a tie: the nearer neighbour; exact results have nothing to round") {
  const Format f = formats::fp16;
  RoundingChoice c = explain_rounding(f, Operation::add, 0x3C00, bits_of(f, "0.0001"), mode(RoundingMode::nearest_even));
  CHECK_FALSE(c.tie);
  CHECK(c.result == 0x3C00);
  CHECK(c.reason == RoundingReason::nearer);
  c = explain_rounding(f, Operation::mul, bits_of(f, "1.5"), bits_of(f, "2"), mode(RoundingMode::nearest_even));
  CHECK(c.lower == c.upper);
  CHECK(c.result == bits_of(f, "3"));
  CHECK(c.reason == RoundingReason::exact);
  CHECK(c.flags == 0);
  // A quotient that is never a tie (1/3), in fp32: the two neighbours one ulp apart.
  const Format s = formats::fp32;
  c = explain_rounding(s, Operation::div, bits_of(s, "1"), bits_of(s, "3"), mode(RoundingMode::nearest_even));
  CHECK(c.upper == c.lower + 1);
  CHECK_FALSE(c.tie);
  CHECK(c.reason == RoundingReason::nearer);
}

TEST_CASE("fp64's ties are found without a wider format; flush to zero and saturation replace the neighbours") {
  const Format d = formats::fp64;
  const RoundingChoice tie = explain_rounding(d, Operation::add, bits_of(d, "1"), bits_of(d, "1.1102230246251565404236316680908203125e-16"),
                                              mode(RoundingMode::nearest_even));  // 1 + 2^-53
  CHECK(tie.tie);
  CHECK(tie.reason == RoundingReason::tie_to_even);
  const Format f = formats::fp16;
  Context ftz = mode(RoundingMode::nearest_even);
  ftz.flush_to_zero = true;
  const RoundingChoice tiny = explain_rounding(f, Operation::mul, bits_of(f, "0.0001"), bits_of(f, "0.01"), ftz);  // ~1e-6: subnormal in fp16
  CHECK(tiny.result == 0);
  CHECK(tiny.lower != 0);
  CHECK(tiny.reason == RoundingReason::replaced);
  Context sat = mode(RoundingMode::nearest_even);
  sat.saturate = true;
  const RoundingChoice big = explain_rounding(f, Operation::mul, bits_of(f, "60000"), bits_of(f, "2"), sat);
  CHECK(big.result == 0x7BFF);  // 65504
  CHECK(big.upper == 0x7C00);   // the neighbour above is infinity
  CHECK((big.flags & flag::overflow) != 0);
  CHECK(big.reason == RoundingReason::replaced);  // the mode alone gives infinity
}

TEST_CASE("at the top of the range the neighbours go on past the largest finite value: ties and overflows said as they are") {
  const auto explain = [](Format f, const char* a, const char* b, RoundingMode m = RoundingMode::nearest_even) {
    return explain_rounding(f, Operation::add, bits_of(f, a), bits_of(f, b), mode(m));
  };
  // fp16: 65504 + 16 = 65520, halfway between 65504 and 2^16; to even is 2^16, which overflows.
  RoundingChoice c = explain(formats::fp16, "65504", "16");
  CHECK(c.tie);
  CHECK(c.reason == RoundingReason::tie_past_max);
  CHECK(c.result == 0x7C00);
  // ... while 65504 + 8 is nearer 65504, and 65504 + 24 nearer 2^16: an overflow, no tie.
  CHECK(explain(formats::fp16, "65504", "8").reason == RoundingReason::nearer);
  c = explain(formats::fp16, "65504", "24");
  CHECK_FALSE(c.tie);
  CHECK(c.reason == RoundingReason::past_max);
  // Toward zero never leaves the range: the largest finite value, the mode's own neighbour.
  c = explain(formats::fp16, "65504", "24", RoundingMode::toward_zero);
  CHECK(c.reason == RoundingReason::toward_zero);
  CHECK(c.result == 0x7BFF);
  // e4m3: 448 + 16 = 464 is halfway between 448 and 480 (past the largest): to even stays at 448.
  c = explain(formats::e4m3, "448", "16");
  CHECK(c.tie);
  CHECK(c.reason == RoundingReason::tie_to_even);
  CHECK(c.result == 0x7E);
  // e4m3: 448 + 32 = 480 exactly, past the largest: an overflow (NaN in e4m3), no tie, not "the nearer".
  c = explain(formats::e4m3, "448", "32");
  CHECK_FALSE(c.tie);
  CHECK(c.reason == RoundingReason::past_max);
  // e2m1: 6 + 1 = 7, halfway between 6 and 8; to even is 8, which overflows, and FP4 saturates to 6.
  c = explain(formats::e2m1, "6", "1");
  CHECK(c.tie);
  CHECK(c.reason == RoundingReason::tie_past_max);
  CHECK(c.result == 0x7);
}
