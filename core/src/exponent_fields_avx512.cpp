// Exponent fields counted with AVX-512: each value's field one-hot in its own lane (1 << (field -
// base)) and the positions counted by bit-sliced carry-save adders (positional_counts_avx512.hpp),
// whose cost does not grow with the number of fields a tensor spans. In pieces of 64K values:
// one pass counts a window of 32 fields placed from a sample and learns whether any value lies
// above or below it, then one pass per window of the fields outside it reads the piece back from
// L2 (count_piece). A piece with a subnormal or an infinity or NaN is counted one value at a time
// (rare).
#include "exponent_fields.hpp"
#include "kernel_unit_baseline.hpp"

#if defined(FPSCOPE_HAVE_X86_KERNELS)
// Compiled for AVX-512 after the shared headers, compiled for the baseline
// (kernel_unit_baseline.hpp says why).
FPSCOPE_BEGIN_AVX512_UNIT
#include "positional_counts_avx512.hpp"

#include <limits>

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

// A pass over a piece sees each magnitude as t = magnitude - (base << 23), a 32-bit difference
// that cannot overflow: t >> 23 (unsigned) is field - base inside the window, and 257 or more for
// a magnitude below base's binade, zero included (the 1 shifts out). Two running maxima of t say
// what the window missed: the signed one is the largest magnitude less base << 23 (so also
// whether any value lies above the window); the unsigned one exceeds a zero's t, 2^32 - (base <<
// 23), only where a nonzero magnitude lies below the window (those t are the largest unsigned).
// Set by the pass (no initialisers: GCC would compile them for the baseline, where the
// intrinsics do not inline).
struct Range {
  __m512i signed_largest, unsigned_largest;
};

// The fields in [base, min(base + 32, limit)) of the n values at bits, added into counts; returns
// how many values it counted. Where `range` is given, it also takes the maxima above.
template <bool track_range>
std::uint64_t count_window(const std::uint32_t* bits, std::size_t n, int base, int limit, FieldCounts& counts, Range* range) {
  avx512::PositionalCounts positions;
  const __m512i one = _mm512_set1_epi32(1), offset = _mm512_set1_epi32(static_cast<int>(static_cast<unsigned>(base) << 23));
  __m512i signed_largest = _mm512_set1_epi32(std::numeric_limits<std::int32_t>::min()), unsigned_largest = _mm512_setzero_si512();
  // 256 values (16 words) at a time.
  const auto one_hot = [&](const __m512i magnitude) {
    const __m512i t = _mm512_sub_epi32(magnitude, offset);
    if constexpr (track_range) {
      signed_largest = _mm512_max_epi32(signed_largest, t);
      unsigned_largest = _mm512_max_epu32(unsigned_largest, t);
    }
    return _mm512_sllv_epi32(one, _mm512_srli_epi32(t, 23));
  };
  std::size_t i = 0;
  for (; i + 256 <= n; i += 256) {
    const std::uint32_t* at = bits + i;
    positions.add16_made([&](int k) {
      return one_hot(_mm512_and_si512(_mm512_loadu_si512(at + 16 * k), _mm512_set1_epi32(0x7FFFFFFF)));
    });
  }
  if (i < n) {
    positions.add16_made([&](int k) {
      const std::size_t at = i + 16 * static_cast<std::size_t>(k);
      return at < n ? one_hot(magnitudes(bits, at, n)) : _mm512_setzero_si512();  // lanes past the end: zero magnitudes
    });
  }
  if constexpr (track_range) range->signed_largest = signed_largest, range->unsigned_largest = unsigned_largest;
  std::uint64_t in_window[window] = {};
  positions.drain_into(in_window);
  std::uint64_t counted = 0;
  for (int k = 0; k < window && base + k < std::min(limit, 256); ++k) {
    counts.by_field[static_cast<std::size_t>(base + k)] += in_window[k];
    counted += in_window[k];
  }
  return counted;
}

// The largest exponent field among 256 values spread over the piece (16 runs of 16, one at the
// start of each sixteenth): a tensor's magnitudes drift along it (rows, tokens, heads), so runs
// from all over place the window better than its first 256 values do.
int sampled_top_field(const std::uint32_t* bits, std::size_t n) {
  __m512i largest = _mm512_setzero_si512();
  const std::size_t stride = std::max<std::size_t>(16, n / 16 / 16 * 16);
  for (std::size_t i = 0, runs = 0; i < n && runs < 16; i += stride, ++runs) largest = _mm512_max_epu32(largest, magnitudes(bits, i, n));
  return static_cast<int>(_mm512_reduce_max_epu32(largest) >> 23);
}

// The window's maxima (Range) read out: the largest magnitude, and whether a nonzero one lies
// below base's binade.
struct Seen {
  std::uint32_t largest_magnitude;
  bool below;
};
// (In 64 bits: no wrap-around for the integer sanitizer of scripts/fuzz to report.)
Seen seen(const Range& range, int base) {
  const std::int64_t offset = std::int64_t{base} << 23;
  const std::int64_t largest = std::int64_t{_mm512_reduce_max_epi32(range.signed_largest)} + offset;
  const std::int64_t below_top = std::int64_t{_mm512_reduce_max_epu32(range.unsigned_largest)} + offset;  // 2^32 for a zero
  return {static_cast<std::uint32_t>(largest), below_top > (std::int64_t{1} << 32)};
}

// One piece in one pass where it can: the window is placed from a sample (its top three fields
// above the sample's largest), the pass learns what lies outside it as it counts, and only the
// fields outside take passes of their own: above it up to the largest field, and below it window
// by window while a pass still sees something below (down to field 1; below that, a subnormal).
// Every nonzero value is then counted once, so the zeros are the rest.
void count_piece(const std::uint32_t* bits, std::size_t n, FieldCounts& counts) {
  const int base = std::max(1, sampled_top_field(bits, n) + 3 - (window - 1));
  FieldCounts piece_counts;  // merged into counts unless the piece goes one value at a time
  Range range;
  std::uint64_t counted = count_window<true>(bits, n, base, 256, piece_counts, &range);
  const Seen first = seen(range, base);
  counts.largest_magnitude = std::max(counts.largest_magnitude, first.largest_magnitude);
  if (first.largest_magnitude == 0) {  // all zero
    counts.zeros += n;
    counts.by_field[0] += n;
    return;
  }
  const int highest = static_cast<int>(first.largest_magnitude >> 23);
  bool subnormal = false;
  int lowest_base = base;
  for (bool below = first.below; below;) {
    if (lowest_base == 1) {
      subnormal = true;
      break;
    }
    const int limit = lowest_base;
    lowest_base = std::max(1, lowest_base - window);
    counted += count_window<true>(bits, n, lowest_base, limit, piece_counts, &range);
    below = seen(range, lowest_base).below;
  }
  if (subnormal || highest == 255) {  // a subnormal, an infinity or a NaN: one value at a time
    std::uint64_t zeros = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if ((bits[j] & 0x7FFFFFFFu) != 0) ++counts.by_field[(bits[j] >> 23) & 0xFF];
      else ++zeros;
    }
    counts.zeros += zeros;
    counts.by_field[0] += zeros;
    return;
  }
  for (int above = base + window; above <= highest; above += window) counted += count_window<false>(bits, n, above, 256, piece_counts, nullptr);
  for (int field = lowest_base; field <= highest; ++field) counts.by_field[static_cast<std::size_t>(field)] += piece_counts.by_field[static_cast<std::size_t>(field)];
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
