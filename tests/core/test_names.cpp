// Format and rounding-mode names, as users type them.
#include <doctest/doctest.h>

#include "fpscope/core/convert.hpp"
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

TEST_CASE("dtype names as PyTorch, NumPy and ml_dtypes write them, with the largest finite value and specials each dtype has") {
  // ml_dtypes.finfo(...).max and its documentation: whether the type has infinities and NaNs.
  struct Dtype {
    const char* name;
    double max;
    bool infinity, nan;
  };
  const Dtype dtypes[] = {
      {"float8_e4m3fn", 448, false, true},        {"float8_e5m2", 57344, true, true},        {"float8_e4m3fnuz", 240, false, true},
      {"float8_e5m2fnuz", 57344, false, true},    {"float8_e4m3b11fnuz", 30, false, true},   {"float8_e4m3", 240, true, true},
      {"float8_e3m4", 15.5, true, true},          {"float6_e2m3fn", 7.5, false, false},      {"float6_e3m2fn", 28, false, false},
      {"float4_e2m1fn", 6, false, false},         {"float16", 65504, true, true},            {"torch.bfloat16", 3.3895313892515355e38, true, true},
      {"np.float32", 3.4028234663852886e38, true, true}, {"ml_dtypes.float8_e4m3fn", 448, false, true}, {"torch.half", 65504, true, true},
  };
  for (const Dtype& dtype : dtypes) {
    CAPTURE(dtype.name);
    const Format f = parse_format(dtype.name);
    Context ctx;
    CHECK(to_double(f, f.max_finite_bits(), ctx) == dtype.max);
    CHECK(f.has_infinity() == dtype.infinity);
    CHECK(f.has_nan() == dtype.nan);
  }
  CHECK(parse_format("torch.float8_e4m3fn") == formats::e4m3);
  CHECK(parse_format("float8_e4m3") == parse_format("e4m3ieee"));  // not OCP's E4M3
  CHECK(format_name(parse_format("float8_e3m4")) == "e3m4");         // fpscope prints its own names
  CHECK_THROWS_AS(parse_format("float8_e8m0fnu"), UnknownNameError);  // a block scale, said so
  CHECK_THROWS_AS(parse_format("torch.float8_e4m3fnx"), UnknownNameError);
  CHECK_THROWS_AS(parse_format("torch."), UnknownNameError);
  // And back: the dtype name printed beside a format reads as that format.
  for (const Dtype& dtype : dtypes) {
    const Format f = parse_format(dtype.name);
    CAPTURE(dtype.name);
    CHECK(parse_format(dtype_name(f)) == f);
  }
  CHECK(dtype_name(formats::e4m3) == "float8_e4m3fn");
  CHECK(dtype_name(Format{4, 3, Flavour::ieee}) == "float8_e4m3");
  CHECK(dtype_name(formats::bf16) == "bfloat16");
  CHECK(dtype_name(formats::tf32).empty());
  CHECK(dtype_name(Format{6, 9, Flavour::ieee}).empty());
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
