// Exact decimal printing and parsing, against glibc's correctly rounded strtod/strtof.
#include <doctest/doctest.h>

#include <cfenv>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "fpscope/core/convert.hpp"
#include "fpscope/core/decimal.hpp"

using namespace fpscope;

TEST_CASE("exact decimal expansions") {
  CHECK(exact_decimal(formats::fp16, 0x2E66) == "0.0999755859375");
  CHECK(exact_decimal(formats::fp16, 0x0001) == "0.000000059604644775390625");
  CHECK(exact_decimal(formats::fp16, 0x7BFF) == "65504");
  CHECK(exact_decimal(formats::fp16, 0xFC00) == "-inf");
  CHECK(exact_decimal(formats::fp16, 0x8000) == "-0");
  CHECK(exact_decimal(formats::fp16, 0x7D00) == "snan");
  CHECK(exact_decimal(formats::fp16, 0xFE00) == "-nan");
  CHECK(exact_decimal(formats::fp64, 0x3FB999999999999A) == "0.1000000000000000055511151231257827021181583404541015625");
  CHECK(exact_decimal(formats::bf16, 0x7F7F) == "338953138925153547590470800371487866880");
  const std::string tiny = exact_decimal(formats::fp64, 1);  // 2^-1074 has 751 significant digits
  CHECK(tiny.size() == 2 + 1074);  // "0." and 1074 fraction digits, the last one 5
  CHECK(tiny.rfind("0.000", 0) == 0);
  CHECK(tiny.substr(tiny.size() - 5) == "65625");
}

TEST_CASE("parsing accepts every documented form and rejects the rest") {
  Context ctx;
  CHECK(round_number(formats::fp32, parse_number("0.1"), ctx) == 0x3DCCCCCD);
  CHECK(round_number(formats::fp32, parse_number("0x1.8p-3"), ctx) == 0x3E400000);
  CHECK(round_number(formats::fp32, parse_number("-0"), ctx) == 0x80000000);
  CHECK(round_number(formats::fp32, parse_number("+1E+2"), ctx) == 0x42C80000);
  CHECK(round_number(formats::fp32, parse_number(".5"), ctx) == 0x3F000000);
  CHECK(round_number(formats::fp32, parse_number("5."), ctx) == 0x40A00000);
  CHECK(round_number(formats::fp32, parse_number("-inf"), ctx) == 0xFF800000);
  CHECK(round_number(formats::fp32, parse_number("Infinity"), ctx) == 0x7F800000);
  CHECK(round_number(formats::fp32, parse_number("nan"), ctx) == 0x7FC00000);
  CHECK(round_number(formats::fp32, parse_number("snan"), ctx) == 0x7F800001);
  CHECK(round_number(formats::fp32, parse_number("1e-999999999999"), ctx) == 0);
  CHECK(round_number(formats::fp32, parse_number("1e999999999999"), ctx) == 0x7F800000);
  for (const char* bad : {"", "banana", "1.2.3", "1e", "0x", "--1", "1e+", "0x1.8q3", "1,5", "nan1", " 1"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_number(bad), ParseError);
  }
  try {
    parse_number("banana");
  } catch (const ParseError& e) {
    CHECK(std::string(e.what()).find("'banana'") != std::string::npos);
  }
}

TEST_CASE("a long decimal is rounded exactly, not through a double") {
  // 1 + 2^-11 + 10^-40 in fp16: just above the tie, so it rounds up; through a double the
  // 10^-40 would be lost and the tie would round to even (down).
  Context ctx;
  CHECK(round_number(formats::fp16, parse_number("1.00048828125000000000000000000000000000001"), ctx) == 0x3C01);
  CHECK(round_number(formats::fp16, parse_number("1.00048828125"), ctx) == 0x3C00);
  CHECK(round_text(formats::fp16, "1.00048828125000000000000000000000000000001", ctx) == 0x3C01);
}

namespace {

// The four IEEE modes as the FPU names them and as we do.
constexpr int fpu_modes[] = {FE_TONEAREST, FE_TOWARDZERO, FE_UPWARD, FE_DOWNWARD};
constexpr RoundingMode our_modes[] = {RoundingMode::nearest_even, RoundingMode::toward_zero, RoundingMode::toward_positive,
                                      RoundingMode::toward_negative};

// Whether `text` rounds into binary64 and binary32 in mode m (0..3) exactly as glibc's correctly
// rounded strtod and strtof do.
bool rounds_like_glibc(const std::string& text, int m) {
  std::fesetround(fpu_modes[m]);
  const double expected_double = std::strtod(text.c_str(), nullptr);
  const float expected_float = std::strtof(text.c_str(), nullptr);
  std::fesetround(FE_TONEAREST);
  std::uint64_t d_bits;
  std::uint32_t f_bits;
  std::memcpy(&d_bits, &expected_double, 8);
  std::memcpy(&f_bits, &expected_float, 4);
  Context ctx;
  ctx.rounding = our_modes[m];
  const ParsedNumber number = parse_number(text);
  return round_number(formats::fp64, number, ctx) == d_bits && round_number(formats::fp32, number, ctx) == f_bits;
}

}  // namespace

TEST_CASE("random decimals round like glibc's strtod and strtof in four modes") {
  std::mt19937_64 rng(99);
  int mismatches = 0;
  for (int i = 0; i < 40000; ++i) {
    std::string text = (rng() & 1) ? "-" : "";
    const int digits = 1 + static_cast<int>(rng() % 30);
    for (int d = 0; d < digits; ++d) text.push_back(static_cast<char>('0' + rng() % 10));
    if (rng() & 1) text.insert(text.size() - static_cast<std::size_t>(rng() % static_cast<unsigned>(digits)), ".");
    text += "e" + std::to_string(static_cast<int>(rng() % 700) - 350);
    if (!rounds_like_glibc(text, static_cast<int>(i % 4)) && ++mismatches < 10) MESSAGE(text);
  }
  CHECK(mismatches == 0);
}

TEST_CASE("round_text's fast path agrees with the exact path, flags included") {
  std::mt19937_64 rng(5);
  const Format targets[] = {formats::fp16, formats::bf16, formats::e4m3, formats::e5m2, formats::fp32, formats::tf32};
  int mismatches = 0;
  for (int i = 0; i < 60000; ++i) {
    std::string text = (rng() & 1) ? "-" : "";
    const int digits = 1 + static_cast<int>(rng() % 12);
    for (int d = 0; d < digits; ++d) text.push_back(static_cast<char>('0' + rng() % 10));
    text += "e" + std::to_string(static_cast<int>(rng() % 90) - 60);
    const Format f = targets[i % 6];
    for (int mode = 0; mode < 6; ++mode) {
      Context fast, exact;
      fast.rounding = exact.rounding = static_cast<RoundingMode>(mode);
      fast.tininess = exact.tininess = (i & 1) ? Tininess::before_rounding : Tininess::after_rounding;
      const std::uint64_t a = round_text(f, text, fast);
      const std::uint64_t b = round_number(f, parse_number(text), exact);
      if (a != b || fast.flags != exact.flags) {
        if (++mismatches < 10) MESSAGE(text << " mode " << mode);
      }
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("round_text and parse_number refuse the same texts (a fuzz finding: \"+-5\" took the fast path)") {
  for (const char* text : {"+-0000000000003289", "+-5", "++5", "--5", "-+5", "+", "-", "+.", "+e5", "+inf5", " 5", "5 ", "+ 5"}) {
    CAPTURE(text);
    Context ctx;
    CHECK_THROWS_AS(parse_number(text), ParseError);
    CHECK_THROWS_AS(round_text(formats::fp16, text, ctx), ParseError);
  }
  for (const char* text : {"+5", "-5", "+.5", "-.5", "+5.", "+0", "-0", "+inf", "-nan", "+1e-3"}) {
    CAPTURE(text);
    Context fast, exact;
    CHECK(round_text(formats::fp16, text, fast) == round_number(formats::fp16, parse_number(text), exact));
    CHECK(fast.flags == exact.flags);
  }
}

TEST_CASE("conversion error is exact") {
  const ConversionError e = conversion_error(formats::fp16, 0x2E66, parse_number("0.1"));
  CHECK(e.absolute == "-0.0000244140625");
  CHECK(e.relative == doctest::Approx(2.44140625e-4));
  CHECK(conversion_error(formats::fp16, 0x3C00, parse_number("1")).absolute == "0");
  CHECK(conversion_error(formats::fp16, 0x3C00, parse_number("0x1.001p0")).absolute == "-0.000244140625");
}

TEST_CASE("relative errors of magnitudes below binary64's range") {
  // binary64's smallest subnormal, 2^-1074 = 4.9406564584124654...e-324, written 2.5e-324: the
  // relative error 2^-1074 / 2.5e-324 - 1 = 0.9762625833649861767...
  CHECK(conversion_error(formats::fp64, 0x1, parse_number("2.5e-324")).relative == doctest::Approx(0.97626258336498618));
  CHECK(conversion_error(formats::fp64, 0x1, parse_number("0x1p-1075")).relative == 1.0);
  // 1e-400 flushed to zero: all of it lost.
  CHECK(conversion_error(formats::fp64, 0x0, parse_number("1e-400")).relative == 1.0);
  // 1e-320 is 2024 of the smallest subnormal's steps (1.0000...e-320 against 2024 x 2^-1074 =
  // 0.99998886...e-320): relative 1.1133e-5.
  CHECK(conversion_error(formats::fp64, 2024, parse_number("1e-320")).relative == doctest::Approx(1.1132817316994587e-5));
}

TEST_CASE("decimals of thousands of digits round like glibc in four modes (the digits past 1100 become one sticky digit)") {
  // Just above, at and just below points where rounding changes, written with 1,200 to 3,000
  // significant digits: fp32 midpoints (exact in binary64) against strtof, and binary64 values
  // (normal and subnormal: 2^-1074 alone has 751 digits) plus a tiny amount against strtod.
  std::mt19937_64 rng(2026);
  int mismatches = 0, long_inputs = 0;
  for (int i = 0; i < 400; ++i) {
    // A float32 (normal or subnormal), the midpoint to its successor as an exact decimal.
    const std::uint32_t f_bits = static_cast<std::uint32_t>(rng() % 0x7F7FFFFFu);
    float f, next;
    std::memcpy(&f, &f_bits, 4);
    const std::uint32_t next_bits = f_bits + 1;
    std::memcpy(&next, &next_bits, 4);
    const double midpoint = (static_cast<double>(f) + static_cast<double>(next)) / 2;
    std::uint64_t midpoint_bits;
    std::memcpy(&midpoint_bits, &midpoint, 8);
    const std::string at = exact_decimal(formats::fp64, midpoint_bits);
    // And a binary64 value, made tiny (subnormal) for every other case.
    const std::uint64_t d_bits = (i % 2 == 0) ? rng() % 0x000FFFFFFFFFFFFFull + 1 : rng() % 0x7FEFFFFFFFFFFFFFull;
    const std::string d = exact_decimal(formats::fp64, d_bits);
    const std::string zeros(1200 + rng() % 1800, '0');
    const auto with_point = [](std::string s) { return s.find('.') == std::string::npos ? s + "." : s; };
    std::string below = at;  // an exact decimal of a binary fraction ends in 5 (or is an integer)
    if (below.back() == '5') below.back() = '4', below = with_point(below) + std::string(zeros.size(), '9');
    for (const std::string& text : {with_point(at) + zeros + "1", with_point(at) + zeros, below, with_point(d) + zeros + "1",
                                    "-" + with_point(d) + zeros + "7"}) {
      long_inputs += text.size() > 1100;
      for (int m = 0; m < 4; ++m)
        if (!rounds_like_glibc(text, m) && ++mismatches < 5) MESSAGE(text.substr(0, 60) << "... (" << text.size() << " characters), mode " << m);
    }
  }
  CHECK(long_inputs > 1600);  // of 2000 (the "below" variant of an integer midpoint is short)
  CHECK(mismatches == 0);
}

TEST_CASE("a power of two as fpscope writes it, 2^k, is read exactly") {
  const ParsedNumber small = parse_number("2^-11");
  CHECK(small.kind == ParsedNumber::Kind::finite);
  CHECK(small.hex);
  CHECK(small.digits == "1");
  CHECK(small.exponent == -11);
  CHECK(parse_number("-2^10").negative);
  CHECK(parse_number("+2^3").exponent == 3);
  Context ctx;
  CHECK(round_number(formats::fp16, parse_number("2^-11"), ctx) == 0x1000u);  // fp16's 2^-11
  CHECK(round_number(formats::fp16, parse_number("2^-25"), ctx) == 0x0000u);  // half the smallest subnormal: a tie, to even
  CHECK(round_number(formats::fp16, parse_number("2^16"), ctx) == 0x7C00u);   // past 65504: infinity
  CHECK_THROWS_AS(parse_number("2^"), ParseError);
  CHECK_THROWS_AS(parse_number("2^x"), ParseError);
  CHECK_THROWS_AS(parse_number("2^1.5"), ParseError);
}
