// Every named format's constants against the published numbers.
#include <doctest/doctest.h>

#include <cmath>
#include <initializer_list>

#include "fpscope/core/convert.hpp"
#include "fpscope/core/format.hpp"

using namespace fpscope;

namespace {
double value_of(const Format& f, std::uint64_t bits) {
  Context ctx;
  const double v = to_double(f, bits, ctx);
  CHECK(ctx.flags == 0);  // every value of these formats is exact in binary64
  return v;
}
struct Published {
  Format format;
  int width, bias, emin, emax;
  double max, min_normal, min_subnormal, epsilon;
  std::uint64_t finite_count;
};
}  // namespace

TEST_CASE("named formats have the published constants") {
  const Published table[] = {
      // IEEE 754-2019 table 3.5; bfloat16 (Google/Intel BF16 spec); OCP FP8 spec v1.0 table 1; NVIDIA TF32.
      {formats::fp16, 16, 15, -14, 15, 65504.0, std::ldexp(1.0, -14), std::ldexp(1.0, -24), std::ldexp(1.0, -10), 63488},
      {formats::bf16, 16, 127, -126, 127, 3.3895313892515355e38, std::ldexp(1.0, -126), std::ldexp(1.0, -133), std::ldexp(1.0, -7), 65280},
      {formats::fp32, 32, 127, -126, 127, 3.4028234663852886e38, std::ldexp(1.0, -126), std::ldexp(1.0, -149), std::ldexp(1.0, -23), 4278190080ull},
      {formats::fp64, 64, 1023, -1022, 1023, 1.7976931348623157e308, std::ldexp(1.0, -1022), std::ldexp(1.0, -1074), std::ldexp(1.0, -52), 18437736874454810624ull},
      {formats::tf32, 19, 127, -126, 127, 3.4011621342146535e38, std::ldexp(1.0, -126), std::ldexp(1.0, -136), std::ldexp(1.0, -10), 522240},
      {formats::e4m3, 8, 7, -6, 8, 448.0, std::ldexp(1.0, -6), std::ldexp(1.0, -9), 0.125, 254},
      {formats::e5m2, 8, 15, -14, 15, 57344.0, std::ldexp(1.0, -14), std::ldexp(1.0, -16), 0.25, 248},
  };
  for (const Published& p : table) {
    const Format& f = p.format;
    CAPTURE(f.exponent_bits);
    CAPTURE(f.mantissa_bits);
    CHECK(f.valid());
    CHECK(f.width() == p.width);
    CHECK(f.bias() == p.bias);
    CHECK(f.emin() == p.emin);
    CHECK(f.emax() == p.emax);
    CHECK(value_of(f, f.max_finite_bits()) == p.max);
    CHECK(value_of(f, f.min_normal_bits()) == p.min_normal);
    CHECK(value_of(f, f.min_subnormal_bits()) == p.min_subnormal);
    CHECK(std::ldexp(1.0, f.epsilon_exponent()) == p.epsilon);
    CHECK(f.finite_count() == p.finite_count);
  }
}

TEST_CASE("fp16 and e4m3 encodings of the extremes") {
  CHECK(formats::fp16.max_finite_bits() == 0x7BFF);
  CHECK(formats::fp16.infinity_bits() == 0x7C00);
  CHECK(formats::fp16.quiet_nan_bits() == 0x7E00);
  CHECK(formats::e4m3.max_finite_bits() == 0x7E);  // S.1111.110
  CHECK(formats::e4m3.quiet_nan_bits() == 0x7F);   // S.1111.111, the only NaN
  CHECK_FALSE(formats::e4m3.has_infinity());
  CHECK(formats::e5m2.max_finite_bits() == 0x7B);
  CHECK(formats::bf16.max_finite_bits() == 0x7F7F);
}

TEST_CASE("finite counts match a brute-force count of the encodings") {
  for (const Format f : {formats::fp16, formats::bf16, formats::tf32, formats::e4m3, formats::e5m2, Format{3, 2, Flavour::ocp_fn}, Format{6, 9, Flavour::ieee}}) {
    std::uint64_t finite = 0;
    for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << f.width()); ++bits) finite += is_finite(f, bits) ? 1 : 0;
    CHECK(finite == f.finite_count());
  }
}

TEST_CASE("custom formats are validated") {
  CHECK(Format{11, 52, Flavour::ieee}.valid());
  CHECK_FALSE(Format{12, 40, Flavour::ieee}.valid());
  CHECK_FALSE(Format{11, 53, Flavour::ieee}.valid());
  CHECK_FALSE(Format{1, 5, Flavour::ieee}.valid());
  CHECK_FALSE(Format{5, 0, Flavour::ieee}.valid());
}
