// Exponent fields counted with AVX2: exponent_fields_avx512.cpp's method in AVX2's eight lanes.
// Each value's field one-hot in its lane (1 << (field - base)), the positions counted by
// bit-sliced carry-save adders (positional_counts_avx2.hpp), whose cost does not grow with the
// number of fields a tensor spans. In pieces of 64K values: one pass counts a window of 32 fields
// placed from a sample and learns whether any value lies above or below it, then one pass per
// window of the fields outside it reads the piece back from L2 (count_piece). A piece with a
// subnormal or an infinity or NaN is counted one value at a time (rare).
#include "exponent_fields.hpp"
#include "kernel_unit_baseline.hpp"

#if defined(FPSCOPE_HAVE_X86_KERNELS)
// Compiled for AVX2 after the shared headers, compiled for the baseline
// (kernel_unit_baseline.hpp says why).
FPSCOPE_BEGIN_AVX2_UNIT
#include "positional_counts_avx2.hpp"

#include <limits>

namespace fpscope {

namespace bulk_avx2 {
namespace {

constexpr std::size_t piece = std::size_t{1} << 16;
constexpr int window = 32;

// Lanes [0, n - i) of the 8 values at bits + i, magnitudes only; lanes past the end read 0.
[[gnu::always_inline]] inline __m256i magnitudes(const std::uint32_t* bits, std::size_t i, std::size_t n) {
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7FFFFFFF);
  if (i + 8 <= n) return _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + i)), magnitude_mask);
  const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_and_si256(_mm256_maskload_epi32(reinterpret_cast<const int*>(bits + i), lanes), magnitude_mask);
}

std::int32_t largest_signed(__m256i v) {
  alignas(32) std::int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  return *std::max_element(lanes, lanes + 8);
}
std::uint32_t largest_unsigned(__m256i v) {
  alignas(32) std::uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  return *std::max_element(lanes, lanes + 8);
}

// A pass over a piece sees each magnitude as t = magnitude - (base << 23), as the AVX-512 kernel
// does (exponent_fields_avx512.cpp says why both maxima of t tell what the window missed).
struct Range {
  __m256i signed_largest, unsigned_largest;
};

// The fields in [base, min(base + 32, limit)) of the n values at bits, added into counts; returns
// how many values it counted. Where `range` is given, it also takes the maxima above.
template <bool track_range>
std::uint64_t count_window(const std::uint32_t* bits, std::size_t n, int base, int limit, FieldCounts& counts, Range* range) {
  PositionalCounts positions;
  const __m256i one = _mm256_set1_epi32(1), offset = _mm256_set1_epi32(static_cast<int>(static_cast<unsigned>(base) << 23));
  __m256i signed_largest = _mm256_set1_epi32(std::numeric_limits<std::int32_t>::min()), unsigned_largest = _mm256_setzero_si256();
  const auto one_hot = [&](const __m256i magnitude) {
    const __m256i t = _mm256_sub_epi32(magnitude, offset);
    if constexpr (track_range) {
      signed_largest = _mm256_max_epi32(signed_largest, t);
      unsigned_largest = _mm256_max_epu32(unsigned_largest, t);
    }
    return _mm256_sllv_epi32(one, _mm256_srli_epi32(t, 23));  // shifts of 32 or more give 0
  };
  // 128 values (16 words) at a time.
  std::size_t i = 0;
  for (; i + 128 <= n; i += 128) {
    const std::uint32_t* at = bits + i;
    positions.add16_made([&](int k) {
      return one_hot(_mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 8 * k)), _mm256_set1_epi32(0x7FFFFFFF)));
    });
  }
  if (i < n) {
    positions.add16_made([&](int k) {
      const std::size_t at = i + 8 * static_cast<std::size_t>(k);
      return at < n ? one_hot(magnitudes(bits, at, n)) : _mm256_setzero_si256();  // lanes past the end: zero magnitudes
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
// start of each sixteenth), as the AVX-512 kernel samples.
int sampled_top_field(const std::uint32_t* bits, std::size_t n) {
  __m256i largest = _mm256_setzero_si256();
  const std::size_t stride = std::max<std::size_t>(16, n / 16 / 16 * 16);
  for (std::size_t i = 0, runs = 0; i < n && runs < 16; i += stride, ++runs) {
    largest = _mm256_max_epu32(largest, magnitudes(bits, i, n));
    if (i + 8 < n) largest = _mm256_max_epu32(largest, magnitudes(bits, i + 8, n));
  }
  return static_cast<int>(largest_unsigned(largest) >> 23);
}

// The window's maxima (Range) read out: the largest magnitude, and whether a nonzero one lies
// below base's binade (in 64 bits: no wrap-around for the integer sanitizer).
struct Seen {
  std::uint32_t largest_magnitude;
  bool below;
};
Seen seen(const Range& range, int base) {
  const std::int64_t offset = std::int64_t{base} << 23;
  const std::int64_t largest = std::int64_t{largest_signed(range.signed_largest)} + offset;
  const std::int64_t below_top = std::int64_t{largest_unsigned(range.unsigned_largest)} + offset;  // 2^32 for a zero
  return {static_cast<std::uint32_t>(largest), below_top > (std::int64_t{1} << 32)};
}

// One piece, as the AVX-512 kernel's count_piece: a window placed from a sample, passes of their
// own only for the fields outside it; every nonzero value counted once, so the zeros are the rest.
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

FieldCounts count(const std::uint32_t* bits, std::size_t n) {
  FieldCounts counts;
  for (std::size_t start = 0; start < n; start += piece) count_piece(bits + start, std::min(piece, n - start), counts);
  return counts;
}

}  // namespace
}  // namespace bulk_avx2

FieldCounts count_exponent_fields_avx2(const std::uint32_t* bits, std::size_t n) { return bulk_avx2::count(bits, n); }

}  // namespace fpscope
FPSCOPE_END_KERNEL_UNIT
#else
#include <stdexcept>
// Other processors: bulk_kernel_isa() is never "avx2" there, so this is never called.
fpscope::FieldCounts fpscope::count_exponent_fields_avx2(const std::uint32_t*, std::size_t) {
  throw std::logic_error("count_exponent_fields_avx2: not built for this processor");
}
#endif
