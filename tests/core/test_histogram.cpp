// ExponentHistogram against a direct computation with frexp.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <random>
#include <string>
#include <vector>

#include "fpscope/core/exponent_histogram.hpp"

using namespace fpscope;

TEST_CASE("binade of every kind of float32") {
  CHECK(binade_of_f32(float_bits(1.0f)) == 0);
  CHECK(binade_of_f32(float_bits(-1.5f)) == 0);
  CHECK(binade_of_f32(float_bits(0.75f)) == -1);
  CHECK(binade_of_f32(0x00000001) == -149);  // smallest subnormal
  CHECK(binade_of_f32(0x00400000) == -127);
  CHECK(binade_of_f32(0x007FFFFF) == -127);
  CHECK(binade_of_f32(0x00800000) == -126);
  CHECK(binade_of_f32(0x7F7FFFFF) == 127);
  CHECK(histogram_slot_of_f32(0x80000000) == bin_zero);
  CHECK(histogram_slot_of_f32(0xFF800000) == bin_infinity);
  CHECK(histogram_slot_of_f32(0x7FC00001) == bin_nan);
}

TEST_CASE("histogram of a mixed array equals a frexp count, and counts sum to the size") {
  std::mt19937 rng(3);
  std::vector<float> values;
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  for (int i = 0; i < 100003; ++i) {
    switch (i % 10) {
      case 0: values.push_back(0.0f); break;
      case 1: values.push_back(bits_float(rng() & 0x807FFFFFu)); break;  // subnormal or zero
      case 2: values.push_back(bits_float(rng())); break;                 // anything, NaNs included
      default: values.push_back(normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20)); break;
    }
  }
  values.push_back(std::numeric_limits<float>::infinity());
  values.push_back(-std::numeric_limits<float>::infinity());
  values.push_back(std::numeric_limits<float>::quiet_NaN());

  ExponentHistogram histogram;
  histogram.add(values);
  std::map<int, std::uint64_t> expected;
  std::uint64_t zeros = 0, infinities = 0, nans = 0;
  for (const float v : values) {
    if (std::isnan(v)) ++nans;
    else if (std::isinf(v)) ++infinities;
    else if (v == 0) ++zeros;
    else {
      int exponent = 0;
      std::frexp(v, &exponent);  // v = m * 2^exponent, 0.5 <= |m| < 1
      ++expected[exponent - 1];
    }
  }
  for (int b = min_binade; b <= max_binade; ++b) {
    CAPTURE(b);
    CHECK(histogram.count(b) == (expected.count(b) ? expected[b] : 0));
  }
  CHECK(histogram.zero_count() == zeros);
  CHECK(histogram.infinity_count() == infinities);
  CHECK(histogram.nan_count() == nans);
  CHECK(histogram.total_count() == values.size());
  CHECK(histogram.lowest_binade() == expected.begin()->first);
  CHECK(histogram.highest_binade() == expected.rbegin()->first);

  ExponentHistogram one_by_one;
  for (const float v : values) one_by_one.add_value(v);
  CHECK(one_by_one == histogram);
  ExponentHistogram merged;
  merged.add(std::span<const float>(values).first(500));
  ExponentHistogram rest;
  rest.add(std::span<const float>(values).subspan(500));
  merged.merge(rest);
  CHECK(merged == histogram);
}

TEST_CASE("an empty histogram") {
  ExponentHistogram empty;
  empty.add(std::span<const float>{});
  CHECK(empty.total_count() == 0);
  CHECK(empty.lowest_binade() == min_binade - 1);
}

// The bulk counting (AVX-512 or AVX2 where the processor has it: windows of 32 fields one-hot, pieces of
// 64K values; the core_bulk_* tests run it under each instruction set) against add_value one value
// at a time, on shapes that reach each of its cases.
TEST_CASE("bulk exponent histogram equals counting one value at a time") {
  std::mt19937 rng(11);
  const auto every_field = [&](std::size_t n) {  // normal values over all 254 fields, signs mixed, zeros
    std::vector<float> v(n);
    for (auto& x : v) x = rng() % 9 == 0 ? 0.0f : bits_float((rng() & 0x807FFFFFu) | ((1 + rng() % 254) << 23));
    return v;
  };
  const auto gaussian = [&](std::size_t n, int scale) {  // a few binades around 2^scale, an eighth zero
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = i % 8 == 5 ? -0.0f : normal(rng) * std::ldexp(1.0f, scale);
    return v;
  };
  std::vector<std::pair<const char*, std::vector<float>>> shapes;
  shapes.emplace_back("every field, three pieces and a tail", every_field(3 * 65536 + 77));
  shapes.emplace_back("gaussian, less than 256 values", gaussian(1000, -3));
  shapes.emplace_back("gaussian near the top", gaussian(5000, 120));
  for (std::size_t n = 0; n <= 40; ++n) shapes.emplace_back("short", gaussian(n, 0));
  shapes.emplace_back("all zero", std::vector<float>(70000, 0.0f));
  std::vector<float> extremes(4099);
  for (std::size_t i = 0; i < extremes.size(); ++i) extremes[i] = i % 2 == 0 ? bits_float(0x00800000u | static_cast<std::uint32_t>(i)) : -bits_float(0x7F7FFFFFu);
  shapes.emplace_back("fields 1 and 254 only", extremes);
  auto with_specials = gaussian(3 * 65536, 10);  // the second piece has a subnormal, the third a NaN and an infinity
  with_specials[70000] = bits_float(0x00000003u);
  with_specials[140000] = std::numeric_limits<float>::quiet_NaN();
  with_specials[140001] = -std::numeric_limits<float>::infinity();
  shapes.emplace_back("a subnormal, a NaN and an infinity in later pieces", with_specials);
  // Pieces whose first values do not show their range (the AVX-512 kernel places its first window
  // from a sample of them): larger values after, smaller values after, zeros first.
  auto larger_after = gaussian(70000, -60);
  for (std::size_t i = 300; i < larger_after.size(); i += 3) larger_after[i] = gaussian(1, 40 + static_cast<int>(i % 50))[0];
  shapes.emplace_back("larger values after the first 256", larger_after);
  auto smaller_after = gaussian(70000, 100);
  for (std::size_t i = 256; i < smaller_after.size(); i += 2) smaller_after[i] = gaussian(1, -100 + static_cast<int>(i % 90))[0];
  shapes.emplace_back("smaller values after the first 256", smaller_after);
  // Two whole pieces whose largest values sit where the kernel's sample (16 runs of 16 values, one
  // at the start of each sixteenth of a piece) does not look: every 256th value from the 100th.
  auto larger_hidden = gaussian(2 * 65536, -20);
  for (std::size_t i = 100; i < larger_hidden.size(); i += 256) larger_hidden[i] = gaussian(1, 30 + static_cast<int>(i % 40))[0];
  shapes.emplace_back("larger values where the sample does not look", larger_hidden);
  auto zeros_first = gaussian(5000, 3);
  std::fill_n(zeros_first.begin(), 1000, 0.0f);
  shapes.emplace_back("zeros first", zeros_first);
  for (const auto& [name, values] : shapes) {
    const std::string shape = name;
    CAPTURE(shape);
    CAPTURE(values.size());
    ExponentHistogram bulk, one_by_one;
    bulk.add(values);
    for (const float v : values) one_by_one.add_value(v);
    CHECK(bulk == one_by_one);
    CHECK(bulk.total_count() == values.size());
    // The sentinel's reading from the same pass: the largest magnitude bits, one value at a time.
    std::uint32_t largest = 0;
    for (const float v : values) largest = std::max(largest, float_bits(v) & 0x7FFFFFFFu);
    ExponentHistogram reading_too;
    std::uint32_t read = 0;
    reading_too.add(values, &read);
    CHECK(reading_too == bulk);
    CHECK(read == largest);
    std::uint32_t above = largest + 1;  // a reading already larger stays
    reading_too.add(values, &above);
    CHECK(above == largest + 1);
  }
}

TEST_CASE("merge adds every count, and refuses a total past 2^64 whatever bin carries it") {
  ExponentHistogram a, b;
  a.set_count(-3, 5), a.set_count(10, (std::uint64_t{1} << 54) - 1), a.set_specials(1, 2, 3);
  b.set_count(-3, 7), b.set_count(min_binade, 1), b.set_specials(4, 0, 6);
  ExponentHistogram sum = a;
  sum.merge(b);
  CHECK(sum.count(-3) == 12);
  CHECK(sum.count(10) == (std::uint64_t{1} << 54) - 1);
  CHECK(sum.count(min_binade) == 1);
  CHECK(sum.zero_count() == 5);
  CHECK(sum.infinity_count() == 2);
  CHECK(sum.nan_count() == 9);
  // Large counts that still fit (2^62 + 2^62 + 2^62 < 2^64), then one more 2^62 that does not,
  // in a bin, among the specials, and split so that no single count is large.
  const std::uint64_t big = std::uint64_t{1} << 62;
  ExponentHistogram c, d;
  c.set_count(0, big), c.set_count(1, big);
  d.set_count(0, big);
  c.merge(d);
  CHECK(c.count(0) == 2 * big);
  CHECK(c.checked_total_count() == 3 * big);
  ExponentHistogram e;
  e.set_count(5, big);
  CHECK_THROWS_AS(c.merge(e), std::overflow_error);
  CHECK(c.count(5) == 0);  // nothing added
  ExponentHistogram f;
  f.set_specials(0, big, 0);
  CHECK_THROWS_AS(c.merge(f), std::overflow_error);
  ExponentHistogram many, one_more;  // every bin at 2^54 - 1 (the fast path's edge) and one more value
  for (int binade = min_binade; binade <= max_binade; ++binade) many.set_count(binade, (std::uint64_t{1} << 54) - 1);
  one_more.set_count(0, 1);
  CHECK_NOTHROW(many.merge(one_more));
  CHECK(many.checked_total_count() == static_cast<std::uint64_t>(binade_count) * ((std::uint64_t{1} << 54) - 1) + 1);
}
