// Bulk kernels and the branch-free casts against the general scalar conversion, bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <initializer_list>
#include <iostream>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <stdexcept>
#include <vector>

#include "fpscope/core/bulk.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/cast.hpp"
#include "fpscope/core/convert.hpp"

using namespace fpscope;

namespace {

// Inputs that cover every path: all classes, every rounding boundary near each target's range.
std::vector<float> edgy_floats(std::size_t n) {
  std::mt19937 rng(11);
  std::vector<float> values;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits = rng();
    switch (i % 4) {
      case 0: break;  // anything
      case 1: bits = (bits & 0x80001FFFu) | ((100u + rng() % 60u) << 23) | (rng() & 0x7FE000u); break;  // fp16 range
      case 2: bits = (bits & 0x807FFFFFu) | ((rng() % 8) << 23); break;  // float32 subnormals and tiny
      case 3: bits = (bits & 0x8000FFFFu) | (0x7F0000u & (rng() << 16)) | ((110u + rng() % 40u) << 23); break;  // ties
    }
    values.push_back(bits_float(bits));
  }
  for (const std::uint32_t special : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u,
                                      0x477FEFFFu, 0x477FF000u, 0x477FF001u, 0x33000000u, 0x33000001u, 0x387FF000u,
                                      0x007FFFFFu, 0x43E00000u, 0x43E80000u})
    values.push_back(bits_float(special));
  return values;
}

// The formats whose bits fit 16-bit elements (tf32, 19 bits wide, is tested through round_f32).
const Format narrow_formats[] = {formats::fp16, formats::bf16, formats::e4m3, formats::e5m2, formats::e2m1, formats::e2m3, formats::e3m2};

}  // namespace

TEST_CASE("bulk float32 -> narrow equals scalar convert in every mode and option") {
  const std::vector<float> in = edgy_floats(20000);
  for (const Format& f : narrow_formats) {
    for (int mode = 0; mode < rounding_mode_count; ++mode) {
      for (int option = 0; option < 6; ++option) {
        Context bulk_ctx;
        bulk_ctx.rounding = static_cast<RoundingMode>(mode);
        bulk_ctx.flush_to_zero = option == 1;
        bulk_ctx.denormals_are_zero = option == 2;
        bulk_ctx.saturate = option == 3;
        bulk_ctx.tininess = option == 4 ? Tininess::before_rounding : Tininess::after_rounding;
        if (option == 5) bulk_ctx.platform = platform_riscv;
        bulk_ctx.stochastic_seed = 77;
        Context scalar_ctx = bulk_ctx;
        std::vector<std::uint16_t> out(in.size());
        f32_to_bits(f, in, out, bulk_ctx);
        std::uint8_t scalar_flags = 0;
        int mismatches = 0;
        for (std::size_t i = 0; i < in.size(); ++i) {
          scalar_ctx.flags = 0;
          scalar_ctx.stochastic_counter = i;
          const std::uint64_t expected = convert(formats::fp32, f, float_bits(in[i]), scalar_ctx);
          scalar_flags |= scalar_ctx.flags;
          if (expected != out[i] && ++mismatches < 5)
            MESSAGE("format e" << f.exponent_bits << "m" << f.mantissa_bits << " mode " << mode << " option " << option
                               << " input " << std::hex << float_bits(in[i]) << ": bulk " << out[i] << " scalar " << expected);
        }
        CHECK(mismatches == 0);
        CHECK(bulk_ctx.flags == scalar_flags);
        CHECK(bulk_ctx.stochastic_counter == in.size());
      }
    }
  }
}

TEST_CASE("bulk casts of arrays without float32 subnormals (whole blocks on the hardware paths)") {
  std::vector<float> in = edgy_floats(40000);
  std::erase_if(in, [](float v) { return (float_bits(v) & 0x7F800000u) == 0 && (float_bits(v) & 0x7FFFFFu) != 0; });
  for (const Format& f : {formats::fp16, formats::bf16}) {
    for (int mode = 0; mode < 6; ++mode) {
      Context bulk_ctx;
      bulk_ctx.rounding = static_cast<RoundingMode>(mode);
      std::vector<std::uint16_t> out(in.size());
      f32_to_bits(f, in, out, bulk_ctx);
      std::uint8_t scalar_flags = 0;
      for (std::size_t i = 0; i < in.size(); ++i) {
        Context scalar_ctx;
        scalar_ctx.rounding = bulk_ctx.rounding;
        REQUIRE(out[i] == convert(formats::fp32, f, float_bits(in[i]), scalar_ctx));
        scalar_flags |= scalar_ctx.flags;
      }
      CHECK(bulk_ctx.flags == scalar_flags);
      // The flags of each part alone: a block of 16 equal values raises that value's flags.
      for (std::size_t i = 0; i < in.size(); i += 97) {
        std::vector<float> same(16, in[i]);
        std::vector<std::uint16_t> block(16);
        Context block_ctx, scalar_ctx;
        block_ctx.rounding = scalar_ctx.rounding = bulk_ctx.rounding;
        f32_to_bits(f, same, block, block_ctx);
        convert(formats::fp32, f, float_bits(in[i]), scalar_ctx);
        REQUIRE(block_ctx.flags == scalar_ctx.flags);
      }
    }
  }
}

namespace {
// cast_from_f32<F, mode> for a run-time mode.
template <Format F>
std::uint32_t cast_in_mode(RoundingMode mode, std::uint32_t u, const CastOptions& options, std::uint64_t random, std::uint32_t& flags) {
  switch (mode) {
    case RoundingMode::nearest_even: return cast_from_f32<F, RoundingMode::nearest_even>(u, options, random, flags);
    case RoundingMode::nearest_away: return cast_from_f32<F, RoundingMode::nearest_away>(u, options, random, flags);
    case RoundingMode::toward_zero: return cast_from_f32<F, RoundingMode::toward_zero>(u, options, random, flags);
    case RoundingMode::toward_positive: return cast_from_f32<F, RoundingMode::toward_positive>(u, options, random, flags);
    case RoundingMode::toward_negative: return cast_from_f32<F, RoundingMode::toward_negative>(u, options, random, flags);
    case RoundingMode::odd: return cast_from_f32<F, RoundingMode::odd>(u, options, random, flags);
    case RoundingMode::stochastic: return cast_from_f32<F, RoundingMode::stochastic>(u, options, random, flags);
  }
  return 0;
}

template <Format F>
void check_flags_element_by_element(const std::vector<float>& in) {
  int mismatches = 0;
  for (int mode = 0; mode < rounding_mode_count; ++mode) {
    for (int option = 0; option < 3; ++option) {
      for (std::size_t i = 0; i < in.size(); ++i) {
        Context ctx;
        ctx.rounding = static_cast<RoundingMode>(mode);
        ctx.saturate = option == 1;
        if (option == 2) ctx.platform = platform_riscv;
        ctx.stochastic_counter = i;
        const std::uint64_t random = stochastic_random(0, i);
        const std::uint64_t expected = convert(formats::fp32, F, float_bits(in[i]), ctx);
        std::uint32_t flags = 0;
        const std::uint32_t got = cast_in_mode<F>(ctx.rounding, float_bits(in[i]), CastOptions::from(ctx), random, flags);
        if ((got != expected || flags != ctx.flags) && ++mismatches < 5)
          MESSAGE(format_name(F), " mode ", mode, " option ", option, " input bits ", float_bits(in[i]), ": cast ", got, " flags ", flags,
                  ", convert ", expected, " flags ", int(ctx.flags));
      }
    }
  }
  CHECK_MESSAGE(mismatches == 0, format_name(F));
}
}  // namespace

TEST_CASE("cast_from_f32 flags equal convert's flags element by element") {
  const std::vector<float> in = edgy_floats(20000);
  check_flags_element_by_element<formats::fp16>(in);
  check_flags_element_by_element<formats::bf16>(in);
  check_flags_element_by_element<formats::e4m3>(in);
  check_flags_element_by_element<formats::e5m2>(in);
  check_flags_element_by_element<formats::e2m1>(in);
  check_flags_element_by_element<formats::e2m3>(in);
  check_flags_element_by_element<formats::e3m2>(in);
}

TEST_CASE("every 16-bit and 8-bit pattern widens to float32 like convert") {
  for (const Format& f : narrow_formats) {
    for (const bool daz : {false, true}) {
      const std::size_t count = std::size_t{1} << (f.width() <= 8 ? 8 : 16);
      std::vector<std::uint16_t> in(count);
      for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<std::uint16_t>(i);
      if (f.width() > 16) in.resize(0);
      std::vector<float> out(in.size());
      Context ctx;
      ctx.denormals_are_zero = daz;
      if (f.width() <= 16) bits_to_f32(f, in, out, ctx);
      for (std::size_t i = 0; i < in.size(); ++i) {
        Context scalar;
        scalar.denormals_are_zero = daz;
        CAPTURE(i);
        CAPTURE(f.mantissa_bits);
        CAPTURE(daz);
        REQUIRE(float_bits(out[i]) == convert(f, formats::fp32, in[i], scalar));
      }
    }
  }
}

TEST_CASE("round_f32 equals scalar convert there and back, tf32 included") {
  const std::vector<float> in = edgy_floats(20000);
  for (const Format& f : {formats::tf32, formats::fp16, formats::bf16}) {
    for (int mode = 0; mode < rounding_mode_count; ++mode) {
      Context bulk_ctx;
      bulk_ctx.rounding = static_cast<RoundingMode>(mode);
      Context scalar_ctx = bulk_ctx;
      std::vector<float> out(in.size());
      round_f32(f, in, out, bulk_ctx);
      std::uint8_t scalar_flags = 0;
      for (std::size_t i = 0; i < in.size(); ++i) {
        scalar_ctx.flags = 0;
        scalar_ctx.stochastic_counter = i;
        const std::uint64_t narrow = convert(formats::fp32, f, float_bits(in[i]), scalar_ctx);
        scalar_flags |= scalar_ctx.flags;
        Context widen;
        REQUIRE(float_bits(out[i]) == convert(f, formats::fp32, narrow, widen));
      }
      CHECK(bulk_ctx.flags == scalar_flags);
    }
  }
}

TEST_CASE("round_f32_in_normal_range equals round_f32 on zeros and normals below the format's largest binade") {
  std::mt19937 rng(23);
  for (const Format& f : {formats::bf16, formats::fp16, formats::tf32}) {
    const int top = f == formats::fp16 ? 15 : 127;  // the format's largest binade: values stay below it
    for (const std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17}, std::size_t{4099}}) {
      std::vector<float> in(n);
      for (float& v : in) {  // exact zeros of both signs, and normals of every binade from -126 to top - 1 with random low bits
        const std::uint32_t sign = (rng() & 1u) << 31;
        const int binade = -126 + static_cast<int>(rng() % static_cast<unsigned>(top + 126));
        v = rng() % 7 == 0 ? bits_float(sign) : bits_float(sign | (static_cast<std::uint32_t>(binade + 127) << 23) | (rng() & 0x7FFFFFu));
      }
      for (int mode = 0; mode < rounding_mode_count; ++mode) {
        const std::string format = format_name(f);
        CAPTURE(format);
        CAPTURE(n);
        CAPTURE(mode);
        Context plain, in_range;
        plain.rounding = in_range.rounding = static_cast<RoundingMode>(mode);
        std::vector<float> expected(n), out(n);
        round_f32(f, in, expected, plain);
        round_f32_in_normal_range(f, in, out, in_range);
        std::size_t differ = 0;
        for (std::size_t i = 0; i < n; ++i) differ += float_bits(out[i]) != float_bits(expected[i]);
        CHECK(differ == 0);
        CHECK(in_range.flags == plain.flags);
        CHECK(in_range.stochastic_counter == plain.stochastic_counter);
      }
    }
  }
}

TEST_CASE("round_f32_with_bits: round_f32's values, flags and random words, f32_to_bits' patterns beside them; both read the largest magnitude") {
  // Every class of input (edgy_floats) in every mode, in place and not, at lengths around a whole
  // block of 16; then the in-normal-range variant on inputs that keep its promise.
  const std::vector<float> edgy = edgy_floats(4099);
  std::mt19937 rng(29);
  std::vector<float> normal(4099);
  for (float& v : normal)
    v = rng() % 7 == 0 ? 0.0f : bits_float(((rng() & 1u) << 31) | (static_cast<std::uint32_t>(1 + rng() % 253) << 23) | (rng() & 0x7FFFFFu));
  for (const Format& f : {formats::bf16, formats::fp16, formats::e4m3, formats::e5m2}) {
    for (const bool in_normal_range : {false, true}) {
      if (in_normal_range && f != formats::bf16) continue;  // the promise is below the format's largest binade: bf16's is float32's
      const std::vector<float>& source = in_normal_range ? normal : edgy;
      for (const std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17}, source.size()}) {
        for (int mode = 0; mode < rounding_mode_count; ++mode) {
          for (const bool in_place : {false, true}) {
            const std::string format = format_name(f);
            CAPTURE(format);
            CAPTURE(in_normal_range);
            CAPTURE(n);
            CAPTURE(mode);
            CAPTURE(in_place);
            const std::span<const float> in(source.data(), n);
            Context plain, patterns, both;
            plain.rounding = patterns.rounding = both.rounding = static_cast<RoundingMode>(mode);
            plain.stochastic_counter = patterns.stochastic_counter = both.stochastic_counter = 1000;
            std::vector<float> expected(n), out(in.begin(), in.end());
            std::vector<std::uint16_t> expected_bits(n), bits(n, 0xDEAD);
            // The reading starts above some inputs' magnitudes (kept where larger) and below the largest.
            std::uint32_t expected_largest = 0x00000100u;
            for (const float v : in) expected_largest = std::max(expected_largest, float_bits(v) & 0x7FFFFFFFu);
            std::uint32_t plain_largest = 0x00000100u;
            round_f32(f, in, expected, plain, &plain_largest);
            CHECK(plain_largest == expected_largest);
            f32_to_bits(f, in, expected_bits, patterns);
            std::uint32_t largest = 0x00000100u;
            if (in_place) round_f32_with_bits(f, out, out, bits, both, in_normal_range, &largest);
            else round_f32_with_bits(f, in, out, bits, both, in_normal_range, &largest);
            CHECK(largest == expected_largest);
            std::size_t differ = 0, differ_bits = 0;
            for (std::size_t i = 0; i < n; ++i) {
              differ += float_bits(out[i]) != float_bits(expected[i]);
              differ_bits += bits[i] != expected_bits[i];
            }
            CHECK(differ == 0);
            CHECK(differ_bits == 0);
            CHECK(both.flags == plain.flags);
            CHECK(both.stochastic_counter == plain.stochastic_counter);
          }
        }
      }
    }
  }
  Context ctx;
  std::vector<float> in(4), out(4);
  std::vector<std::uint16_t> short_bits(3);
  CHECK_THROWS_AS(round_f32_with_bits(formats::bf16, in, out, short_bits, ctx), std::invalid_argument);
}

TEST_CASE("round_f32 is narrow then widen; 8-bit outputs; length mismatches throw") {
  const std::vector<float> in = edgy_floats(5000);
  std::vector<float> rounded(in.size());
  Context ctx;
  round_f32(formats::e4m3, in, rounded, ctx);
  std::vector<std::uint8_t> bytes(in.size());
  Context ctx2;
  f32_to_bits(formats::e4m3, in, bytes, ctx2);
  CHECK(ctx.flags == ctx2.flags);
  for (std::size_t i = 0; i < in.size(); ++i) {
    Context widen;
    REQUIRE(float_bits(rounded[i]) == convert(formats::e4m3, formats::fp32, bytes[i], widen));
  }
  std::vector<std::uint16_t> short_out(3);
  CHECK_THROWS_AS(f32_to_bits(formats::fp16, in, short_out, ctx), std::invalid_argument);
  std::vector<std::uint8_t> narrow(in.size());
  CHECK_THROWS_AS(f32_to_bits(formats::fp16, in, narrow, ctx), std::invalid_argument);
  // A custom format takes the general path, with the same results.
  const Format e6m9{6, 9, Flavour::ieee};
  std::vector<std::uint16_t> custom(in.size());
  Context c1;
  f32_to_bits(e6m9, in, custom, c1);
  for (std::size_t i = 0; i < in.size(); ++i) {
    Context c2;
    REQUIRE(custom[i] == convert(formats::fp32, e6m9, float_bits(in[i]), c2));
  }
}

TEST_CASE("bulk: the kernels FPSCOPE_BULK_ISA forces are the ones that run (no quiet fallback)") {
  const char* forced = std::getenv("FPSCOPE_BULK_ISA");
  MESSAGE("bulk kernels running: " << std::string(bulk_kernel_isa()));
  if (forced != nullptr) CHECK(bulk_kernel_isa() == std::string_view(forced));
  CHECK(bulk_isa_supported("generic"));
  CHECK(!bulk_isa_supported("avx1024"));
}

namespace {
template <Format F>
void check_lean_cast() {
  int mismatches = 0;
  for (const bool before : {false, true}) {
    CastOptions options;
    options.saturate = true;
    options.tininess = before ? Tininess::before_rounding : Tininess::after_rounding;
    // Every 509th float32 pattern that is a zero or normal, and every pattern near F's smallest
    // normal and largest value (where the lean cast's two ranges and its saturation meet).
    std::vector<std::uint32_t> inputs;
    for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 509) inputs.push_back(static_cast<std::uint32_t>(u));
    const std::uint32_t min_normal32 = static_cast<std::uint32_t>(F.emin() + 127) << 23;
    Context widen;
    const std::uint32_t max32 = float_bits(to_float(F, F.max_finite_bits(), widen));
    for (const std::uint32_t edge : {min_normal32, max32, min_normal32 >> 1})
      for (std::uint32_t d = 0; d < 70000; ++d) inputs.insert(inputs.end(), {edge + d, edge - d, (edge + d) | 0x80000000u});
    for (const std::uint32_t u : inputs) {
      const std::uint32_t biased = (u >> 23) & 0xFF;
      if (biased == 255 || (biased == 0 && (u & 0x7FFFFFFFu) != 0)) continue;  // the precondition: zero or normal
      CastFlags lean_flags, full_flags;
      const std::uint32_t lean = saturating_nearest_even_from_normal<F>(u, before, lean_flags);
      const std::uint32_t full = cast_from_f32<F, RoundingMode::nearest_even>(u, options, 0, full_flags);
      if ((lean != full || lean_flags.flags() != full_flags.flags()) && ++mismatches < 5)
        MESSAGE(format_name(F), std::string(before ? " tininess before" : ""), " input bits ", u, ": lean ", lean, " flags ", int(lean_flags.flags()),
                ", cast ", full, " flags ", int(full_flags.flags()));
    }
  }
  CHECK_MESSAGE(mismatches == 0, format_name(F));
}
}  // namespace

TEST_CASE("the lean saturating nearest-even cast equals cast_from_f32 on zeros and normal float32") {
  check_lean_cast<formats::e4m3>();
  check_lean_cast<formats::e5m2>();
  check_lean_cast<formats::e2m1>();
  check_lean_cast<formats::e2m3>();
  check_lean_cast<formats::e3m2>();
  check_lean_cast<formats::fp16>();
}
