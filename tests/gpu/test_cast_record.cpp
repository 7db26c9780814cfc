// The recorded cast: rounded values, histogram and outcome counts against per-element scalar casts.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "fpscope/core/bits.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/gpu/cast_record.hpp"
#include "fpscope/gpu/cast_record_element.hpp"
#include "cast_tensor.hpp"

using namespace fpscope;

namespace {

// The scalar casts of `values` one element at a time under `before` (the context the recorded
// cast started from; element i draws stochastic word before.stochastic_counter + i): their
// counts, and whether `out` holds their values.
struct ScalarCasts {
  CastCounts counts;
  bool outputs_equal = true;
};
ScalarCasts scalar_casts(Format f, const std::vector<float>& values, const std::vector<float>& out, const Context& before) {
  ScalarCasts result;
  for (std::size_t i = 0; i < values.size(); ++i) {
    Context scalar = before;
    scalar.stochastic_counter = before.stochastic_counter + i;
    scalar.flags = 0;
    const std::uint64_t narrow = convert(formats::fp32, f, float_bits(values[i]), scalar);
    Context widen;
    result.outputs_equal = result.outputs_equal && float_bits(out[i]) == convert(f, formats::fp32, narrow, widen);
    const bool finite_in = std::isfinite(values[i]);
    result.counts.flushed_to_zero += finite_in && values[i] != 0 && is_zero(f, narrow);
    result.counts.made_subnormal += is_subnormal(f, narrow);
    result.counts.overflowed += finite_in && (scalar.flags & flag::overflow) != 0;
  }
  return result;
}

}  // namespace

TEST_CASE("cast_and_record equals element-by-element casts, counts included") {
  std::mt19937 rng(9);
  std::vector<float> values(50000);
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint32_t bits = rng();
    if (i % 3 == 0) bits = (bits & 0x807FFFFFu) | ((90u + rng() % 60u) << 23);  // around fp16's range
    values[i] = bits_float(bits);
  }
  values[0] = 0.0f;
  values[1] = 1e-9f;    // flushed in fp16
  values[2] = 70000.f;  // overflows fp16
  for (const Format f : {formats::fp16, formats::bf16, formats::e4m3, formats::e5m2}) {
    for (const bool saturate : {false, true}) {
      Context ctx;
      ctx.saturate = saturate;
      std::vector<float> out(values.size());
      ExponentHistogram histogram;
      CastCounts counts;
      const Context before = ctx;
      cast_and_record(f, values, out, ctx, histogram, counts);

      ExponentHistogram expected_histogram;
      expected_histogram.add(values);
      CHECK(histogram == expected_histogram);
      const ScalarCasts scalar = scalar_casts(f, values, out, before);
      REQUIRE(scalar.outputs_equal);
      const CastCounts& expected = scalar.counts;
      CAPTURE(f.exponent_bits);
      CAPTURE(saturate);
      CHECK(counts.flushed_to_zero == expected.flushed_to_zero);
      CHECK(counts.made_subnormal == expected.made_subnormal);
      CHECK(counts.overflowed == expected.overflowed);
      if (f != formats::bf16) CHECK(counts.flushed_to_zero > 0);  // bf16 keeps float32's range
      CHECK(counts.overflowed > 0);
    }
  }
}

// Blocks of 64K with no infinity, NaN or value in max's binade are counted from the output alone
// (zero outputs less zero inputs, nonzero outputs below min_normal), or not at all where every
// nonzero value is at least min_normal; the others in pairs. All three, in every mode, against
// the scalar cast one element at a time.
TEST_CASE("cast_and_record's counts, from the output alone or in pairs, equal the scalar casts' in every mode") {
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(5 * 65536 + 1000);
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = i % 8 == 1 ? (i % 16 == 1 ? -0.0f : 0.0f) : normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 40) - 30);
  values[65536 + 5] = 70000.0f;                                   // block 1: overflows fp16 and e4m3
  values[2 * 65536 + 9] = std::numeric_limits<float>::quiet_NaN();  // block 2: a NaN
  for (std::size_t i = 0; i < 65536; i += 7) values[i] = 32000.0f;  // block 0: just below fp16's max binade (2^15)
  // Block 3: every nonzero value at least 2^-6, e4m3's min_normal (2^-6 itself among them):
  // rounded with no count pass. Block 4: its lowest binade one below fp16's and e5m2's min_normal
  // (2^-14), some values made subnormal, some rounding up to min_normal: counted.
  const auto spread = [&](int lowest, int binades) {
    const float sign = rng() % 2 ? -1.0f : 1.0f;
    return sign * std::ldexp(1.0f + static_cast<float>(rng() % 4096) / 4096.0f, lowest + static_cast<int>(rng() % static_cast<unsigned>(binades)));
  };
  for (std::size_t i = 3 * 65536; i < 4 * 65536; ++i) values[i] = i % 8 == 1 ? 0.0f : i % 8 == 2 ? std::ldexp(1.0f, -6) : spread(-6, 12);
  for (std::size_t i = 4 * 65536; i < 5 * 65536; ++i) values[i] = i % 8 == 1 ? 0.0f : spread(-15, 3);
  for (std::size_t i = 5 * 65536; i < values.size(); i += 7) values[i] = 65520.0f;  // the tail: in it, rounding to max or beyond
  for (const Format f : {formats::fp16, formats::bf16, formats::e4m3, formats::e5m2}) {
    for (int mode = 0; mode < rounding_mode_count; ++mode) {
      for (const bool saturate : {false, true}) {
        Context ctx;
        ctx.rounding = static_cast<RoundingMode>(mode);
        ctx.saturate = saturate;
        ctx.stochastic_seed = 5;
        ctx.stochastic_counter = 77;
        std::vector<float> out(values.size());
        ExponentHistogram histogram;
        CastCounts counts;
        const Context before = ctx;
        cast_and_record(f, values, out, ctx, histogram, counts);
        const ScalarCasts scalar = scalar_casts(f, values, out, before);
        CAPTURE(f.exponent_bits);
        CAPTURE(mode);
        CAPTURE(saturate);
        CHECK(scalar.outputs_equal);
        CHECK(counts == scalar.counts);
        CHECK(ctx.stochastic_counter == 77 + values.size());
        if (f != formats::bf16 && ctx.rounding != RoundingMode::odd) CHECK(counts.flushed_to_zero > 0);  // round to odd never gives 0
      }
    }
  }
}

TEST_CASE("in place, and the histogram is of the values before the cast") {
  std::vector<float> values{1e-9f, 0.1f, 70000.0f, -3.0f};
  ExponentHistogram histogram;
  CastCounts counts;
  Context ctx;
  cast_and_record(formats::fp16, values, values, ctx, histogram, counts);
  CHECK(histogram.count(-30) == 1);  // 1e-9 before the cast, though it is now 0
  CHECK(values[0] == 0.0f);
  CHECK(values[2] == std::numeric_limits<float>::infinity());
  CHECK(counts == CastCounts{1, 0, 1});

  // Across many histogram blocks (64K) and cast chunks (4096), with a ragged end: in place equals
  // out of place, and the histogram is the original values'.
  std::mt19937 rng(12);
  std::vector<float> big(300001);
  for (float& v : big) v = bits_float((rng() & 0x807FFFFFu) | ((95u + rng() % 40u) << 23));
  const std::vector<float> original = big;
  std::vector<float> separate(big.size());
  ExponentHistogram h_in_place, h_separate, expected;
  CastCounts c_in_place, c_separate;
  Context a, b;
  cast_and_record(formats::fp16, original, separate, a, h_separate, c_separate);
  cast_and_record(formats::fp16, big, big, b, h_in_place, c_in_place);
  expected.add(original);
  CHECK(std::memcmp(big.data(), separate.data(), sizeof(float) * big.size()) == 0);
  CHECK(h_in_place == expected);
  CHECK(h_separate == expected);
  CHECK(c_in_place == c_separate);
  CHECK(c_in_place.flushed_to_zero > 0);

  // A partly overlapping output would overwrite values before they are counted: refused.
  std::vector<float> buffer(10000, 1.0f);
  Context c;
  CHECK_THROWS_AS(cast_and_record(formats::fp16, std::span<const float>(buffer.data(), 5000), std::span<float>(buffer.data() + 100, 5000), c,
                                  h_separate, c_separate),
                  std::invalid_argument);
}

namespace {

// The CUDA kernel's per-element math, run on the host over a whole tensor.
template <Format F, RoundingMode Mode>
void cast_like_the_kernel(const std::vector<float>& in, std::uint64_t seed, std::uint64_t first, std::vector<float>& out,
                          ExponentHistogram& histogram, CastCounts& counts) {
  std::array<std::uint64_t, bin_slot_count> slots{};
  out.resize(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    const CastRecordElement e = cast_record_element<F, Mode>(float_bits(in[i]), seed, first, i);
    out[i] = bits_float(e.rounded);
    ++slots[static_cast<std::size_t>(e.slot)];
    counts.flushed_to_zero += e.flushed_to_zero;
    counts.made_subnormal += e.made_subnormal;
    counts.overflowed += e.overflowed;
  }
  for (int b = min_binade; b <= max_binade; ++b) histogram.set_count(b, slots[static_cast<std::size_t>(b - min_binade)]);
  histogram.set_specials(slots[bin_zero], slots[bin_infinity], slots[bin_nan]);
}

template <Format F>
void check_kernel_math_in_every_mode(const std::vector<float>& values) {
  auto one_mode = [&]<RoundingMode Mode>() {
    Context ctx;
    ctx.rounding = Mode;
    ctx.stochastic_seed = 7;
    ctx.stochastic_counter = 1000;
    std::vector<float> expected(values.size()), got;
    ExponentHistogram expected_histogram, got_histogram;
    CastCounts expected_counts, got_counts;
    cast_and_record(F, values, expected, ctx, expected_histogram, expected_counts);
    cast_like_the_kernel<F, Mode>(values, 7, 1000, got, got_histogram, got_counts);
    CAPTURE(F.mantissa_bits);
    CAPTURE(static_cast<int>(Mode));
    CHECK(std::memcmp(got.data(), expected.data(), sizeof(float) * values.size()) == 0);
    CHECK(got_histogram == expected_histogram);
    CHECK(got_counts.flushed_to_zero == expected_counts.flushed_to_zero);
    CHECK(got_counts.made_subnormal == expected_counts.made_subnormal);
    CHECK(got_counts.overflowed == expected_counts.overflowed);
    CHECK(ctx.stochastic_counter == 1000 + values.size());  // the next cast's first word
  };
  one_mode.template operator()<RoundingMode::nearest_even>();
  one_mode.template operator()<RoundingMode::nearest_away>();
  one_mode.template operator()<RoundingMode::toward_zero>();
  one_mode.template operator()<RoundingMode::toward_positive>();
  one_mode.template operator()<RoundingMode::toward_negative>();
  one_mode.template operator()<RoundingMode::odd>();
  one_mode.template operator()<RoundingMode::stochastic>();
}

}  // namespace

TEST_CASE("the CUDA cast kernel's element math equals cast_and_record in all seven modes, stochastic words included") {
  std::mt19937 rng(21);
  std::vector<float> values(40000);
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint32_t bits = rng();
    if (i % 4 != 0) bits = (bits & 0x807FFFFFu) | ((90u + rng() % 60u) << 23);  // around fp16's range
    values[i] = bits_float(bits);
  }
  values[0] = 0.0f;
  values[1] = std::numeric_limits<float>::infinity();
  values[2] = std::numeric_limits<float>::quiet_NaN();
  check_kernel_math_in_every_mode<formats::fp16>(values);
  check_kernel_math_in_every_mode<formats::bf16>(values);
}

TEST_CASE("PiecewiseCast (and cast_values, made of it): pieces in any order give one pass's bits, histogram, counts, flags and stochastic counter") {
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::size_t n = 70000;
  std::vector<float> values(n);
  for (float& v : values) v = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 60) - 40);  // flushes, subnormals
  values[123] = 1e30f;  // an overflow
  values[4567] = std::numeric_limits<float>::quiet_NaN();
  for (const RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::stochastic})
    for (const bool low : {true, false}) {
      CAPTURE(static_cast<int>(mode));
      CAPTURE(low);
      Context whole_ctx, pieces_ctx;
      whole_ctx.rounding = pieces_ctx.rounding = mode;
      whole_ctx.stochastic_seed = pieces_ctx.stochastic_seed = 5;
      whole_ctx.stochastic_counter = pieces_ctx.stochastic_counter = 1000;
      TensorRecord whole_record, pieces_record;
      std::vector<float> whole = values, pieces = values;
      // One pass over the whole tensor: cast_and_record (or, for fp32, the histogram alone).
      if (low) {
        whole_record.cast.emplace();
        cast_and_record(formats::fp16, whole, whole, whole_ctx, whole_record.histogram, *whole_record.cast);
      } else {
        whole_record.histogram.add(whole);
      }
      {
        PiecewiseCast cast(formats::fp16, low, pieces_ctx, &pieces_record, n);
        // Pieces of uneven sizes, last first: offsets alone place each piece's random words.
        const std::vector<std::size_t> starts{0, 1, 4095, 30000, 65536, 69999};
        for (std::size_t p = starts.size(); p-- > 0;) {
          const std::size_t end = p + 1 < starts.size() ? starts[p + 1] : n;
          cast.piece(std::span<float>(pieces.data() + starts[p], end - starts[p]), starts[p]);
        }
        cast.finish();
      }
      std::size_t differ = 0;
      for (std::size_t i = 0; i < n; ++i) differ += std::memcmp(&whole[i], &pieces[i], sizeof(float)) != 0;
      CHECK(differ == 0);
      CHECK(pieces_ctx.flags == whole_ctx.flags);
      CHECK(pieces_ctx.stochastic_counter == whole_ctx.stochastic_counter);
      CHECK(pieces_record.histogram == whole_record.histogram);
      REQUIRE(pieces_record.cast.has_value() == low);
      REQUIRE(whole_record.cast.has_value() == low);
      if (!low) continue;
      CHECK(pieces_record.cast->flushed_to_zero == whole_record.cast->flushed_to_zero);
      CHECK(pieces_record.cast->made_subnormal == whole_record.cast->made_subnormal);
      CHECK(pieces_record.cast->overflowed == whole_record.cast->overflowed);
      CHECK(whole_record.cast->overflowed > 0);
      CHECK(whole_record.cast->flushed_to_zero > 0);
      CHECK(whole_record.cast->made_subnormal > 0);
    }
}

TEST_CASE("cast_copy for products only: the products, flags and stochastic counter of the written cast, the values made from the bits when asked") {
  // The MLP's bf16 weights and first inputs are read by their products alone, so their casts may
  // write only the bits the bf16 kernels take (OutputReaders::products_only). Nothing may tell the
  // difference: each product has the bits it has on the written cast, and the values, made from
  // the bits where a product in float32 (or anything else) asks for them, are the written ones.
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Eigen::Index out = 64, in = 300, batch = 150;
  Eigen::MatrixXf master(out, in), x(in, batch), g(out, batch);
  const auto bits = [](const Eigen::MatrixXf& m) {
    std::vector<std::uint32_t> b(static_cast<std::size_t>(m.size()));
    std::memcpy(b.data(), m.data(), b.size() * 4);
    return b;
  };
  const auto bf16_value = [](float v) { return bits_float(float_bits(v) & 0xFFFF0000u); };  // truncated: a bf16 value
  const bool kernels = gemm_has_bf16_products();
  for (const RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::stochastic})
    // Tiny weights (all normal, down to about 2^-115) make products with the inputs (down to
    // about 2^-15) that may be subnormal: those run in float32, as the weights' own scan says.
    for (const bool tiny : {false, true})
      for (const bool recorded : {false, true}) {
        CAPTURE(static_cast<int>(mode));
        CAPTURE(tiny);
        CAPTURE(recorded);
        const float weight_scale = tiny ? std::ldexp(1.0f, -100) : 1.0f;
        for (Eigen::Index i = 0; i < master.size(); ++i) master.data()[i] = normal(rng) * weight_scale;  // not bf16 values: they round
        for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = bf16_value(normal(rng));
        for (Eigen::Index i = 0; i < g.size(); ++i) g.data()[i] = bf16_value(normal(rng));
        Context written_ctx, bits_ctx;
        written_ctx.rounding = bits_ctx.rounding = mode;
        written_ctx.stochastic_seed = bits_ctx.stochastic_seed = 9;
        written_ctx.stochastic_counter = bits_ctx.stochastic_counter = 77;
        TensorRecord written_record, bits_record;
        Eigen::MatrixXf written, from_bits = Eigen::MatrixXf::Constant(out, in, std::numeric_limits<float>::quiet_NaN());
        ProductOperand written_operand(written), bits_operand(from_bits), input(x), gradient(g);
        cast_copy(formats::bf16, true, master, written, written_ctx, recorded ? &written_record : nullptr, std::nullopt, FeatureAxis::second,
                  &written_operand);
        const GemmCounts before = gemm_counts();
        cast_copy(formats::bf16, true, master, from_bits, bits_ctx, recorded ? &bits_record : nullptr, std::nullopt, FeatureAxis::second,
                  &bits_operand, OutputReaders::products_only);
        // Left unwritten only where the kernels take bits and nothing is recorded (a record's
        // histogram is of the values).
        const bool unwritten = kernels && !recorded;
        CHECK(std::isnan(from_bits(0, 0)) == unwritten);
        CHECK(std::isnan(from_bits(out - 1, in - 1)) == unwritten);
        CHECK(gemm_counts().bf16_packs - before.bf16_packs == (kernels ? 1u : 0u));
        CHECK(bits_ctx.flags == written_ctx.flags);
        CHECK(bits_ctx.stochastic_counter == written_ctx.stochastic_counter);
        if (recorded) CHECK(bits_record.histogram == written_record.histogram);
        // The forward product (weights x inputs) and the input gradient's (weights^T x gradient).
        const Eigen::MatrixXf y_written = gemm(written_operand, false, input, false), dx_written = gemm(written_operand, true, gradient, false);
        const GemmCounts products = gemm_counts();
        const Eigen::MatrixXf y_bits = gemm(bits_operand, false, input, false), dx_bits = gemm(bits_operand, true, gradient, false);
        CHECK(gemm_counts().bf16 - products.bf16 == (kernels && !tiny ? 2u : 0u));
        CHECK(bits(y_bits) == bits(y_written));
        CHECK(bits(dx_bits) == bits(dx_written));
        // The tiny weights' products asked for the values: made then; otherwise here.
        if (unwritten) CHECK(std::isnan(from_bits(0, 0)) == !tiny);
        CHECK(bits(bits_operand.values()) == bits(written));
        CHECK(bits(from_bits) == bits(written));
      }
}
