// How many times each bit position was set over many 256-bit words: positional_counts_avx512.hpp's
// bit-sliced carry-save counting for AVX2's eight 32-bit lanes (see there for the method). AVX2
// has no ternary-logic instruction, so each carry-save adder is five: two exclusive ors for the
// sum, two ands and an or for the carry (Muła, Kurz and Lemire's AVX2 Harley-Seal adder). Used by
// exponent-field counting on AVX2 (exponent_fields_avx2.cpp).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace fpscope::bulk_avx2 {

class PositionalCounts {
 public:
  // (Constructors written out: GCC compiles implicit ones for the baseline, where the intrinsics
  // would not inline; kernel_unit_baseline.hpp.)
  [[gnu::always_inline]] PositionalCounts() {
    for (__m256i& h : high_) h = _mm256_setzero_si256();
  }
  // Adds the 16 words word(0) .. word(15), each made as the adders take it (in that order).
  template <typename Word>
  [[gnu::always_inline]] void add16_made(Word&& word) {
    Stage s = first_;
    push_sixteens(reduce16(s, word));
    first_ = s;
  }

  // Adds the count of each position over the 8 lanes into counts[0 .. 31], returns their sum,
  // and starts again from zero.
  std::uint64_t drain_into(std::uint64_t* counts) {
    std::uint64_t total = 0;
    const auto add = [&](__m256i v, std::uint64_t weight) {
      if (_mm256_testz_si256(v, v)) return;
      for (int bit = 0; bit < 32; ++bit) {
        // Each lane's bit `bit` moved to its sign, the signs gathered: the lanes that have it.
        const int lanes = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_sll_epi32(v, _mm_cvtsi32_si128(31 - bit))));
        const auto n = weight * static_cast<std::uint64_t>(__builtin_popcount(static_cast<unsigned>(lanes)));
        counts[bit] += n, total += n;
      }
    };
    add(first_.ones, 1), add(first_.twos, 2), add(first_.fours, 4), add(first_.eights, 8);
    add(second_.ones, 16), add(second_.twos, 32), add(second_.fours, 64), add(second_.eights, 128);
    for (int k = 0; k < pending_; ++k) add(sixteens_[k], 16);
    for (int k = 0; k < levels; ++k) add(high_[k], std::uint64_t{256} << k);
    *this = PositionalCounts{};
    return total;
  }

 private:
  struct Stage {  // bit-sliced counts of weight 1, 2, 4, 8 (times the stage's unit)
    [[gnu::always_inline]] Stage() : ones(_mm256_setzero_si256()), twos(ones), fours(ones), eights(ones) {}
    __m256i ones, twos, fours, eights;
  };
  // a + b + c bit by bit: the sum bits go to a, the carries come back.
  [[gnu::always_inline]] static __m256i carry_save(__m256i& a, __m256i b, __m256i c) {
    const __m256i a_xor_b = _mm256_xor_si256(a, b);
    const __m256i carry = _mm256_or_si256(_mm256_and_si256(a, b), _mm256_and_si256(a_xor_b, c));
    a = _mm256_xor_si256(a_xor_b, c);
    return carry;
  }
  // Words w(first) .. w(first + 7) into s, in order, the carries of weight 8 back.
  template <typename Word>
  [[gnu::always_inline]] static __m256i reduce8(Stage& s, Word& w, int first) {
    __m256i twos_a = carry_save(s.ones, w(first), w(first + 1));
    __m256i twos_b = carry_save(s.ones, w(first + 2), w(first + 3));
    const __m256i fours_a = carry_save(s.twos, twos_a, twos_b);
    twos_a = carry_save(s.ones, w(first + 4), w(first + 5));
    twos_b = carry_save(s.ones, w(first + 6), w(first + 7));
    const __m256i fours_b = carry_save(s.twos, twos_a, twos_b);
    return carry_save(s.fours, fours_a, fours_b);
  }
  // Words w(0) .. w(15) into s, in order, the carries of weight 16 back.
  template <typename Word>
  [[gnu::always_inline]] static __m256i reduce16(Stage& s, Word& w) {
    const __m256i eights_a = reduce8(s, w, 0);
    const __m256i eights_b = reduce8(s, w, 8);
    return carry_save(s.eights, eights_a, eights_b);
  }
  void push_sixteens(__m256i sixteens) {
    sixteens_[pending_] = sixteens;
    if (++pending_ < 16) return;
    pending_ = 0;
    auto pending = [this](int k) { return sixteens_[k]; };
    __m256i carry = reduce16(second_, pending);
    for (int k = 0; k < levels && !_mm256_testz_si256(carry, carry); ++k) {
      const __m256i sum = _mm256_xor_si256(high_[k], carry);
      carry = _mm256_and_si256(high_[k], carry);
      high_[k] = sum;
    }
  }
  static constexpr int levels = 32;  // 256 x 2^32 per lane and position: more than any tensor has
  Stage first_, second_;
  __m256i sixteens_[16];
  int pending_ = 0;
  __m256i high_[levels];
};

}  // namespace fpscope::bulk_avx2
