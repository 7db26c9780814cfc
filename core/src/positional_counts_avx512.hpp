// How many times each bit position was set over many 512-bit words: the histogram of values in
// 0 .. 31 given one-hot (lane value v as the dword 1 << v), at a cost that does not grow with the
// number of bins a histogram has (a compare and a count per bin cost ~40 bins x 2 instructions per
// 64 elements on gradient-shaped blocks; this costs about 2 per 16). Used by the AVX-512 block
// kernel (relative exponents) and exponent-field counting (exponent_fields_avx512.cpp).
//
// The counts are kept bit-sliced: each register of a stage holds one bit of every position's
// count. Sixteen words go in together through a tree of carry-save adders (Harley and Seal's
// population count, as Muła, Kurz and Lemire use it in "Faster Population Counts Using AVX2
// Instructions", 2018), each adder one ternary-logic instruction for the sum and one for the
// carry: ones, twos, fours and eights stay, one word of sixteens comes out. A second stage takes
// sixteen of those the same way; its carries (256s) ripple into plain bit-sliced counters.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstdint>

namespace fpscope::avx512 {

class PositionalCounts {
 public:
  // (Constructors written out here and in Stage: GCC compiles implicit ones for the baseline, not
  // for the unit's instruction set, and the intrinsics would not inline into them.)
  [[gnu::always_inline]] PositionalCounts() {
    for (__m512i& h : high_) h = _mm512_setzero_si512();
  }
  // Adds the 16 words at `words` (each bit counts once at its position).
  [[gnu::always_inline]] void add16(const __m512i* words) {
    add16_made([words](int k) { return words[k]; });
  }
  // The same for the 16 words word(0) .. word(15), each made as the adders take it (in that
  // order): a few registers live instead of sixteen words held (and spilled) at once.
  template <typename Word>
  [[gnu::always_inline]] void add16_made(Word&& word) {
    Stage s = first_;
    push_sixteens(reduce16(s, word));
    first_ = s;
  }

  // Adds the count of each position over the 16 lanes into counts[0 .. 31], returns their sum,
  // and starts again from zero.
  std::uint64_t drain_into(std::uint64_t* counts) {
    std::uint64_t total = 0;
    const auto add = [&](__m512i v, std::uint64_t weight) {
      if (_mm512_test_epi32_mask(v, v) == 0) return;
      for (int bit = 0; bit < 32; ++bit) {
        const auto n = weight * static_cast<std::uint64_t>(__builtin_popcount(_mm512_test_epi32_mask(v, _mm512_set1_epi32(static_cast<int>(1u << bit)))));
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
    [[gnu::always_inline]] Stage() : ones(_mm512_setzero_si512()), twos(ones), fours(ones), eights(ones) {}
    __m512i ones, twos, fours, eights;
  };
  // a + b + c bit by bit: the sum bits go to a, the carries come back.
  [[gnu::always_inline]] static __m512i carry_save(__m512i& a, __m512i b, __m512i c) {
    const __m512i carry = _mm512_ternarylogic_epi32(a, b, c, 0xE8);  // majority
    a = _mm512_ternarylogic_epi32(a, b, c, 0x96);                    // a ^ b ^ c
    return carry;
  }
  // Words w(first) .. w(first + 7) into s, in order, the carries of weight 8 back.
  template <typename Word>
  [[gnu::always_inline]] static __m512i reduce8(Stage& s, Word& w, int first) {
    __m512i twos_a = carry_save(s.ones, w(first), w(first + 1));
    __m512i twos_b = carry_save(s.ones, w(first + 2), w(first + 3));
    const __m512i fours_a = carry_save(s.twos, twos_a, twos_b);
    twos_a = carry_save(s.ones, w(first + 4), w(first + 5));
    twos_b = carry_save(s.ones, w(first + 6), w(first + 7));
    const __m512i fours_b = carry_save(s.twos, twos_a, twos_b);
    return carry_save(s.fours, fours_a, fours_b);
  }
  // Words w(0) .. w(15) into s, in order, the carries of weight 16 back.
  template <typename Word>
  [[gnu::always_inline]] static __m512i reduce16(Stage& s, Word& w) {
    const __m512i eights_a = reduce8(s, w, 0);
    const __m512i eights_b = reduce8(s, w, 8);
    return carry_save(s.eights, eights_a, eights_b);
  }
  void push_sixteens(__m512i sixteens) {
    sixteens_[pending_] = sixteens;
    if (++pending_ < 16) return;
    pending_ = 0;
    auto pending = [this](int k) { return sixteens_[k]; };
    __m512i carry = reduce16(second_, pending);
    for (int k = 0; k < levels && _mm512_test_epi32_mask(carry, carry) != 0; ++k) {
      const __m512i sum = _mm512_xor_si512(high_[k], carry);
      carry = _mm512_and_si512(high_[k], carry);
      high_[k] = sum;
    }
  }
  static constexpr int levels = 32;  // 256 x 2^32 per lane and position: more than any tensor has
  Stage first_, second_;
  __m512i sixteens_[16];
  int pending_ = 0;
  __m512i high_[levels];
};

}  // namespace fpscope::avx512
