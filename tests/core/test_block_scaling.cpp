// Block scaling (OCP MX, MXINT8, NVFP4) and the E8M0 scale, against a reference written here from
// the specification's algorithm in double arithmetic, with the published constants typed in: no
// code is shared with the implementation but the float32 arithmetic the rules prescribe.
// tests/formats/block_scaling_ml_dtypes.py holds the same operation against NumPy + ml_dtypes.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cfenv>
#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/decimal.hpp"
#include "fpscope/core/e8m0.hpp"
#include "fpscope/core/names.hpp"

using namespace fpscope;

namespace {

constexpr float inf = std::numeric_limits<float>::infinity();
constexpr float quiet_nan = std::numeric_limits<float>::quiet_NaN();

// The published numbers of each element type (OCP MX v1.0 tables 1-4; OCP FP8 v1.0): the
// exponent of the largest power of two, the smallest normal's exponent, fraction bits, largest.
struct ElementSpec {
  int emax;
  int emin;
  int mantissa_bits;
  double max;
  bool integer;
};
ElementSpec spec_of(const BlockFormat& f) {
  if (f.elements == BlockFormat::Elements::int8) return {0, 0, 6, 127.0 / 64, true};
  if (f.element == formats::e4m3) return {8, -6, 3, 448, false};
  if (f.element == formats::e5m2) return {15, -14, 2, 57344, false};
  if (f.element == formats::e2m3) return {2, 0, 3, 7.5, false};
  if (f.element == formats::e3m2) return {4, -2, 2, 28, false};
  if (f.element == formats::e2m1) return {2, 0, 1, 6, false};
  FAIL("no published numbers for this element type");
  return {};
}

// Rounds a non-negative multiple count n (an exact double) to an integer in `mode`, for a value
// of sign `negative`; sets inexact.
double round_count(double n, bool negative, RoundingMode mode, bool& inexact) {
  const double down = std::floor(n);
  inexact = down != n;
  switch (mode) {
    case RoundingMode::nearest_even: {
      const double fraction = n - down;
      if (fraction > 0.5) return down + 1;
      if (fraction < 0.5) return down;
      return std::fmod(down, 2.0) == 0 ? down : down + 1;
    }
    case RoundingMode::nearest_away: return n - down >= 0.5 ? down + 1 : down;
    case RoundingMode::toward_zero: return down;
    case RoundingMode::toward_positive: return inexact && !negative ? down + 1 : down;
    case RoundingMode::toward_negative: return inexact && negative ? down + 1 : down;
    case RoundingMode::odd: return inexact && std::fmod(down, 2.0) == 0 ? down + 1 : down;
    case RoundingMode::stochastic: break;
  }
  FAIL("no deterministic reference for stochastic rounding");
  return 0;
}

struct ReferenceElement {
  double value;  // the element's value before the block scale (signed; -0.0 for a negative zero)
  bool flushed, subnormal, saturated;
};

// y (exact) on the element's grid: quantum 2^(max(floor(log2|y|), emin) - m), clamped at max.
ReferenceElement reference_element(const ElementSpec& e, double y, RoundingMode mode, bool has_negative_zero = true) {
  const bool negative = std::signbit(y);
  const double magnitude = std::fabs(y);
  if (magnitude == 0) return {negative && has_negative_zero ? -0.0 : 0.0, false, false, false};
  double quantum = 0;
  if (e.integer) {
    quantum = std::ldexp(1.0, -e.mantissa_bits);
  } else {
    int exponent = 0;
    std::frexp(magnitude, &exponent);  // magnitude = f * 2^exponent, f in [0.5, 1)
    quantum = std::ldexp(1.0, std::max(exponent - 1, e.emin) - e.mantissa_bits);
  }
  bool inexact = false;
  double rounded = round_count(magnitude / quantum, negative, mode, inexact) * quantum;
  const bool saturated = rounded > e.max;
  if (saturated) rounded = e.max;
  const bool flushed = rounded == 0;
  const bool subnormal = !e.integer && rounded != 0 && rounded < std::ldexp(1.0, e.emin);
  return {negative ? (flushed && !has_negative_zero ? 0.0 : -rounded) : rounded, flushed, subnormal, saturated};
}

// The shared exponent X of an MX block, or nullopt-like 999 for a NaN scale.
constexpr int nan_scale = 999;
int reference_shared_exponent(const BlockFormat& f, ScaleRule rule, const std::vector<float>& block) {
  const ElementSpec e = spec_of(f);
  double amax = 0;
  for (const float v : block) {
    if (std::isnan(v) || std::isinf(v)) return nan_scale;
    amax = std::max(amax, std::fabs(static_cast<double>(v)));
  }
  if (amax == 0) return -127;
  int exponent = 0;
  std::frexp(amax, &exponent);
  int x = 0;
  switch (rule) {
    case ScaleRule::floor: x = exponent - 1 - e.emax; break;
    case ScaleRule::round_up:
      x = exponent - 1 - e.emax;
      while (amax / std::ldexp(1.0, x) > e.max) ++x;
      break;
    case ScaleRule::rceil: {
      const float product = static_cast<float>(amax) * (1.0f / static_cast<float>(e.max));  // the rule's float32 arithmetic
      if (product == 0.0f) {
        x = -127;
        break;
      }
      x = -200;
      while (std::ldexp(1.0, x) < static_cast<double>(product)) ++x;
      x = std::min(x, 127);  // the instruction saturates (satfinite)
      break;
    }
    case ScaleRule::even: {
      const double quantum = std::ldexp(1.0, exponent - 1 - e.mantissa_bits);
      bool inexact = false;
      const double rounded = round_count(amax / quantum, false, RoundingMode::nearest_even, inexact) * quantum;
      std::frexp(rounded, &exponent);
      x = exponent - 1 - e.emax;
      break;
    }
  }
  if (x > 127) return nan_scale;
  return std::max(x, -127);
}

struct Quantized {
  std::vector<std::uint8_t> codes, scales;
  std::vector<BlockOutcome> outcomes;
  BlockStatistics statistics;
  float tensor_scale = 0;
  std::uint8_t flags = 0;
};

Quantized quantize(const BlockFormat& f, ScaleRule rule, const BlockLayout& layout, const std::vector<float>& values,
                   RoundingMode mode = RoundingMode::nearest_even, std::uint64_t seed = 0) {
  Quantized q;
  q.codes.resize(values.size());
  q.scales.resize(layout.block_count());
  q.outcomes.resize(layout.block_count());
  Context ctx;
  ctx.rounding = mode;
  ctx.stochastic_seed = seed;
  block_quantize(f, rule, layout, values, q.codes, q.scales, q.tensor_scale, ctx, &q.statistics, q.outcomes);
  q.flags = ctx.flags;
  return q;
}

// The same quantization, with statistics and without per-block outcomes, through block_quantize
// (the vector kernels, where they take the blocks) and through the scalar path.
struct FastAndScalar {
  Quantized fast, scalar;
};
FastAndScalar quantize_both(const BlockFormat& f, ScaleRule rule, const BlockLayout& layout, const std::vector<float>& values,
                            RoundingMode mode = RoundingMode::nearest_even, std::uint64_t seed = 0) {
  FastAndScalar both;
  for (Quantized* q : {&both.fast, &both.scalar}) {
    q->codes.resize(values.size());
    q->scales.resize(layout.block_count());
    Context ctx;
    ctx.rounding = mode;
    ctx.stochastic_seed = seed;
    if (q == &both.fast) block_quantize(f, rule, layout, values, q->codes, q->scales, q->tensor_scale, ctx, &q->statistics);
    else block_quantize_scalar(f, rule, layout, values, q->codes, q->scales, q->tensor_scale, ctx, &q->statistics, {});
    q->flags = ctx.flags;
  }
  return both;
}

std::uint32_t bits_of(float v) { return std::bit_cast<std::uint32_t>(v); }

// Random blocks of mixed magnitudes, with the adversarial ones every rule must get right.
std::vector<std::vector<float>> test_blocks(const BlockFormat& f, int block_size) {
  const ElementSpec e = spec_of(f);
  std::mt19937 random(20261122);
  std::vector<std::vector<float>> blocks;
  const auto random_block = [&](int spread, int centre) {
    std::vector<float> block(static_cast<std::size_t>(block_size));
    std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
    std::uniform_int_distribution<int> exponent(centre - spread, centre + spread);
    for (float& v : block) v = std::ldexp(mantissa(random), exponent(random)) * (random() % 2 != 0 ? -1.0f : 1.0f);
    return block;
  };
  for (int centre : {-140, -126, -60, -20, -3, 0, 5, 30, 100, 125})
    for (int spread : {0, 2, 6, 14, 40}) blocks.push_back(random_block(spread, centre));
  const auto with_amax = [&](float amax, float rest) {
    std::vector<float> block = random_block(3, rest == 0 ? -149 : static_cast<int>(std::floor(std::log2(std::fabs(rest)))));
    block[3] = amax;
    return block;
  };
  const float max = static_cast<float>(e.max);
  blocks.push_back(std::vector<float>(static_cast<std::size_t>(block_size), 0.0f));                // all zero
  blocks.push_back(std::vector<float>(static_cast<std::size_t>(block_size), -0.0f));               // all -0
  blocks.push_back(with_amax(quiet_nan, 1.0f));                                                     // one NaN
  blocks.push_back(with_amax(-inf, 1.0f));                                                          // one infinity
  blocks.push_back(with_amax(3.0e38f, 1.0f));                                                       // a huge outlier
  blocks.push_back(with_amax(std::numeric_limits<float>::max(), 1e30f));                            // float32's largest
  blocks.push_back(with_amax(1e-30f, 1e-40f));                                                      // tiny, subnormal rest
  blocks.push_back(with_amax(std::numeric_limits<float>::denorm_min(), 0.0f));                      // the smallest subnormal
  for (int k : {-130, -100, -5, 0, 7, 100}) {
    blocks.push_back(with_amax(std::ldexp(1.0f, k), std::ldexp(1.0f, k - 2)));                      // amax a power of two
    const float at_max = std::ldexp(max, k - e.emax);                                               // amax = max * 2^k: round_up's edge
    blocks.push_back(with_amax(at_max, at_max / 8));
    blocks.push_back(with_amax(std::nextafter(at_max, inf), at_max / 8));
    blocks.push_back(with_amax(std::nextafter(at_max, 0.0f), at_max / 8));
    // even's edge: amax halfway between the two largest significands of the binade's grid.
    const float top = std::ldexp(1.0f, k + 1);
    const float half_ulp = std::ldexp(1.0f, k - spec_of(f).mantissa_bits - 1);
    blocks.push_back(with_amax(top - half_ulp, top / 8));
    blocks.push_back(with_amax(std::nextafter(top - half_ulp, 0.0f), top / 8));
    blocks.push_back(with_amax(std::nextafter(top - half_ulp, inf), top / 8));
    blocks.push_back(with_amax(top - 3 * half_ulp, top / 8));  // a tie that rounds down to even
  }
  // rceil's edge: the largest amax whose float32 product with 1/max is still at most 2^k.
  const float reciprocal = 1.0f / max;
  for (int k : {-3, 0, 9}) {
    float amax = std::ldexp(max, k);
    while (amax * reciprocal > std::ldexp(1.0f, k)) amax = std::nextafter(amax, 0.0f);
    while (std::nextafter(amax, inf) * reciprocal <= std::ldexp(1.0f, k)) amax = std::nextafter(amax, inf);
    blocks.push_back(with_amax(amax, amax / 4));
    blocks.push_back(with_amax(std::nextafter(amax, inf), amax / 4));
  }
  return blocks;
}

// Every block of `blocks` quantized along rows against the reference, in `mode`.
void check_mx_against_reference(const BlockFormat& f, ScaleRule rule, RoundingMode mode) {
  const ElementSpec e = spec_of(f);
  const auto blocks = test_blocks(f, f.block_size);
  std::vector<float> values;
  for (const auto& block : blocks) values.insert(values.end(), block.begin(), block.end());
  const BlockLayout layout{blocks.size(), static_cast<std::size_t>(f.block_size), BlockAxis::rows, f.block_size};
  const Quantized q = quantize(f, rule, layout, values, mode);
  std::vector<float> dequantized(values.size());
  block_dequantize(f, layout, q.codes, q.scales, q.tensor_scale, dequantized);
  int mismatches = 0;
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const int x = reference_shared_exponent(f, rule, blocks[b]);
    const std::uint8_t expected_scale = x == nan_scale ? e8m0::nan_code : static_cast<std::uint8_t>(x + 127);
    if (q.scales[b] != expected_scale) {
      if (++mismatches < 10)
        MESSAGE(block_format_name(f), " ", scale_rule_name(rule), " block ", b, ": scale code ", int(q.scales[b]), ", expected ",
                int(expected_scale));
      continue;
    }
    BlockOutcome expected_outcome;
    for (std::size_t j = 0; j < blocks[b].size(); ++j) {
      const std::size_t i = b * static_cast<std::size_t>(f.block_size) + j;
      if (x == nan_scale) {
        if (!std::isnan(dequantized[i]) && ++mismatches < 10) MESSAGE("NaN block ", b, " element ", j, " reads ", dequantized[i]);
        continue;
      }
      const float v = blocks[b][j];
      const ReferenceElement r = reference_element(e, static_cast<double>(v) / std::ldexp(1.0, x), mode);
      expected_outcome.flushed_to_zero += r.flushed && v != 0;
      expected_outcome.made_subnormal += r.subnormal;
      expected_outcome.saturated += r.saturated;
      const float element = block_element_value(f, q.codes[i]);
      const float expected_dequantized = static_cast<float>(r.value * std::ldexp(1.0, x));
      const bool element_ok = bits_of(element) == bits_of(static_cast<float>(r.value)) ||
                              (e.integer && r.value == 0 && element == 0);  // MXINT8 has one zero
      const bool dequantized_ok = bits_of(dequantized[i]) == bits_of(expected_dequantized) ||
                                  (e.integer && expected_dequantized == 0 && dequantized[i] == 0);
      if ((!element_ok || !dequantized_ok) && ++mismatches < 10)
        MESSAGE(block_format_name(f), " ", scale_rule_name(rule), " ", rounding_mode_name(mode), " block ", b, " element ", j, ": ",
                v, " / 2^", x, " -> ", element, " (", dequantized[i], "), expected ", r.value, " (", expected_dequantized, ")");
    }
    if (!(q.outcomes[b] == expected_outcome) && ++mismatches < 10)
      MESSAGE("block ", b, " counts flushed/subnormal/saturated ", q.outcomes[b].flushed_to_zero, "/", q.outcomes[b].made_subnormal,
              "/", q.outcomes[b].saturated, ", expected ", expected_outcome.flushed_to_zero, "/", expected_outcome.made_subnormal, "/",
              expected_outcome.saturated);
  }
  CHECK_MESSAGE(mismatches == 0, block_format_name(f), " ", scale_rule_name(rule), " ", rounding_mode_name(mode), ": ", mismatches,
                " mismatches over ", blocks.size(), " blocks");
}

}  // namespace

TEST_CASE("E8M0: every code decodes to its power of two, 0xFF to NaN") {
  for (int code = 0; code < 255; ++code)
    CHECK(static_cast<double>(e8m0::to_float(static_cast<std::uint8_t>(code))) == std::ldexp(1.0, code - 127));
  CHECK(std::isnan(e8m0::to_float(0xFF)));
}

TEST_CASE("E8M0: float32 to E8M0 as ml_dtypes' float8_e8m0fnu converts") {
  Context ctx;
  const auto code = [&](float v) { return int(e8m0::from_float(v, ctx)); };
  // Observed with ml_dtypes 0.6: nearest powers of two, a tie (1.5 * 2^k) going up.
  CHECK(code(1.0f) == 0x7F);
  CHECK(code(1.5f) == 0x80);
  CHECK(code(std::nextafter(1.5f, 0.0f)) == 0x7F);
  CHECK(code(3.0f) == 0x81);
  CHECK(code(2.9f) == 0x80);
  CHECK(code(std::ldexp(1.0f, -127)) == 0x00);
  CHECK(code(std::ldexp(1.0f, -128)) == 0x00);  // no zero: the smallest code
  CHECK(code(std::numeric_limits<float>::denorm_min()) == 0x00);
  CHECK(code(1.7e38f) == 0xFE);
  CHECK(code(std::ldexp(1.5f, 127)) == 0xFF);  // rounds to 2^128: overflow
  CHECK(code(0.0f) == 0xFF);
  CHECK(code(-0.0f) == 0xFF);
  CHECK(code(-2.0f) == 0xFF);
  CHECK(code(inf) == 0xFF);
  CHECK(code(quiet_nan) == 0xFF);
  Context up;
  up.rounding = RoundingMode::toward_positive;
  CHECK(int(e8m0::from_float(std::nextafter(1.0f, 2.0f), up)) == 0x80);
  CHECK(up.flags == flag::inexact);
  Context down;
  down.rounding = RoundingMode::toward_zero;
  CHECK(int(e8m0::from_float(1.99f, down)) == 0x7F);
}

TEST_CASE("E8M0: a decimal number rounds to E8M0 as its exact value would, not through the nearest float32") {
  const auto code = [](const char* text, RoundingMode mode, std::uint8_t* flags = nullptr) {
    Context ctx;
    ctx.rounding = mode;
    const int c = round_number_e8m0(parse_number(text), ctx);
    if (flags != nullptr) *flags = ctx.flags;
    return c;
  };
  // Just below the tie 1.5: the nearest float32 is 1.5 itself, which would go up to 2.
  CHECK(code("1.49999999999999999", RoundingMode::nearest_even) == 0x7F);
  CHECK(code("1.5", RoundingMode::nearest_even) == 0x80);
  CHECK(code("1.50000000000000001", RoundingMode::nearest_even) == 0x80);
  // Just above a power of two: the nearest float32 is the power itself, exact, where the number is not.
  std::uint8_t flags = 0;
  CHECK(code("1.00000000000000001", RoundingMode::toward_positive, &flags) == 0x80);
  CHECK(flags == flag::inexact);
  CHECK(code("1.00000000000000001", RoundingMode::toward_zero, &flags) == 0x7F);
  CHECK(flags == flag::inexact);
  CHECK(code("1", RoundingMode::toward_positive, &flags) == 0x7F);
  CHECK(flags == 0);
  CHECK(code("0x1p-127", RoundingMode::nearest_even) == 0x00);
  CHECK(code("1e-60", RoundingMode::nearest_even, &flags) == 0x00);  // no zero: the smallest code
  CHECK(flags == (flag::underflow | flag::inexact));
  CHECK(code("0x1.7ffffffffffffffp127", RoundingMode::nearest_even) == 0xFE);
  CHECK(code("1e300", RoundingMode::nearest_even, &flags) == 0xFF);  // overflow: NaN
  CHECK(code("1e300", RoundingMode::toward_zero) == 0xFE);
  CHECK(code("0", RoundingMode::nearest_even, &flags) == 0xFF);
  CHECK(flags == flag::invalid);
  CHECK(code("-2", RoundingMode::nearest_even) == 0xFF);
  CHECK(code("nan", RoundingMode::nearest_even) == 0xFF);
  // Every code's own value comes back to it.
  for (int c = 0; c < 255; ++c) {
    const std::string text = exact_decimal(formats::fp32, float_bits(e8m0::to_float(static_cast<std::uint8_t>(c))));
    CHECK(code(text.c_str(), RoundingMode::nearest_even) == c);
  }
}

TEST_CASE("block formats: names and the published element constants") {
  for (const BlockFormat& f : named_block_formats()) {
    CHECK(parse_block_format(block_format_name(f)) == f);
    const ElementSpec e = spec_of(f);
    CHECK(f.element_emax() == e.emax);
    CHECK(static_cast<double>(f.element_max()) == e.max);
  }
  CHECK(parse_block_format("MXFP8") == block_formats::mxfp8_e4m3);
  CHECK(parse_block_format("nvfp4").block_size == 16);
  CHECK_THROWS_AS(parse_block_format("mxfp5"), UnknownNameError);
  for (const ScaleRule rule : all_scale_rules) CHECK(parse_scale_rule(scale_rule_name(rule)) == rule);
  CHECK(parse_scale_rule("ocp") == ScaleRule::floor);
  CHECK_THROWS_AS(parse_scale_rule("nearest-ish"), UnknownNameError);
}

TEST_CASE("MX block quantization equals the reference for every format, scale rule and rounding mode") {
  for (const BlockFormat& f : named_block_formats()) {
    if (f.scale != BlockFormat::Scale::e8m0) continue;
    for (const ScaleRule rule : all_scale_rules)
      for (const RoundingMode mode : deterministic_rounding_modes) check_mx_against_reference(f, rule, mode);
  }
}

TEST_CASE("the scale rules disagree where they should") {
  const BlockFormat f = block_formats::mxfp8_e4m3;
  const auto scale_of = [&](ScaleRule rule, float amax) {
    return int(mx_scale_code(f, rule, std::bit_cast<std::uint32_t>(amax)));
  };
  // 448 fits E4M3 exactly: floor and round-up agree (2^0); 449 saturates under floor only.
  CHECK(scale_of(ScaleRule::floor, 448.0f) == 127);
  CHECK(scale_of(ScaleRule::round_up, 448.0f) == 127);
  CHECK(scale_of(ScaleRule::floor, 449.0f) == 127);
  CHECK(scale_of(ScaleRule::round_up, 449.0f) == 128);
  // 500 rounds to 512 at E4M3's precision: even moves up a binade, floor saturates.
  CHECK(scale_of(ScaleRule::even, 500.0f) == 128);
  CHECK(scale_of(ScaleRule::even, 479.0f) == 127);  // rounds to 480, below 2^9
}

TEST_CASE("MX block quantization along columns equals quantizing the transpose along rows") {
  const BlockFormat f = block_formats::mxfp4;
  const std::size_t rows = 70, cols = 9;  // 70 = 2 blocks of 32 and a short one of 6
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(rows * cols), transposed(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) transposed[c * rows + r] = values[r * cols + c] = normal(random) * std::exp(normal(random) * 3);
  const Quantized by_cols = quantize(f, ScaleRule::floor, {rows, cols, BlockAxis::cols, 32}, values);
  const Quantized by_rows = quantize(f, ScaleRule::floor, {cols, rows, BlockAxis::rows, 32}, transposed);
  REQUIRE(by_cols.scales.size() == 3 * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) CHECK(by_cols.codes[r * cols + c] == by_rows.codes[c * rows + r]);
  for (std::size_t br = 0; br < 3; ++br)
    for (std::size_t c = 0; c < cols; ++c) CHECK(by_cols.scales[br * cols + c] == by_rows.scales[c * 3 + br]);
  CHECK(by_cols.statistics.saturated == by_rows.statistics.saturated);
  CHECK(by_cols.statistics.flushed_to_zero == by_rows.statistics.flushed_to_zero);
}

TEST_CASE("NVFP4 equals the reference: float32 tensor scale, E4M3 block scales, E2M1 elements") {
  const BlockFormat f = block_formats::nvfp4;
  const auto blocks = test_blocks(f, 16);
  for (const bool with_specials : {false, true}) {
    std::vector<float> values;
    std::size_t block_count = 0;
    for (const auto& block : blocks) {
      bool special = false;
      for (const float v : block) special = special || std::isnan(v) || std::isinf(v);
      if (special && !with_specials) continue;
      values.insert(values.end(), block.begin(), block.end());
      ++block_count;
    }
    const BlockLayout layout{block_count, 16, BlockAxis::rows, 16};
    const Quantized q = quantize(f, ScaleRule::floor, layout, values);
    double tensor_amax = 0;
    for (const float v : values)
      if (std::isfinite(v)) tensor_amax = std::max(tensor_amax, std::fabs(static_cast<double>(v)));
    // The finite values' amax, NaNs and infinities among them or not (nvfp4_amax_contribution).
    REQUIRE(tensor_amax > 0);
    const float expected_tensor_scale = std::min(2688.0f / static_cast<float>(tensor_amax), std::numeric_limits<float>::max());
    CHECK(bits_of(q.tensor_scale) == bits_of(expected_tensor_scale));
    const ElementSpec e4m3_spec{8, -6, 3, 448, false}, e2m1_spec{2, 0, 1, 6, false};
    std::vector<float> dequantized(values.size());
    block_dequantize(f, layout, q.codes, q.scales, q.tensor_scale, dequantized);
    int mismatches = 0;
    for (std::size_t b = 0; b < block_count; ++b) {
      double amax = 0;
      bool nan_block = false;
      for (std::size_t j = 0; j < 16; ++j) {
        const float v = values[b * 16 + j];
        nan_block = nan_block || !std::isfinite(v);
        amax = std::max(amax, std::fabs(static_cast<double>(v)));
      }
      if (nan_block) {
        CHECK(int(q.scales[b]) == 0x7F);
        for (std::size_t j = 0; j < 16; ++j) CHECK(std::isnan(dequantized[b * 16 + j]));
        continue;
      }
      const float wanted = (static_cast<float>(amax) / 6.0f) * q.tensor_scale;
      const double block_scale = reference_element(e4m3_spec, wanted, RoundingMode::nearest_even).value;
      if (static_cast<double>(block_scale_value(f, q.scales[b])) != block_scale && ++mismatches < 10)
        MESSAGE("block ", b, ": scale ", block_scale_value(f, q.scales[b]), ", expected ", block_scale);
      const float factor = block_scale == 0 ? 0.0f : q.tensor_scale / static_cast<float>(block_scale);
      for (std::size_t j = 0; j < 16; ++j) {
        const std::size_t i = b * 16 + j;
        const ReferenceElement r = reference_element(e2m1_spec, values[i] * factor, RoundingMode::nearest_even);
        const float expected = static_cast<float>(r.value * block_scale) / q.tensor_scale;
        if ((bits_of(block_element_value(f, q.codes[i])) != bits_of(static_cast<float>(r.value)) ||
             bits_of(dequantized[i]) != bits_of(expected)) &&
            ++mismatches < 10)
          MESSAGE("block ", b, " element ", j, ": ", values[i], " -> ", block_element_value(f, q.codes[i]), " (", dequantized[i],
                  "), expected ", r.value, " (", expected, ")");
      }
    }
    CHECK_MESSAGE(mismatches == 0, mismatches, " NVFP4 mismatches");
  }
}

TEST_CASE("block statistics: relative exponents, scale codes and totals agree with the elements") {
  const BlockFormat f = block_formats::mxfp8_e4m3;
  const std::vector<float> block_a{1.0f, 0.5f, 0.25f, 0.0f, -3.0f, std::ldexp(1.0f, -20), 0.0f, 1.5f};
  std::vector<float> values;
  for (int i = 0; i < 4; ++i) values.insert(values.end(), block_a.begin(), block_a.end());
  const BlockFormat eight{f.elements, f.element, f.scale, 8};
  const Quantized q = quantize(eight, ScaleRule::floor, {4, 8, BlockAxis::rows, 8}, values);
  // amax 3 (2^1): relative exponents 0 (-3, 1.5 -> floor log2 = 0: -1), ...
  CHECK(q.statistics.blocks == 4);
  CHECK(q.statistics.elements == 32);
  CHECK(q.statistics.zeros == 8);
  CHECK(q.statistics.relative_exponents[0] == 4);   // -3
  CHECK(q.statistics.relative_exponents[1] == 8);   // 1, 1.5
  CHECK(q.statistics.relative_exponents[2] == 4);   // 0.5
  CHECK(q.statistics.relative_exponents[3] == 4);   // 0.25
  CHECK(q.statistics.relative_exponents[21] == 4);  // 2^-20
  CHECK(q.statistics.scale_codes[127 + 1 - 8] == 4);
  // X = -7: 2^-20 / 2^-7 = 2^-13 is below E4M3's smallest subnormal 2^-9: flushed.
  CHECK(q.statistics.flushed_to_zero == 4);
  CHECK(q.statistics.made_subnormal == 0);
  CHECK(q.statistics.saturated == 0);
  CHECK(q.flags == (flag::inexact | flag::underflow));
}

TEST_CASE("stochastic block quantization picks a neighbour, reproducibly, with the right odds") {
  const BlockFormat f = block_formats::mxfp4;
  std::vector<float> values(32 * 256);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = i % 32 == 0 ? 6.0f : 4.5f;  // 4.5 lies a quarter of the way from 4 to 6
  const BlockLayout layout{256, 32, BlockAxis::rows, 32};
  const Quantized a = quantize(f, ScaleRule::floor, layout, values, RoundingMode::stochastic, 42);
  const Quantized b = quantize(f, ScaleRule::floor, layout, values, RoundingMode::stochastic, 42);
  const Quantized c = quantize(f, ScaleRule::floor, layout, values, RoundingMode::stochastic, 43);
  CHECK(a.codes == b.codes);
  CHECK(a.codes != c.codes);
  int ups = 0, total = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i % 32 == 0) continue;
    const float element = block_element_value(f, a.codes[i]);
    CHECK((element == 4.0f || element == 6.0f));
    ups += element == 6.0f;
    ++total;
  }
  // Binomial(7936, 1/4): mean 1984, standard deviation 38.6; 6 deviations either side.
  CHECK(std::abs(ups - total / 4) < 232);
}

TEST_CASE("block quantization refuses spans that do not fit the layout") {
  const BlockFormat f = block_formats::mxfp8_e4m3;
  std::vector<float> values(64);
  std::vector<std::uint8_t> codes(64), scales(2);
  float tensor_scale = 0;
  Context ctx;
  CHECK_NOTHROW(block_quantize(f, ScaleRule::floor, {2, 32, BlockAxis::rows, 32}, values, codes, scales, tensor_scale, ctx));
  std::vector<std::uint8_t> too_few(1);
  CHECK_THROWS_AS(block_quantize(f, ScaleRule::floor, {2, 32, BlockAxis::rows, 32}, values, codes, too_few, tensor_scale, ctx),
                  std::invalid_argument);
  CHECK_THROWS_AS(block_quantize(f, ScaleRule::floor, {2, 32, BlockAxis::rows, 16}, values, codes, scales, tensor_scale, ctx),
                  std::invalid_argument);
}

TEST_CASE("bulk block kernels equal the scalar path: codes, scales, flags, statistics, outcomes") {
  std::mt19937 random(99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Every named format in blocks of 16 and of 32 (--block): each its own shape in the kernels
  // (NVFP4 in blocks of 32 once went through the AVX-512 kernel as blocks of 16).
  std::vector<BlockFormat> formats;
  for (const BlockFormat& named : named_block_formats())
    for (const int block : {16, 32}) {
      BlockFormat f = named;
      f.block_size = block;
      formats.push_back(f);
    }
  for (const BlockFormat& f : formats) {
    std::vector<float> values;
    for (const auto& block : test_blocks(f, f.block_size)) values.insert(values.end(), block.begin(), block.end());
    // Rows of a width that is no multiple of the block: short blocks at the ends of rows; and
    // rows wider than the kernels' runs of blocks (512 elements; 550 is one run, then 38), with NaN
    // blocks inside them; blocks down columns (the kernels transpose bands of rows), short bands
    // at the bottom (67 rows).
    while (values.size() % (67 * 550) != 0) values.push_back(normal(random) * std::exp(normal(random) * 4));
    for (const auto& [axis, width] : {std::pair{BlockAxis::rows, std::size_t{67}}, std::pair{BlockAxis::cols, std::size_t{67}},
                                      std::pair{BlockAxis::rows, std::size_t{550}}, std::pair{BlockAxis::cols, std::size_t{550}}}) {
      const BlockLayout layout{values.size() / width, width, axis, f.block_size};
      for (const ScaleRule rule : all_scale_rules) {
        for (const RoundingMode mode : all_rounding_modes) {
          for (const int option : {0, 1, 2, 3}) {
            const bool flush = option == 1, daz = option == 2, before = option == 3;
            const auto context = [&] {
              Context ctx;
              ctx.rounding = mode;
              ctx.flush_to_zero = flush;
              ctx.denormals_are_zero = daz;
              if (before) ctx.tininess = Tininess::before_rounding;
              ctx.stochastic_seed = 5;
              ctx.stochastic_counter = 1000;
              return ctx;
            };
            Quantized fast, scalar;
            for (Quantized* q : {&fast, &scalar}) {
              q->codes.resize(values.size());
              q->scales.resize(layout.block_count());
              q->outcomes.resize(layout.block_count());
              Context ctx = context();
              if (q == &fast) block_quantize(f, rule, layout, values, q->codes, q->scales, q->tensor_scale, ctx, &q->statistics, q->outcomes);
              else block_quantize_scalar(f, rule, layout, values, q->codes, q->scales, q->tensor_scale, ctx, &q->statistics, q->outcomes);
              q->flags = ctx.flags;
              CHECK(ctx.stochastic_counter == 1000 + values.size());
            }
            INFO(block_format_name(f), " in blocks of ", f.block_size, " ", scale_rule_name(rule), " ", rounding_mode_name(mode),
                 std::string(axis == BlockAxis::rows ? " rows" : " cols"), std::string(flush ? " ftz" : daz ? " daz" : before ? " tininess before" : ""));
            CHECK(fast.codes == scalar.codes);
            CHECK(fast.scales == scalar.scales);
            CHECK(int(fast.flags) == int(scalar.flags));
            CHECK(bits_of(fast.tensor_scale) == bits_of(scalar.tensor_scale));
            CHECK(fast.outcomes == scalar.outcomes);
            CHECK(fast.statistics.relative_exponents == scalar.statistics.relative_exponents);
            CHECK(fast.statistics.scale_codes == scalar.statistics.scale_codes);
            CHECK(fast.statistics.zeros == scalar.statistics.zeros);
            CHECK(fast.statistics.flushed_to_zero == scalar.statistics.flushed_to_zero);
            CHECK(fast.statistics.made_subnormal == scalar.statistics.made_subnormal);
            CHECK(fast.statistics.saturated == scalar.statistics.saturated);
            CHECK(fast.statistics.nan_blocks == scalar.statistics.nan_blocks);
            // Without per-block outcomes the kernels quantize runs of blocks along a row at once.
            Quantized runs;
            runs.codes.resize(values.size());
            runs.scales.resize(layout.block_count());
            Context ctx = context();
            block_quantize(f, rule, layout, values, runs.codes, runs.scales, runs.tensor_scale, ctx, &runs.statistics);
            CHECK(runs.codes == scalar.codes);
            CHECK(runs.scales == scalar.scales);
            CHECK(int(ctx.flags) == int(scalar.flags));
            CHECK(runs.statistics == scalar.statistics);
            // And codes alone (the kernels' unrecorded loops).
            Quantized codes_only;
            codes_only.codes.resize(values.size());
            codes_only.scales.resize(layout.block_count());
            Context codes_ctx = context();
            block_quantize(f, rule, layout, values, codes_only.codes, codes_only.scales, codes_only.tensor_scale, codes_ctx);
            CHECK(codes_only.codes == scalar.codes);
            CHECK(codes_only.scales == scalar.scales);
            CHECK(int(codes_ctx.flags) == int(scalar.flags));
          }
        }
      }
    }
  }
}

TEST_CASE("bulk block kernels: stochastic rounding's underflow flag at the edge of tininess") {
  // One MXFP8 E4M3 block: 448 sets X = 0; 31 copies of q = 1.111 1111 0000 1010 0101 0000 ... x 2^-7,
  // just below E4M3's 2^-6, whose significand rounded to 4 bits (unbounded exponent) reaches 2^-6
  // with the odds of its dropped fraction, 0.97 (tiny after rounding where any copy does not).
  const float q = std::bit_cast<float>((120u << 23) | (7u << 20) | 0xF8520u);
  std::vector<float> values(32, q);
  values[5] = 448.0f;
  const BlockLayout layout{1, 32, BlockAxis::rows, 32};
  for (const Tininess tininess : {Tininess::after_rounding, Tininess::before_rounding}) {
    int raised = 0;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
      std::uint8_t flags[2] = {};
      std::vector<std::uint8_t> codes[2];
      for (int path = 0; path < 2; ++path) {
        Context ctx;
        ctx.rounding = RoundingMode::stochastic;
        ctx.tininess = tininess;
        ctx.stochastic_seed = seed;
        codes[path].resize(32);
        std::vector<std::uint8_t> scales(1);
        float tensor_scale = 0;
        if (path == 0) block_quantize(block_formats::mxfp8_e4m3, ScaleRule::floor, layout, values, codes[path], scales, tensor_scale, ctx);
        else block_quantize_scalar(block_formats::mxfp8_e4m3, ScaleRule::floor, layout, values, codes[path], scales, tensor_scale, ctx);
        flags[path] = ctx.flags;
      }
      INFO("seed ", seed, tininess == Tininess::before_rounding ? " tininess before" : " tininess after");
      CHECK(codes[0] == codes[1]);
      CHECK(int(flags[0]) == int(flags[1]));
      raised += (flags[1] & flag::underflow) != 0;
    }
    // Before rounding every copy is tiny; after it, some seeds see none that is (so both ways are tried).
    if (tininess == Tininess::before_rounding) CHECK(raised == 40);
    else CHECK((raised > 0 && raised < 40));
  }
}

TEST_CASE("block quantization on several threads gives one thread's codes, scales, flags, statistics and outcomes") {
  std::mt19937 random(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(1536 * 1100);  // over a million: worth threads
  for (float& v : values) v = normal(random) * std::exp(normal(random) * 6);
  values[700 * 1100 + 5] = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t i = 0; i < 1100; ++i) values[1000 * 1100 + i] = 0.0f;
  values[1500 * 1100] = 1e30f;  // NVFP4's tensor scale is the whole tensor's, not a band's
  for (const BlockFormat& f : {block_formats::mxfp8_e4m3, block_formats::mxfp4, block_formats::nvfp4, block_formats::mxint8}) {
    for (const BlockAxis axis : {BlockAxis::rows, BlockAxis::cols}) {
      for (const RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::stochastic}) {
        const BlockLayout layout{1536, 1100, axis, f.block_size};
        Quantized one, three;
        Context ctx_one, ctx_three;
        for (auto [q, ctx, threads] : {std::tuple{&one, &ctx_one, 1}, std::tuple{&three, &ctx_three, 3}}) {
          q->codes.resize(values.size());
          q->scales.resize(layout.block_count());
          q->outcomes.resize(layout.block_count());
          ctx->rounding = mode;
          ctx->stochastic_seed = 11;
          ctx->stochastic_counter = 77;
          block_quantize(f, ScaleRule::floor, layout, values, q->codes, q->scales, q->tensor_scale, *ctx, &q->statistics, q->outcomes,
                         threads);
        }
        INFO(block_format_name(f), " ", rounding_mode_name(mode), std::string(axis == BlockAxis::rows ? " rows" : " cols"));
        CHECK(one.codes == three.codes);
        CHECK(one.scales == three.scales);
        CHECK(one.outcomes == three.outcomes);
        CHECK(one.statistics == three.statistics);
        CHECK(bits_of(one.tensor_scale) == bits_of(three.tensor_scale));
        CHECK(int(ctx_one.flags) == int(ctx_three.flags));
        CHECK(ctx_one.stochastic_counter == ctx_three.stochastic_counter);
        CHECK(ctx_three.stochastic_counter == 77 + values.size());
        CHECK(one.statistics.nan_blocks == 1);
        // Without outcomes the vector kernels take whole blocks, on each thread's band.
        Quantized kernels;
        kernels.codes.resize(values.size());
        kernels.scales.resize(layout.block_count());
        Context ctx_kernels;
        ctx_kernels.rounding = mode;
        ctx_kernels.stochastic_seed = 11;
        ctx_kernels.stochastic_counter = 77;
        block_quantize(f, ScaleRule::floor, layout, values, kernels.codes, kernels.scales, kernels.tensor_scale, ctx_kernels, &kernels.statistics, {},
                       3);
        CHECK(kernels.codes == one.codes);
        CHECK(kernels.scales == one.scales);
        CHECK(kernels.statistics == one.statistics);
        CHECK(int(ctx_kernels.flags) == int(ctx_one.flags));
      }
    }
  }
}

// The vector kernels stop looking for inexact and underflow once both are raised: a tensor of
// exact MX blocks with one element at its very end that earns a flag must still raise it.
TEST_CASE("bulk block kernels raise the flags that only the last element earns") {
  for (const BlockFormat& f : named_block_formats()) {
    if (f.elements != BlockFormat::Elements::floating || f.scale != BlockFormat::Scale::e8m0) continue;
    const ElementSpec e = spec_of(f);
    for (const BlockAxis axis : {BlockAxis::rows, BlockAxis::cols}) {
      const BlockLayout layout{64, 1024, axis, f.block_size};
      std::vector<float> values(layout.element_count());
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = (i % 3 == 0 ? 0.5f : 1.0f) * (i % 5 == 0 ? -1.0f : 1.0f);  // exact
      struct Late {
        const char* what;
        float value;
        std::uint8_t flags, flags_tininess_before;
      };
      constexpr std::uint8_t inexact = flag::inexact, underflow = flag::inexact | flag::underflow;
      // With amax 1 (the last block's), the scale is 2^-emax: 0.6 lands between two normal
      // elements, 0.6 * 2^(emin - emax - 1) between two subnormal ones; (1 - 2^-(m+2)) * 2^emin
      // rounds up to 2^emin (tiny only before rounding); 1.99 as amax rounds above max.
      const float up_to_normal = (1.0f - std::ldexp(1.0f, -e.mantissa_bits - 2)) * std::ldexp(1.0f, e.emin - e.emax);
      for (const Late late : {Late{"exact", 1.0f, 0, 0}, Late{"inexact", 0.6f, inexact, inexact},
                              Late{"tiny", 0.6f * std::ldexp(1.0f, e.emin - e.emax - 1), underflow, underflow},
                              Late{"rounding up to the smallest normal", up_to_normal, inexact, underflow},
                              Late{"saturated", 1.99f, flag::inexact | flag::overflow, flag::inexact | flag::overflow}}) {
        for (const Tininess tininess : {Tininess::after_rounding, Tininess::before_rounding}) {
          std::vector<float> tensor = values;
          tensor.back() = late.value;
          Quantized fast, scalar;
          for (Quantized* q : {&fast, &scalar}) {
            q->codes.resize(tensor.size());
            q->scales.resize(layout.block_count());
            Context ctx;
            ctx.tininess = tininess;
            if (q == &fast) block_quantize(f, ScaleRule::floor, layout, tensor, q->codes, q->scales, q->tensor_scale, ctx, &q->statistics);
            else block_quantize_scalar(f, ScaleRule::floor, layout, tensor, q->codes, q->scales, q->tensor_scale, ctx, &q->statistics, {});
            q->flags = ctx.flags;
          }
          INFO(block_format_name(f), " ", std::string(late.what), std::string(axis == BlockAxis::rows ? " rows" : " cols"),
               std::string(tininess == Tininess::before_rounding ? " tininess before rounding" : ""));
          CHECK(int(scalar.flags) == int(tininess == Tininess::before_rounding ? late.flags_tininess_before : late.flags));
          CHECK(int(fast.flags) == int(scalar.flags));
          CHECK(fast.codes == scalar.codes);
          CHECK(fast.statistics == scalar.statistics);
        }
      }
    }
  }
}

// MXINT8 raises inexact and never underflow (its quantum is fixed, as mxint8_element_code says):
// a kernel that stops looking at flags must not stop before inexact is raised, however late.
TEST_CASE("bulk block kernels: MXINT8's inexact from the last element alone, and no underflow") {
  const BlockFormat& f = block_formats::mxint8;
  for (const BlockAxis axis : {BlockAxis::rows, BlockAxis::cols}) {
    const BlockLayout layout{64, 1024, axis, f.block_size};
    std::vector<float> values(layout.element_count());
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = (i % 3 == 0 ? 0.5f : 1.0f) * (i % 5 == 0 ? -1.0f : 1.0f);  // exact
    // With amax 1 the scale is 2^0 and the elements step by 2^-6: 0.6 lies between two of them,
    // 0.3 * 2^-6 rounds to zero (inexact, not tiny: MXINT8 has no underflow).
    for (const auto& [what, value, expected] : {std::tuple{"exact", 1.0f, std::uint8_t{0}}, std::tuple{"inexact", 0.6f, std::uint8_t{flag::inexact}},
                                                std::tuple{"to zero", 0.3f * std::ldexp(1.0f, -6), std::uint8_t{flag::inexact}}}) {
      std::vector<float> tensor = values;
      tensor.back() = value;
      const auto [fast, scalar] = quantize_both(f, ScaleRule::floor, layout, tensor);
      INFO(std::string(what), std::string(axis == BlockAxis::rows ? " rows" : " cols"));
      CHECK(int(scalar.flags) == int(expected));
      CHECK(int(fast.flags) == int(scalar.flags));
      CHECK(fast.codes == scalar.codes);
      CHECK(fast.statistics == scalar.statistics);
    }
  }
}

// NVFP4 blocks far below the tensor's largest value: E4M3 block scales that round to zero (every
// element flushed: the kernels' factor 0) or to E4M3 subnormals, in whole groups the kernels take.
// One NaN in a tensor of gradients used to set NVFP4's tensor scale to 1, under which every block
// of values near 1e-4 flushed whole: 99.6% of a 4096-value tensor read as flushed because of one
// value. The finite values make the scale; a non-finite value makes its own block NaN, nothing else.
TEST_CASE("NVFP4's tensor scale comes from the finite values: a NaN or an infinity changes its own block and nothing else") {
  const BlockFormat f = block_formats::nvfp4;
  std::mt19937 rng(77);
  std::normal_distribution<float> normal(0.0f, 1e-4f);
  // Rows of 64 (four blocks each), 40 rows; across threads too: 2^21 values in two bands.
  for (const std::size_t rows : {std::size_t{40}, std::size_t{1} << 15}) {
    const BlockLayout layout{rows, 64, BlockAxis::rows, 16};
    std::vector<float> clean(layout.element_count());
    for (float& v : clean) v = normal(rng);
    clean[5] = 0.25f;  // the tensor's largest finite value, in block 0
    const float finite_amax = 0.25f;
    const Quantized want = quantize(f, ScaleRule::floor, layout, clean);
    CHECK(bits_of(want.tensor_scale) == bits_of(2688.0f / finite_amax));
    CHECK(want.statistics.flushed_to_zero < want.statistics.elements / 4);  // an ordinary tensor
    for (const float special : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                                std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
      CAPTURE(special);
      // In block 0, beside the largest finite value (which still counts: the amax is the finite
      // values', not the finite blocks'), and in the last block.
      std::vector<float> values = clean;
      values[7] = special, values.back() = special;
      CHECK(bits_of(nvfp4_tensor_amax(values)) == bits_of(finite_amax));
      CHECK(bits_of(nvfp4_tensor_amax(values, 0)) == bits_of(finite_amax));
      for (const int threads : {1, 2}) {
        Quantized got;
        got.codes.resize(values.size());
        got.scales.resize(layout.block_count());
        Context ctx;
        block_quantize(f, ScaleRule::floor, layout, values, got.codes, got.scales, got.tensor_scale, ctx, &got.statistics, {}, threads);
        CHECK(bits_of(got.tensor_scale) == bits_of(want.tensor_scale));
        const std::size_t last = layout.block_count() - 1;
        std::size_t other_blocks_differing = 0;
        for (std::size_t b = 0; b < layout.block_count(); ++b) {
          if (b == 0 || b == last) {
            CHECK(int(got.scales[b]) == 0x7F);  // E4M3's NaN
            continue;
          }
          bool same = got.scales[b] == want.scales[b];
          for (std::size_t j = 0; j < 16; ++j) same = same && got.codes[b * 16 + j] == want.codes[b * 16 + j];
          other_blocks_differing += same ? 0 : 1;
        }
        CHECK(other_blocks_differing == 0);
        CHECK(got.statistics.nan_blocks == 2);
        CHECK(got.statistics.flushed_to_zero <= want.statistics.flushed_to_zero);
        CHECK(got.statistics.flushed_to_zero + 32 >= want.statistics.flushed_to_zero);
      }
      const FastAndScalar both = quantize_both(f, ScaleRule::floor, layout, values);
      CHECK(bits_of(both.scalar.tensor_scale) == bits_of(want.tensor_scale));
      CHECK(both.fast.codes == both.scalar.codes);
      CHECK(both.fast.scales == both.scalar.scales);
      CHECK(both.fast.statistics == both.scalar.statistics);
    }
  }
  // No finite nonzero value: amax 0, tensor scale 1 (every block NaN or zero).
  const std::vector<float> specials{std::numeric_limits<float>::quiet_NaN(), 0.0f, std::numeric_limits<float>::infinity(), -0.0f};
  CHECK(nvfp4_tensor_amax(specials) == 0.0f);
  CHECK(nvfp4_tensor_amax(std::vector<float>{}) == 0.0f);
  std::vector<float> padded(16, 0.0f);
  padded[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK(quantize(f, ScaleRule::floor, BlockLayout{1, 16, BlockAxis::rows, 16}, padded).tensor_scale == 1.0f);
}

TEST_CASE("bulk block kernels: NVFP4 blocks whose E4M3 scale is zero or subnormal") {
  const BlockFormat& f = block_formats::nvfp4;
  for (const BlockAxis axis : {BlockAxis::rows, BlockAxis::cols}) {
    const BlockLayout layout{64, 1024, axis, f.block_size};
    std::vector<float> values(layout.element_count());
    // Tensor amax 2^30: a block's scale is about amax * 448 / 2^30, below E4M3's 2^-9 / 2 from
    // amax 2^11 down (zero), subnormal below 2^15.
    for (std::size_t r = 0; r < 64; ++r)
      for (std::size_t c = 0; c < 1024; ++c) {
        const std::size_t block = axis == BlockAxis::rows ? c / 16 : c;
        const int exponent = std::array{8, 12, 14, 20}[block % 4];
        const float mantissa = 1.0f + static_cast<float>((r * 7 + c * 3) % 16) / 16.0f;
        values[r * 1024 + c] = std::ldexp(mantissa, exponent) * ((r + c) % 3 == 0 ? -1.0f : 1.0f);
      }
    values[5] = std::ldexp(1.0f, 30);
    // Stochastically too: a zero scale's elements are 0 there (factor 0), where v times any
    // factor of that size would now and then round up to E2M1's 0.5.
    for (const RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::stochastic}) {
      const auto [fast, scalar] = quantize_both(f, ScaleRule::floor, layout, values, mode, 3);
      INFO(std::string(axis == BlockAxis::rows ? "rows " : "cols "), rounding_mode_name(mode));
      const auto zero_scales = std::count(scalar.scales.begin(), scalar.scales.end(), std::uint8_t{0});
      const auto subnormal_scales = std::count_if(scalar.scales.begin(), scalar.scales.end(), [](std::uint8_t s) { return s >= 1 && s <= 7; });
      CHECK(zero_scales >= static_cast<std::ptrdiff_t>(layout.block_count() / 5));  // the test is about them
      CHECK(subnormal_scales >= static_cast<std::ptrdiff_t>(layout.block_count() / 5));
      CHECK(fast.scales == scalar.scales);
      CHECK(fast.codes == scalar.codes);
      CHECK(int(fast.flags) == int(scalar.flags));
      CHECK(fast.statistics == scalar.statistics);
    }
  }
}

// MX formats in blocks of 16 (the kernels take them two at a time along rows, in bands of 16 rows
// down columns), against the scalar path, rounding to nearest even and stochastically.
TEST_CASE("bulk block kernels equal the scalar path for MX blocks of 16") {
  std::mt19937 random(123);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (BlockFormat f : {block_formats::mxfp8_e4m3, block_formats::mxfp4}) {
    f.block_size = 16;
    std::vector<float> values;
    for (const auto& block : test_blocks(f, f.block_size)) values.insert(values.end(), block.begin(), block.end());
    while (values.size() % (1100 * 37) != 0) values.push_back(normal(random) * std::exp(normal(random) * 4));
    for (const BlockAxis axis : {BlockAxis::rows, BlockAxis::cols}) {
      const BlockLayout layout{values.size() / 1100, 1100, axis, f.block_size};
      for (const auto& [rule, mode] : {std::pair{ScaleRule::floor, RoundingMode::nearest_even}, std::pair{ScaleRule::round_up, RoundingMode::nearest_even},
                                       std::pair{ScaleRule::rceil, RoundingMode::nearest_even}, std::pair{ScaleRule::even, RoundingMode::nearest_even},
                                       std::pair{ScaleRule::floor, RoundingMode::stochastic}, std::pair{ScaleRule::even, RoundingMode::stochastic}}) {
        const auto [fast, scalar] = quantize_both(f, rule, layout, values, mode, 17);
        INFO(block_format_name(f), " ", scale_rule_name(rule), " ", rounding_mode_name(mode), std::string(axis == BlockAxis::rows ? " rows" : " cols"));
        CHECK(fast.codes == scalar.codes);
        CHECK(fast.scales == scalar.scales);
        CHECK(int(fast.flags) == int(scalar.flags));
        CHECK(fast.statistics == scalar.statistics);
      }
    }
  }
}

TEST_CASE("block statistics merge: two halves quantized apart add up to the whole") {
  std::mt19937 random(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(64 * 40);
  for (float& v : values) v = normal(random) * std::exp(normal(random) * 5);
  const auto statistics_of = [](std::span<const float> part) {
    const BlockLayout layout{part.size() / 64, 64, BlockAxis::rows, 32};
    std::vector<std::uint8_t> codes(part.size()), scales(layout.block_count());
    float tensor_scale = 0;
    Context ctx;
    BlockStatistics st;
    block_quantize(block_formats::mxfp8_e5m2, ScaleRule::floor, layout, part, codes, scales, tensor_scale, ctx, &st);
    return st;
  };
  BlockStatistics halves = statistics_of(std::span<const float>(values).first(values.size() / 2));
  halves.merge(statistics_of(std::span<const float>(values).last(values.size() / 2)));
  CHECK(halves == statistics_of(values));
}

// NVFP4 down the columns with a tensor scale so small (an outlier of 3e38) that block scales
// underflow: a column whose smallest magnitude's product underflows to zero while larger ones are
// float32 subnormals must go the scalar way, not half through the vector kernel (which refused it
// mid-band and left stale codes of the other zero's sign, and counted 160 zeros for none).
TEST_CASE("bulk block kernels: NVFP4 columns whose smallest product underflows while others are subnormal") {
  for (const BlockAxis axis : {BlockAxis::rows, BlockAxis::cols})
    for (const bool stochastic : {false, true}) {
      const BlockLayout layout{32, 32, axis, 16};
      std::vector<float> values(layout.element_count());
      for (std::size_t i = 0; i < values.size(); ++i)
        values[i] = ((i * 7919) % 13 < 6 ? -1.0f : 1.0f) * std::ldexp(1.0f + static_cast<float>(i % 5) * 0.1f, -30 + static_cast<int>(i % 40));
      values[5] = 3e38f;
      Quantized fast, scalar;
      for (Quantized* q : {&fast, &scalar}) {
        q->codes.resize(values.size());
        q->scales.resize(layout.block_count());
        Context ctx;
        ctx.rounding = stochastic ? RoundingMode::stochastic : RoundingMode::nearest_even;
        if (q == &fast) block_quantize(block_formats::nvfp4, ScaleRule::floor, layout, values, q->codes, q->scales, q->tensor_scale, ctx, &q->statistics);
        else block_quantize_scalar(block_formats::nvfp4, ScaleRule::floor, layout, values, q->codes, q->scales, q->tensor_scale, ctx, &q->statistics, {});
      }
      CAPTURE(axis == BlockAxis::rows ? "rows" : "cols");
      CAPTURE(stochastic);
      CHECK(fast.codes == scalar.codes);
      CHECK(fast.statistics == scalar.statistics);
      CHECK(scalar.statistics.zeros == 0);
    }
}

// NVFP4 under tensor scales given rather than taken from the values: far smaller than their own
// (block scales saturate at 448, elements at 6), far larger (block scales E4M3 subnormal or zero),
// and the extremes of float32, the vector kernels against the scalar path; under the values' own
// scale, exactly block_quantize.
TEST_CASE("NVFP4 under a given tensor scale: kernels equal the scalar path, and the values' own scale gives block_quantize") {
  std::mt19937 random(29);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(96 * 160);
  for (float& v : values) v = normal(random) * std::exp(normal(random) * 5);
  values[77] = -0.0f;
  for (std::size_t i = 0; i < 16; ++i) values[320 + i] = 0.0f;
  const BlockFormat& f = block_formats::nvfp4;
  for (const BlockAxis axis : {BlockAxis::rows, BlockAxis::cols}) {
    const BlockLayout layout{96, 160, axis, f.block_size};
    Quantized own;
    own.codes.resize(values.size());
    own.scales.resize(layout.block_count());
    Context own_ctx;
    block_quantize(f, ScaleRule::floor, layout, values, own.codes, own.scales, own.tensor_scale, own_ctx, &own.statistics);
    for (const float given : {own.tensor_scale, own.tensor_scale * 0x1p-20f, own.tensor_scale * 0.125f, own.tensor_scale * 32.0f,
                              own.tensor_scale * 0x1p40f, 1.0f, std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                              std::numeric_limits<float>::denorm_min()}) {
      for (const RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::stochastic}) {
        Quantized fast, scalar;
        Context fast_ctx, scalar_ctx;
        for (auto [q, ctx] : {std::pair{&fast, &fast_ctx}, std::pair{&scalar, &scalar_ctx}}) {
          q->codes.resize(values.size());
          q->scales.resize(layout.block_count());
          q->outcomes.resize(layout.block_count());
          ctx->rounding = mode;
          ctx->stochastic_seed = 5;
        }
        // The kernels take whole blocks only without per-block outcomes.
        block_quantize_under_tensor_scale(f, ScaleRule::floor, layout, values, fast.codes, fast.scales, given, fast_ctx, &fast.statistics, {}, 2);
        block_quantize_scalar_under_tensor_scale(f, ScaleRule::floor, layout, values, scalar.codes, scalar.scales, given, scalar_ctx,
                                                 &scalar.statistics, scalar.outcomes);
        INFO(std::string(axis == BlockAxis::rows ? "rows " : "cols "), rounding_mode_name(mode), " tensor scale ", given);
        CHECK(fast.codes == scalar.codes);
        CHECK(fast.scales == scalar.scales);
        CHECK(fast.statistics == scalar.statistics);
        CHECK(int(fast_ctx.flags) == int(scalar_ctx.flags));
        CHECK(fast_ctx.stochastic_counter == scalar_ctx.stochastic_counter);
        if (given == own.tensor_scale && mode == RoundingMode::nearest_even) {
          CHECK(fast.codes == own.codes);
          CHECK(fast.scales == own.scales);
          CHECK(fast.statistics == own.statistics);
        }
        // A scale 2^40 above the values' own (an amax given far too small) lifts many blocks past
        // E4M3's largest (448), where their elements saturate; one 2^20 below (an amax far too
        // large) drops many block scales to zero, flushing their elements.
        if (given == own.tensor_scale * 0x1p40f) CHECK(scalar.statistics.saturated > own.statistics.saturated + values.size() / 50);
        if (given == own.tensor_scale * 0x1p-20f) CHECK(scalar.statistics.flushed_to_zero > own.statistics.flushed_to_zero + values.size() / 50);
        // float32's largest: products beyond float32 saturate, counted as the kernels count them.
        if (given == std::numeric_limits<float>::max()) CHECK(scalar.statistics.saturated + scalar.statistics.zeros == values.size());
      }
    }
  }
  std::vector<std::uint8_t> codes(values.size()), scales(96 * 10);
  Context ctx;
  const BlockLayout layout{96, 160, BlockAxis::rows, 16};
  for (const float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()})
    CHECK_THROWS_AS(block_quantize_under_tensor_scale(f, ScaleRule::floor, layout, values, codes, scales, bad, ctx), std::invalid_argument);
  std::vector<std::uint8_t> mx_scales(96 * 5);
  CHECK_THROWS_AS(block_quantize_under_tensor_scale(block_formats::mxfp4, ScaleRule::floor, {96, 160, BlockAxis::rows, 32}, values, codes, mx_scales, 2.0f,
                                                    ctx),
                  std::invalid_argument);
}

TEST_CASE("square tiles on several threads: the same codes, scales, statistics, outcomes, flags and stream as one") {
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 6);
  // 300 x 250: neither a multiple of 16 or 32, enough elements (75,000) for more than one band.
  const std::size_t rows = 300, cols = 250;
  std::vector<float> values(rows * cols);
  for (float& v : values) v = std::ldexp(normal(rng), exponent(rng));
  values[5 * cols + 7] = std::numeric_limits<float>::quiet_NaN();
  values[200 * cols + 3] = std::numeric_limits<float>::infinity();
  for (const BlockFormat& format : {block_formats::nvfp4, block_formats::mxfp8_e4m3, block_formats::mxfp4}) {
    for (const BlockAxis axis : {BlockAxis::rows, BlockAxis::cols}) {
      for (const RoundingMode rounding : {RoundingMode::nearest_even, RoundingMode::stochastic}) {
        CAPTURE(block_format_name(format));
        CAPTURE(axis == BlockAxis::rows);
        CAPTURE(rounding_mode_name(rounding));
        const BlockLayout layout{rows, cols, axis, format.block_size};
        struct Result {
          std::vector<std::uint8_t> codes, scales;
          std::vector<BlockOutcome> outcomes;
          BlockStatistics statistics;
          float tensor_scale = 0;
          Context ctx;
        };
        const auto quantize = [&](int threads) {
          Result r;
          r.codes.resize(values.size()), r.scales.resize(layout.block_count()), r.outcomes.resize(layout.block_count());
          r.ctx.rounding = rounding;
          r.ctx.stochastic_seed = 9;
          r.ctx.stochastic_counter = 1000;
          block_quantize_square_tiles(format, ScaleRule::floor, layout, values, r.codes, r.scales, r.tensor_scale, r.ctx, &r.statistics, r.outcomes,
                                      threads);
          return r;
        };
        const Result one = quantize(1);
        for (const int threads : {2, 3, 7}) {
          CAPTURE(threads);
          const Result many = quantize(threads);
          CHECK(many.codes == one.codes);
          CHECK(many.scales == one.scales);
          CHECK(many.outcomes == one.outcomes);
          CHECK(many.statistics == one.statistics);
          CHECK(std::bit_cast<std::uint32_t>(many.tensor_scale) == std::bit_cast<std::uint32_t>(one.tensor_scale));
          CHECK(many.ctx.flags == one.ctx.flags);
          CHECK(many.ctx.stochastic_counter == one.ctx.stochastic_counter);
        }
        CHECK(one.ctx.stochastic_counter == 1000 + values.size());
        CHECK(one.statistics.nan_blocks > 0);
      }
    }
  }
}
