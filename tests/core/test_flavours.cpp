// The finite flavour (OCP MX FP4 E2M1, FP6 E2M3 / E3M2: no infinity, no NaN) and FNUZ (FP8
// E4M3FNUZ / E5M2FNUZ: no infinity, no -0, one NaN where -0 would be, bias one more): their
// constants, every rule of conversion at the edges, neighbours, arithmetic's special cases and
// names. tests/exhaustive/ml_dtypes_formats.cpp holds every input against ml_dtypes.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "fpscope/core/arithmetic.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/neighbours.hpp"

using namespace fpscope;

namespace {
struct Cast {
  std::uint64_t bits;
  std::uint8_t flags;
};
Cast cast(Format f, float value, bool saturate = false) {
  Context ctx;
  ctx.saturate = saturate;
  const std::uint64_t bits = from_float(f, value, ctx);
  return {bits, ctx.flags};
}
float widen(Format f, std::uint64_t bits) {
  Context ctx;
  return to_float(f, bits, ctx);
}
constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float quiet_nan = std::numeric_limits<float>::quiet_NaN();
}  // namespace

TEST_CASE("the OCP MX element formats: constants from the specification") {
  // OCP Microscaling Formats v1.0, section 5.3.1: E2M1 max 6, E2M3 max 7.5, E3M2 max 28;
  // min normal 1, 1, 0.25; min subnormal 0.5, 0.125, 0.0625.
  CHECK(widen(formats::e2m1, formats::e2m1.max_finite_bits()) == 6.0f);
  CHECK(widen(formats::e2m3, formats::e2m3.max_finite_bits()) == 7.5f);
  CHECK(widen(formats::e3m2, formats::e3m2.max_finite_bits()) == 28.0f);
  CHECK(std::ldexp(1.0f, formats::e2m1.emin()) == 1.0f);
  CHECK(std::ldexp(1.0f, formats::e3m2.emin()) == 0.25f);
  CHECK(std::ldexp(1.0f, formats::e2m3.min_subnormal_exponent()) == 0.125f);
  CHECK(formats::e2m1.finite_count() == 16);  // every encoding is a number
  CHECK(!formats::e2m1.has_infinity());
  CHECK(!formats::e2m1.has_nan());
  const float e2m1_values[] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (std::uint64_t code = 0; code < 16; ++code) {
    CHECK(!is_nan(formats::e2m1, code));
    CHECK(widen(formats::e2m1, code) == (code < 8 ? e2m1_values[code] : -e2m1_values[code - 8]));
  }
}

TEST_CASE("FNUZ: bias one more than IEEE's, no -0, the one NaN at 1.0000.000") {
  const Format f = formats::e4m3fnuz;
  CHECK(f.bias() == 8);
  CHECK(formats::e5m2fnuz.bias() == 16);
  CHECK(widen(f, f.max_finite_bits()) == 240.0f);
  CHECK(widen(formats::e5m2fnuz, formats::e5m2fnuz.max_finite_bits()) == 57344.0f);
  CHECK(std::ldexp(1.0f, f.emin()) == 0.0078125f);  // 2^-7
  CHECK(f.finite_count() == 255);
  CHECK(is_nan(f, 0x80));
  CHECK(std::isnan(widen(f, 0x80)));
  CHECK(!is_zero(f, 0x80));
  CHECK(is_zero(f, 0x00));
  for (std::uint64_t code = 0; code < 256; ++code) CHECK(is_nan(f, code) == (code == 0x80));
}

TEST_CASE("conversions into a finite format saturate, and a NaN becomes a zero of its sign") {
  const Format f = formats::e2m1;
  CHECK(cast(f, 5.1f).bits == 0x7);  // 6
  CHECK(cast(f, 5.0f).bits == 0x6);  // the tie 5 between 4 and 6 goes to the even 4
  CHECK(cast(f, 5.0f).flags == flag::inexact);
  const Cast over = cast(f, 7.0f);  // rounds to 8, past max: nothing but max is left
  CHECK(over.bits == 0x7);
  CHECK(over.flags == (flag::overflow | flag::inexact));
  CHECK(cast(f, -1e9f).bits == 0xF);
  const Cast infinite = cast(f, -inf);
  CHECK(infinite.bits == 0xF);
  CHECK(infinite.flags == flag::invalid);
  const Cast not_a_number = cast(f, quiet_nan);
  CHECK(not_a_number.bits == 0x0);
  CHECK(not_a_number.flags == flag::invalid);
  CHECK(cast(f, -quiet_nan).bits == 0x8);
  CHECK(cast(f, -1e-30f).bits == 0x8);  // -0 exists here
  CHECK(cast(f, 0.25f).bits == 0x0);    // the tie between 0 and 0.5 goes to the even 0
  CHECK(cast(f, 0.3f).bits == 0x1);
  CHECK(cast(formats::e3m2, 30.0f).bits == 0x1F);  // 28
}

TEST_CASE("conversions into FNUZ: +0 for every zero, NaN on overflow unless saturating") {
  const Format f = formats::e4m3fnuz;
  CHECK(cast(f, -0.0f).bits == 0x00);
  CHECK(cast(f, -1e-30f).bits == 0x00);
  CHECK(cast(f, -1e-30f).flags == (flag::underflow | flag::inexact));
  CHECK(cast(f, -0.0009765625f).bits == 0x81);  // -min subnormal keeps its sign
  CHECK(cast(f, 240.0f).bits == 0x7F);
  CHECK(cast(f, 247.0f).bits == 0x7F);  // below the midpoint 248
  const Cast over = cast(f, 250.0f);
  CHECK(over.bits == 0x80);
  CHECK(over.flags == (flag::overflow | flag::inexact));
  CHECK(cast(f, 250.0f, true).bits == 0x7F);
  CHECK(cast(f, -250.0f, true).bits == 0xFF);
  CHECK(cast(f, inf).bits == 0x80);
  CHECK(cast(f, inf).flags == flag::invalid);
  CHECK(cast(f, -inf, true).bits == 0xFF);
  CHECK(cast(f, -quiet_nan).bits == 0x80);
}

TEST_CASE("neighbours at the edges of the new flavours") {
  CHECK(next_up(formats::e2m1, 0x7) == 0x7);  // nothing above max in a finite format
  CHECK(next_down(formats::e2m1, 0xF) == 0xF);
  CHECK(next_down(formats::e2m1, 0x0) == 0x9);
  CHECK(next_up(formats::e2m1, 0x9) == 0x8);  // -0.5 up to -0
  const Format f = formats::e4m3fnuz;
  CHECK(next_up(f, 0x7F) == 0x80);   // max up to the NaN, as in OCP FN
  CHECK(next_up(f, 0x81) == 0x00);   // -min subnormal up to the one zero, never to the NaN
  CHECK(next_down(f, 0x00) == 0x81);
  CHECK(next_down(f, 0x01) == 0x00);
  CHECK(next_down(f, 0xFF) == 0x80);  // below -max: NaN
}

TEST_CASE("arithmetic's special cases where there is no infinity or no NaN") {
  Context ctx;
  const std::uint64_t one = from_float(formats::e2m1, 1.0f, ctx);
  ctx.flags = 0;
  CHECK(div(formats::e2m1, one, 0x0, ctx) == 0x7);  // 1 / 0: the largest number of that sign
  CHECK(ctx.flags == flag::infinite);
  ctx.flags = 0;
  CHECK(div(formats::e2m1, 0x8 | one, 0x0, ctx) == 0xF);
  ctx.flags = 0;
  CHECK(is_zero(formats::e2m1, div(formats::e2m1, 0x0, 0x0, ctx)));  // 0 / 0: no NaN, a zero, invalid
  CHECK(ctx.flags == flag::invalid);
  ctx.flags = 0;
  CHECK(add(formats::e2m1, 0x7, 0x7, ctx) == 0x7);  // 6 + 6 saturates
  CHECK(ctx.flags == (flag::overflow | flag::inexact));
  ctx.flags = 0;
  const std::uint64_t max = formats::e4m3fnuz.max_finite_bits();
  CHECK(add(formats::e4m3fnuz, max, max, ctx) == 0x80);  // overflow is the NaN
  ctx.flags = 0;
  CHECK(add(formats::e4m3fnuz, 0x01, 0x81, ctx) == 0x00);  // x + (-x) = +0 (no -0 to give)
}

TEST_CASE("names of the new formats, and custom flavours round trip") {
  CHECK(parse_format("e2m1") == formats::e2m1);
  CHECK(parse_format("FP4") == formats::e2m1);
  CHECK(parse_format("e2m3") == formats::e2m3);
  CHECK(parse_format("fp6e3m2") == formats::e3m2);
  CHECK(parse_format("e4m3fnuz") == formats::e4m3fnuz);
  CHECK(parse_format("e2m1ieee") == Format{2, 1, Flavour::ieee});
  CHECK(parse_format("e3m3finite") == Format{3, 3, Flavour::finite});
  CHECK(parse_format("e4m2fnuz") == Format{4, 2, Flavour::fnuz});
  for (const Format f : {formats::e2m1, formats::e2m3, formats::e3m2, formats::e4m3fnuz, formats::e5m2fnuz, Format{3, 3, Flavour::finite},
                         Format{4, 2, Flavour::fnuz}, Format{2, 1, Flavour::ieee}})
    CHECK(parse_format(format_name(f)) == f);
  CHECK(format_name(Format{3, 3, Flavour::finite}) == "e3m3finite");
  CHECK_THROWS_AS(parse_format("e9m3fnuz"), UnknownNameError);  // fnuz and finite are the narrow formats
}
