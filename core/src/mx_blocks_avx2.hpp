// MX blocks of 32 floating-point elements in round to nearest even, written with AVX2 intrinsics:
// the common case of block quantization (every MX element format, along rows or down columns as
// the walker's transposed bands), which the portable loops in block_kernels.inl leave at a sixth
// of a plain read. Included by block_kernels.inl in the instruction sets that have AVX2.
//
// It must give exactly what the lean cast (cast.hpp, saturating_nearest_even_from_normal) and the
// walker give, and the kernels-vs-scalar tests hold it to the scalar path bit for bit. It takes a
// block only whole: every element zero or with v / 2^X a normal float32 (X the block's scale
// exponent), and the scale not NaN; any other block is left to the caller's general path.
//
// Per element, with q = v / 2^X made by subtracting X from v's exponent field (exact for those):
// - q at or above 2^emin (F's normal range): the float32 bits rounded at F's last mantissa bit,
//   ties to even, as integers; the carry walks into the exponent; the code is the bits shifted
//   down and rebiased, clamped at the largest finite code (saturation, which raises overflow).
// - q below 2^emin: q + C in float32 arithmetic, C = 2^(emin - m + 23), whose unit in the last
//   place is F's smallest subnormal, rounds q to F's subnormal grid in the processor's rounding
//   (to nearest even: checked before use); the code is bits(q + C) - bits(C), up to 2^m, which is
//   2^emin's own code when it rounds up. It is exact iff (q + C) - C == q.
// The relative exponent floor(log2 amax) - floor(log2 |v|) of a normal v is a difference of
// exponent fields; those below vector_bins are counted in byte lanes, the rest one by one.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fpscope/core/block_format.hpp"
#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/cast.hpp"
#include "fpscope/core/e8m0.hpp"

namespace fpscope::mx_avx2 {

inline constexpr std::size_t block_size = 32;

// Whether the processor rounds float32 arithmetic to nearest even (MXCSR's rounding control), as
// the subnormal grid's addition needs.
inline bool rounds_to_nearest_even() { return (_mm_getcsr() & 0x6000u) == 0; }

template <Format F>
class Blocks {
  static_assert(F.width() <= 8 && F.flavour != Flavour::fnuz, "MX float elements of 8 bits or fewer");
  static constexpr int m = F.mantissa_bits;
  static constexpr std::uint32_t drop = 23 - m;
  static constexpr std::uint32_t min_normal32 = static_cast<std::uint32_t>(F.emin() + 127) << 23;
  static constexpr std::uint32_t rebias = static_cast<std::uint32_t>(127 - F.bias()) << m;
  // Added before the shift: half an F unit less one, with the rebias taken off the exponent field.
  static constexpr std::uint32_t round_bias = ((1u << (drop - 1)) - 1) - (rebias << drop);
  static constexpr std::uint32_t max_code = static_cast<std::uint32_t>(F.max_finite_bits());
  static constexpr std::uint32_t grid_bits = static_cast<std::uint32_t>(F.emin() - m + 23 + 127) << 23;  // C
  static constexpr int vector_bins = 64;  // relative exponents 0 .. 63 counted in byte lanes
  static_assert(F.emin() - m + 23 > F.emin() && F.emin() + 127 > 1, "C above F's normal range, F's subnormals normal in float32");

 public:
  Blocks(const BlockFormat& format, ScaleRule rule, bool tininess_before)
      : format_(format), rule_(rule), tiny_threshold_(tininess_before ? min_normal32 : min_normal32 - (1u << drop) / 2) {}

  // Quantizes the leading blocks of the `blocks` consecutive blocks of 32 at `in` (codes to
  // `out`, scale codes to `scales`) and returns how many it took: it stops before the first
  // block it cannot take whole. Counts go to the statistics at finish().
  template <bool Record>
  std::size_t take(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, std::size_t blocks, BlockStatistics* statistics);

  // Adds what the blocks taken add up to into `statistics` (when recording) and `flags`.
  void finish(BlockStatistics* statistics, CastFlags& flags) {
    bool any_saturated = _mm256_testz_si256(saturated_, saturated_) == 0;
    if (statistics != nullptr) {
      count_bins(statistics);
      statistics->blocks += taken_;
      statistics->elements += taken_ * block_size;
      statistics->made_subnormal += below_grid_total_ - code_zero_total_;
      statistics->flushed_to_zero += code_zero_total_ - zeros_;
      statistics->saturated += saturated_total_;
      any_saturated = saturated_total_ != 0;
    }
    if (_mm256_movemask_epi8(exact_) != -1 || any_saturated) flags.inexact = 1;
    if (_mm256_testz_si256(underflow_, underflow_) == 0) flags.underflow = 1;
    if (any_saturated) flags.overflow = 1;
  }

 private:
  template <bool Record, bool TrackFlags>
  std::size_t take_blocks(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, std::size_t blocks, BlockStatistics* statistics);
  static std::uint64_t byte_sum(__m256i counts) {  // the sum of 32 byte lanes
    const __m256i sums = _mm256_sad_epu8(counts, _mm256_setzero_si256());
    alignas(32) std::uint64_t parts[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(parts), sums);
    return parts[0] + parts[1] + parts[2] + parts[3];
  }
  static std::uint32_t horizontal_max(__m256i v) {
    __m128i x = _mm_max_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_max_epu32(x, _mm_shuffle_epi32(x, 0x4E));
    x = _mm_max_epu32(x, _mm_shuffle_epi32(x, 0xB1));
    return static_cast<std::uint32_t>(_mm_cvtsi128_si32(x));
  }
  static std::uint32_t horizontal_min(__m256i v) {
    __m128i x = _mm_min_epu32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_min_epu32(x, _mm_shuffle_epi32(x, 0x4E));
    x = _mm_min_epu32(x, _mm_shuffle_epi32(x, 0xB1));
    return static_cast<std::uint32_t>(_mm_cvtsi128_si32(x));
  }
  // The buffered blocks' bins counted into the statistics: each bin up to the largest seen (and
  // below vector_bins) as the count of equal bytes, lane by lane over the buffer (at most
  // buffer_blocks per lane), then summed; four bins per pass, so that no count waits on another;
  // zeros (-1) the same way.
  void count_bins(BlockStatistics* statistics) {
    if (buffered_ == 0) return;
    saturated_total_ += byte_sum(saturated_), below_grid_total_ += byte_sum(below_grid_), code_zero_total_ += byte_sum(code_zero_);
    saturated_ = below_grid_ = code_zero_ = _mm256_setzero_si256();
    alignas(32) std::int8_t largest[32];
    _mm256_store_si256(reinterpret_cast<__m256i*>(largest), buffer_max_);
    const int top = std::min<int>(*std::max_element(largest, largest + 32), vector_bins - 1);
    for (int first = -1; first <= top; first += 4) {  // bin -1: the zeros
      __m256i value[4], counts[4];
      for (int i = 0; i < 4; ++i) {
        value[i] = _mm256_set1_epi8(static_cast<char>(first + i));
        counts[i] = _mm256_setzero_si256();
      }
      for (int k = 0; k < buffered_; ++k) {
        const __m256i bytes = _mm256_load_si256(&bin_buffer_[k]);
        for (int i = 0; i < 4; ++i) counts[i] = _mm256_sub_epi8(counts[i], _mm256_cmpeq_epi8(bytes, value[i]));
      }
      for (int i = 0; i < 4; ++i) {
        const int bin = first + i;
        if (bin > top) break;
        const std::uint64_t count = byte_sum(counts[i]);
        if (bin < 0) {
          statistics->zeros += count;
          zeros_ += count;
        } else {
          statistics->relative_exponents[static_cast<std::size_t>(bin)] += count;
        }
      }
    }
    buffered_ = 0;
    buffer_max_ = _mm256_set1_epi8(-1);
  }

  BlockFormat format_;
  ScaleRule rule_;
  std::uint32_t tiny_threshold_;
  std::uint64_t taken_ = 0, zeros_ = 0;
  // Counts per byte lane since the last count_bins (recording; else saturated_ is nonzero where
  // any element saturated), and their totals: saturated elements, codes below 2^m (subnormal or
  // zero), zero codes.
  __m256i saturated_ = _mm256_setzero_si256(), below_grid_ = _mm256_setzero_si256(), code_zero_ = _mm256_setzero_si256();
  std::uint64_t saturated_total_ = 0, below_grid_total_ = 0, code_zero_total_ = 0;
  __m256i exact_ = _mm256_set1_epi32(-1), underflow_ = _mm256_setzero_si256();
  bool flags_settled_ = false;  // inexact and underflow both raised
  // The bins of up to buffer_blocks blocks, one byte each (see take_blocks), and their largest.
  static constexpr int buffer_blocks = 64;
  __m256i bin_buffer_[buffer_blocks];
  __m256i buffer_max_ = _mm256_set1_epi8(-1);
  int buffered_ = 0;
};

template <Format F>
template <bool Record>
std::size_t Blocks<F>::take(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, std::size_t blocks, BlockStatistics* statistics) {
  // Inexact and underflow are sticky: once both are raised, the blocks after need not look.
  std::size_t done = 0;
  while (done < blocks && !flags_settled_) {
    const std::size_t chunk = std::min<std::size_t>(blocks - done, 8);
    const std::size_t took = take_blocks<Record, true>(in + done * block_size, out + done * block_size, scales + done, chunk, statistics);
    done += took;
    flags_settled_ = _mm256_movemask_epi8(exact_) != -1 && _mm256_testz_si256(underflow_, underflow_) == 0;
    if (took < chunk) return done;
  }
  if (done < blocks) done += take_blocks<Record, false>(in + done * block_size, out + done * block_size, scales + done, blocks - done, statistics);
  return done;
}

template <Format F>
template <bool Record, bool TrackFlags>
std::size_t Blocks<F>::take_blocks(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, std::size_t blocks,
                                   BlockStatistics* statistics) {
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7FFFFFFF), one = _mm256_set1_epi32(1), zero = _mm256_setzero_si256();
  const __m256i min_normal = _mm256_set1_epi32(static_cast<int>(min_normal32));
  const __m256i rounding = _mm256_set1_epi32(static_cast<int>(round_bias));
  const __m256i low_mask = _mm256_set1_epi32(static_cast<int>((1u << drop) - 1));
  const __m256i largest_byte = _mm256_set1_epi8(static_cast<char>(max_code)), above_largest = _mm256_set1_epi8(static_cast<char>(max_code + 1));
  const __m256i grid_byte = _mm256_set1_epi8(static_cast<char>(1 << m));
  const __m256i tiny_below = _mm256_set1_epi32(static_cast<int>(tiny_threshold_));
  const __m256i grid = _mm256_set1_epi32(static_cast<int>(grid_bits));
  const __m256 grid_value = _mm256_castsi256_ps(grid);
  const __m256i in_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i byte_sign = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i beyond_vector_bins = _mm256_set1_epi8(static_cast<char>(vector_bins - 1));
  __m256i saturated = saturated_, below_grid = below_grid_, code_zero = code_zero_, exact_all = exact_, underflow = underflow_;

  std::size_t b = 0;
  for (; b < blocks; ++b) {
    const std::uint32_t* p = in + b * block_size;
    __m256i u[4], magnitude[4];
    for (int i = 0; i < 4; ++i) {
      u[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8 * i));
      magnitude[i] = _mm256_and_si256(u[i], magnitude_mask);
    }
    const std::uint32_t amax = horizontal_max(
        _mm256_max_epu32(_mm256_max_epu32(magnitude[0], magnitude[1]), _mm256_max_epu32(magnitude[2], magnitude[3])));
    // The smallest nonzero magnitude less one (a zero's wraps to the largest).
    const std::uint32_t smallest_less_one = horizontal_min(_mm256_min_epu32(
        _mm256_min_epu32(_mm256_sub_epi32(magnitude[0], one), _mm256_sub_epi32(magnitude[1], one)),
        _mm256_min_epu32(_mm256_sub_epi32(magnitude[2], one), _mm256_sub_epi32(magnitude[3], one))));
    // The OCP rule named as a constant, so that its call folds to a few instructions.
    const std::uint8_t scale_code = rule_ == ScaleRule::floor ? mx_scale_code(format_, ScaleRule::floor, amax) : mx_scale_code(format_, rule_, amax);
    if (e8m0::is_nan(scale_code)) break;
    const int shared = e8m0::exponent_of(scale_code);
    // v / 2^X is a normal float32 iff v's exponent field is above max(X, 0).
    const std::uint32_t smallest_taken = static_cast<std::uint32_t>(std::max(shared + 1, 1)) << 23;
    if (smallest_less_one < smallest_taken - 1) break;
    scales[b] = scale_code;

    const __m256i shift = _mm256_set1_epi32(static_cast<int>(static_cast<std::uint32_t>(shared) << 23));
    const __m256i amax_field = _mm256_set1_epi32(static_cast<int>(amax >> 23));
    __m256i codes[4], bins[4];
    for (int i = 0; i < 4; ++i) {
      const __m256i is_zero = _mm256_cmpeq_epi32(magnitude[i], zero);
      const __m256i q = _mm256_andnot_si256(is_zero, _mm256_sub_epi32(magnitude[i], shift));
      const __m256i below = _mm256_cmpgt_epi32(min_normal, q);
      const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(q, drop), one);
      const __m256i normal_code = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(q, odd), rounding), drop);
      const __m256 on_grid = _mm256_add_ps(_mm256_castsi256_ps(q), grid_value);
      const __m256i subnormal_code = _mm256_sub_epi32(_mm256_castps_si256(on_grid), grid);
      codes[i] = _mm256_blendv_epi8(normal_code, subnormal_code, below);  // unclamped
      if constexpr (TrackFlags) {
        const __m256i exact_normal = _mm256_cmpeq_epi32(_mm256_and_si256(q, low_mask), zero);
        const __m256i exact_subnormal =
            _mm256_castps_si256(_mm256_cmp_ps(_mm256_sub_ps(on_grid, grid_value), _mm256_castsi256_ps(q), _CMP_EQ_OQ));
        const __m256i exact = _mm256_blendv_epi8(exact_normal, exact_subnormal, below);
        exact_all = _mm256_and_si256(exact_all, exact);
        underflow = _mm256_or_si256(underflow, _mm256_andnot_si256(exact, _mm256_cmpgt_epi32(tiny_below, q)));
      }
      if constexpr (Record) {
        // A zero's bin is -1 (0xFF once packed); a normal one's 0 .. 253, packed with saturation at 127.
        bins[i] = _mm256_or_si256(_mm256_sub_epi32(amax_field, _mm256_srli_epi32(magnitude[i], 23)), is_zero);
      }
    }
    // The codes packed to bytes with unsigned saturation (a code above 255 reads 255, still above
    // max), counted and clamped there (magnitude codes are below 128), then given their signs: a
    // negative input's bits pack with signed saturation to 0x80. The packs interleave 128-bit
    // lanes; the permutation undoes it.
    const __m256i unclamped = _mm256_packus_epi16(_mm256_packus_epi32(codes[0], codes[1]), _mm256_packus_epi32(codes[2], codes[3]));
    const __m256i saturating = _mm256_cmpeq_epi8(_mm256_max_epu8(unclamped, above_largest), unclamped);
    const __m256i clamped = _mm256_min_epu8(unclamped, largest_byte);
    if constexpr (Record) {
      saturated = _mm256_sub_epi8(saturated, saturating);
      below_grid = _mm256_sub_epi8(below_grid, _mm256_cmpgt_epi8(grid_byte, clamped));
      code_zero = _mm256_sub_epi8(code_zero, _mm256_cmpeq_epi8(clamped, zero));
    } else {
      saturated = _mm256_or_si256(saturated, saturating);  // only whether any was
    }
    __m256i signs = _mm256_and_si256(
        _mm256_packs_epi16(_mm256_packs_epi32(u[0], u[1]), _mm256_packs_epi32(u[2], u[3])), byte_sign);
    if constexpr (F.width() < 8) signs = _mm256_srli_epi16(signs, 8 - F.width());  // no bit crosses into the byte below
    const __m256i packed = _mm256_or_si256(clamped, signs);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + b * block_size), _mm256_permutevar8x32_epi32(packed, in_order));
    if constexpr (Record) {
      ++statistics->scale_codes[scale_code];
      // The bins as bytes, in any order (only their counts are kept).
      const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(bins[0], bins[1]), _mm256_packs_epi32(bins[2], bins[3]));
      // Relative exponents from vector_bins on, one by one (signed bytes: a zero's -1 is not among them).
      if (const int rest = _mm256_movemask_epi8(_mm256_cmpgt_epi8(bytes, beyond_vector_bins)); rest != 0) {
        const __m256i ordered = _mm256_permutevar8x32_epi32(bytes, in_order);
        auto lanes = static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_cmpgt_epi8(ordered, beyond_vector_bins)));
        const int amax_exponent = static_cast<int>(amax >> 23);
        while (lanes != 0) {
          const int j = __builtin_ctz(lanes);
          lanes &= lanes - 1;
          ++statistics->relative_exponents[static_cast<std::size_t>(amax_exponent - static_cast<int>((p[j] & 0x7FFFFFFFu) >> 23))];
        }
      }
      _mm256_store_si256(&bin_buffer_[buffered_], bytes);
      buffer_max_ = _mm256_max_epi8(buffer_max_, bytes);
      if (++buffered_ == buffer_blocks) {  // the byte counters are full too
        saturated_ = saturated, below_grid_ = below_grid, code_zero_ = code_zero;
        count_bins(statistics);
        saturated = below_grid = code_zero = zero;
      }
    }
  }
  saturated_ = saturated, below_grid_ = below_grid, code_zero_ = code_zero, exact_ = exact_all, underflow_ = underflow;
  taken_ += b;
  return b;
}

// Blocks<F> as the walker's whole_blocks (block_kernels.inl, walk_blocks).
template <Format F>
struct WholeBlocks {
  static constexpr bool uses_whole_blocks = true;
  Blocks<F>* blocks;
  BlockStatistics* statistics;  // null: codes only
  std::size_t operator()(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, std::size_t count) const {
    return statistics != nullptr ? blocks->template take<true>(in, out, scales, count, statistics)
                                 : blocks->template take<false>(in, out, scales, count, nullptr);
  }
};

}  // namespace fpscope::mx_avx2
