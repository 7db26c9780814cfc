// Exponent fields counted with AVX-512: each value's field one-hot in its own lane (1 << (field -
// base)) and the positions counted by bit-sliced carry-save adders (positional_counts_avx512.hpp),
// whose cost does not grow with the number of fields a tensor spans. In pieces of 64K values:
// one pass counts a window of 32 fields placed from a sample and finds the piece's largest and
// smallest nonzero magnitudes, then one pass per window of the fields outside it between them
// reads the piece back from L2 (count_piece). A piece with a subnormal or an infinity or NaN is
// counted one value at a time (rare).
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

// The largest and the smallest nonzero magnitude of the values a window pass read (the smallest
// kept less one, so that a zero's wraps around to the largest: min_epu32 then passes it over).
// Set by the pass (no initialisers: GCC would compile them for the baseline, where the
// intrinsics do not inline).
struct Range {
  __m512i largest, least_less_one;
};

// The fields in [base, min(base + 32, limit)) of the n values at bits, added into counts; returns
// how many values it counted. Where `range` is given, it also takes their magnitudes' range.
template <bool track_range>
std::uint64_t count_window(const std::uint32_t* bits, std::size_t n, int base, int limit, FieldCounts& counts, Range* range) {
  avx512::PositionalCounts positions;
  const __m512i one = _mm512_set1_epi32(1), base_field = _mm512_set1_epi32(base);
  __m512i largest = _mm512_setzero_si512(), least = _mm512_set1_epi32(-1);
  // 256 values (16 words) at a time; a field outside the window shifts the 1 out (a negative
  // distance is a large unsigned one), and so does a zero's field 0 (base is at least 1).
  const auto one_hot = [&](const __m512i magnitude) {
    if constexpr (track_range) {
      largest = _mm512_max_epu32(largest, magnitude);
      least = _mm512_min_epu32(least, _mm512_sub_epi32(magnitude, one));
    }
    return _mm512_sllv_epi32(one, _mm512_sub_epi32(_mm512_srli_epi32(magnitude, 23), base_field));
  };
  __m512i words[16];
  std::size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    for (int k = 0; k < 16; ++k) words[k] = one_hot(magnitudes(bits, i + 16 * static_cast<std::size_t>(k), n));
    positions.add16(words);
  }
  if (i < n) {
    for (int k = 0; k < 16; ++k) {
      const std::size_t at = i + 16 * static_cast<std::size_t>(k);
      words[k] = at < n ? one_hot(magnitudes(bits, at, n)) : _mm512_setzero_si512();  // lanes past the end: zero magnitudes
    }
    positions.add16(words);
  }
  if constexpr (track_range) range->largest = largest, range->least_less_one = least;
  std::uint64_t in_window[window] = {};
  positions.drain_into(in_window);
  std::uint64_t counted = 0;
  for (int k = 0; k < window && base + k < std::min(limit, 256); ++k) {
    counts.by_field[static_cast<std::size_t>(base + k)] += in_window[k];
    counted += in_window[k];
  }
  return counted;
}

// The largest exponent field among the first (at most 256) values.
int sampled_top_field(const std::uint32_t* bits, std::size_t n) {
  __m512i largest = _mm512_setzero_si512();
  for (std::size_t i = 0; i < std::min<std::size_t>(n, 256); i += 16) largest = _mm512_max_epu32(largest, magnitudes(bits, i, std::min<std::size_t>(n, 256)));
  return static_cast<int>(_mm512_reduce_max_epu32(largest) >> 23);
}

// One piece in one pass where it can: the window is placed from a sample (its top three fields
// above the first 256 values' largest), the pass takes the piece's range as it counts, and only
// the fields the range shows outside the window take passes of their own (a tensor spans one or
// two windows; its largest values are seldom more than a binade above a sample's). Every nonzero
// value is then counted once, so the zeros are the rest.
void count_piece(const std::uint32_t* bits, std::size_t n, FieldCounts& counts) {
  const int base = std::max(1, sampled_top_field(bits, n) + 3 - (window - 1));
  FieldCounts in_window;
  Range range;
  std::uint64_t counted = count_window<true>(bits, n, base, 256, in_window, &range);
  const std::uint32_t largest = _mm512_reduce_max_epu32(range.largest);
  const std::uint32_t least_less_one = _mm512_reduce_min_epu32(range.least_less_one);
  counts.largest_magnitude = std::max(counts.largest_magnitude, largest);
  if (least_less_one == 0xFFFFFFFFu) {  // all zero (not wrapped around to 0: UBSan's integer checks)
    counts.zeros += n;
    counts.by_field[0] += n;
    return;
  }
  const int lowest = static_cast<int>((least_less_one + 1u) >> 23), highest = static_cast<int>(largest >> 23);
  if (lowest == 0 || highest == 255) {  // a subnormal, an infinity or a NaN: one value at a time
    std::uint64_t zeros = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if ((bits[j] & 0x7FFFFFFFu) != 0) ++counts.by_field[(bits[j] >> 23) & 0xFF];
      else ++zeros;
    }
    counts.zeros += zeros;
    counts.by_field[0] += zeros;
    return;
  }
  for (int field = base; field < std::min(base + window, 256); ++field) counts.by_field[static_cast<std::size_t>(field)] += in_window.by_field[static_cast<std::size_t>(field)];
  for (int below = lowest; below < base; below += window) counted += count_window<false>(bits, n, below, base, counts, nullptr);
  for (int above = base + window; above <= highest; above += window) counted += count_window<false>(bits, n, above, 256, counts, nullptr);
  counts.zeros += n - counted;
  counts.by_field[0] += n - counted;
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
