// Format and rounding-mode names, as users type them.
#include <doctest/doctest.h>

#include "fpscope/core/names.hpp"

using namespace fpscope;

TEST_CASE("format names and custom formats") {
  CHECK(parse_format("fp16") == formats::fp16);
  CHECK(parse_format("BF16") == formats::bf16);
  CHECK(parse_format("binary32") == formats::fp32);
  CHECK(parse_format("e4m3fn") == formats::e4m3);
  CHECK(parse_format("e6m9") == Format{6, 9, Flavour::ieee});
  CHECK(parse_format("e3m4fn") == Format{3, 4, Flavour::ocp_fn});
  CHECK(format_name(Format{6, 9, Flavour::ieee}) == "e6m9");
  CHECK(format_name(formats::e4m3) == "e4m3");
  CHECK_THROWS_AS(parse_format("fp17"), UnknownNameError);
  CHECK_THROWS_AS(parse_format("e12m3"), UnknownNameError);
  CHECK_THROWS_AS(parse_format("e5m"), UnknownNameError);
  for (const Format& f : named_formats()) CHECK(parse_format(format_name(f)) == f);
}

TEST_CASE("every format has one name that reads back as that format (fuzz finding: e4m03)") {
  // e4m3 alone is OCP FP8 E4M3 (FN flavour); the IEEE-style e4m3, with infinities, is e4m3ieee.
  CHECK(format_name(Format{4, 3, Flavour::ieee}) == "e4m3ieee");
  CHECK(parse_format("e4m3ieee") == Format{4, 3, Flavour::ieee});
  CHECK(parse_format("E5M2IEEE") == formats::e5m2);
  CHECK(format_name(Format{5, 10, Flavour::ieee}) == "fp16");
  CHECK_THROWS_AS(parse_format("e4m03"), UnknownNameError);  // was IEEE e4m3, unlike "e4m3"
  CHECK_THROWS_AS(parse_format("e04m3"), UnknownNameError);
  CHECK_THROWS_AS(parse_format("e4m3ieeefn"), UnknownNameError);
  CHECK_THROWS_AS(parse_format("e4m3fnieee"), UnknownNameError);
  CHECK_THROWS_AS(parse_format("eieee"), UnknownNameError);
  int formats_named = 0;
  for (int e = 2; e <= 11; ++e)
    for (int m = 1; m <= 52; ++m)
      for (const Flavour flavour : {Flavour::ieee, Flavour::ocp_fn}) {
        const Format f{e, m, flavour};
        if (!f.valid()) continue;
        CAPTURE(format_name(f));
        CHECK(parse_format(format_name(f)) == f);
        ++formats_named;
      }
  CHECK(formats_named > 900);
}

TEST_CASE("rounding mode names, ours and TestFloat's") {
  CHECK(parse_rounding_mode("rne") == RoundingMode::nearest_even);
  CHECK(parse_rounding_mode("near_maxMag") == RoundingMode::nearest_away);
  CHECK(parse_rounding_mode("minMag") == RoundingMode::toward_zero);
  CHECK(parse_rounding_mode("max") == RoundingMode::toward_positive);
  CHECK(parse_rounding_mode("min") == RoundingMode::toward_negative);
  CHECK(parse_rounding_mode("odd") == RoundingMode::odd);
  CHECK(parse_rounding_mode("stochastic") == RoundingMode::stochastic);
  CHECK_THROWS_AS(parse_rounding_mode("sideways"), UnknownNameError);
  for (int m = 0; m < rounding_mode_count; ++m)
    CHECK(parse_rounding_mode(rounding_mode_name(static_cast<RoundingMode>(m))) == static_cast<RoundingMode>(m));
  CHECK(describe_flags(flag::overflow | flag::inexact) == "overflow inexact");
  CHECK(describe_flags(0) == "none");
}
