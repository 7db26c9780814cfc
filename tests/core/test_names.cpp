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
