// Exponent fields counted with AVX-512: each value's field one-hot in its own lane (1 << (field -
// base)) and the positions counted by bit-sliced carry-save adders (positional_counts_avx512.hpp),
// whose cost does not grow with the number of fields a tensor spans. In pieces of 64K values:
// one pass finds the piece's largest and smallest nonzero magnitudes and counts its zeros, then
// one pass per window of 32 fields between them (tensors span one or two) reads the piece back
// from L2. A piece with a subnormal or an infinity or NaN is counted one value at a time (rare).
#include "exponent_fields.hpp"
#include "kernel_unit_baseline.hpp"

#if defined(FPSCOPE_HAVE_X86_KERNELS)
// Compiled for AVX-512 after the shared headers, compiled for the baseline
// (kernel_unit_baseline.hpp says why).
FPSCOPE_BEGIN_AVX512_UNIT
#include "positional_counts_avx512.hpp"

// GCC 12 warns that the unmasked AVX-512 intrinsics read an uninitialized register (their
// _mm512_undefined_epi32() source; GCC bug 105593, fixed in GCC 13): not a read of ours.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace fpscope {

namespace {

constexpr std::size_t piece = std::size_t{1} << 16;
constexpr int window = 32;

// Lanes [0, n - i) of the 16 values at bits + i, magnitudes only; lanes past the end read 0.
[[gnu::always_inline]] inline __m512i magnitudes(const std::uint32_t* bits, std::size_t i, std::size_t n) {
  const __m512i magnitude_mask = _mm512_set1_epi32(0x7FFFFFFF);
  if (i + 16 <= n) return _mm512_and_si512(_mm512_loadu_si512(bits + i), magnitude_mask);
  const auto lanes = static_cast<__mmask16>((1u << (n - i)) - 1);
  return _mm512_maskz_and_epi32(lanes, _mm512_maskz_loadu_epi32(lanes, bits + i), magnitude_mask);
}

// The fields in [base, base + 32) of the n values at bits, into counts.
void count_window(const std::uint32_t* bits, std::size_t n, int base, FieldCounts& counts) {
  avx512::PositionalCounts positions;
  const __m512i one = _mm512_set1_epi32(1), base_field = _mm512_set1_epi32(base);
  // 256 values (16 words) at a time; a field outside the window shifts the 1 out (a negative
  // distance is a large unsigned one), and so does a zero's field 0 (base is at least 1).
  const auto one_hot = [&](const __m512i magnitude) { return _mm512_sllv_epi32(one, _mm512_sub_epi32(_mm512_srli_epi32(magnitude, 23), base_field)); };
  __m512i words[16];
  std::size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    for (int k = 0; k < 16; ++k) words[k] = one_hot(magnitudes(bits, i + 16 * static_cast<std::size_t>(k), n));
    positions.add16(words);
  }
  if (i < n) {
    for (int k = 0; k < 16; ++k) {
      const std::size_t at = i + 16 * static_cast<std::size_t>(k);
      words[k] = at < n ? one_hot(magnitudes(bits, at, n)) : _mm512_setzero_si512();
    }
    positions.add16(words);
  }
  std::uint64_t in_window[window] = {};
  positions.drain_into(in_window);
  for (int k = 0; k < window && base + k < 256; ++k) counts.by_field[static_cast<std::size_t>(base + k)] += in_window[k];
}

void count_piece(const std::uint32_t* bits, std::size_t n, FieldCounts& counts) {
  const __m512i one = _mm512_set1_epi32(1);
  __m512i largest = _mm512_setzero_si512(), least = _mm512_set1_epi32(-1);  // least: smallest magnitude less one
  std::uint64_t zeros = 0;
  const auto take = [&](const __m512i m, const __mmask16 lanes) {
    largest = _mm512_max_epu32(largest, m);
    least = _mm512_min_epu32(least, _mm512_sub_epi32(m, one));
    zeros += static_cast<std::uint64_t>(__builtin_popcount(_mm512_mask_testn_epi32_mask(lanes, m, m)));
  };
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) take(magnitudes(bits, i, n), 0xFFFF);
  if (i < n) take(magnitudes(bits, i, n), static_cast<__mmask16>((1u << (n - i)) - 1));
  counts.zeros += zeros;
  counts.by_field[0] += zeros;
  counts.largest_magnitude = std::max(counts.largest_magnitude, static_cast<std::uint32_t>(_mm512_reduce_max_epu32(largest)));
  const std::uint32_t least_less_one = _mm512_reduce_min_epu32(least);
  if (least_less_one == 0xFFFFFFFFu) return;  // all zero (not wrapped around to 0: UBSan's integer checks)
  const std::uint32_t smallest = least_less_one + 1u;
  const int lowest = static_cast<int>(smallest >> 23), highest = static_cast<int>(_mm512_reduce_max_epu32(largest) >> 23);
  if (lowest == 0 || highest == 255) {
    for (std::size_t j = 0; j < n; ++j)
      if ((bits[j] & 0x7FFFFFFFu) != 0) ++counts.by_field[(bits[j] >> 23) & 0xFF];
    return;
  }
  for (int base = lowest; base <= highest; base += window) count_window(bits, n, base, counts);
}

}  // namespace

FieldCounts count_exponent_fields_avx512(const std::uint32_t* bits, std::size_t n) {
  FieldCounts counts;
  for (std::size_t start = 0; start < n; start += piece) count_piece(bits + start, std::min(piece, n - start), counts);
  return counts;
}

}  // namespace fpscope
FPSCOPE_END_KERNEL_UNIT
#else
#include <stdexcept>
// Other processors: bulk_kernel_isa() is never "avx512" there, so this is never called.
fpscope::FieldCounts fpscope::count_exponent_fields_avx512(const std::uint32_t*, std::size_t) {
  throw std::logic_error("count_exponent_fields_avx512: not built for this processor");
}
#endif
