// MX and NVFP4 blocks of floating-point elements in round to nearest even (and stochastically),
// written with AVX2 intrinsics: the common case of block quantization (every MX element format
// and NVFP4, in blocks of 32 or 16, along rows and down columns), which the portable loops in
// block_kernels.inl leave at a sixth of a plain read (a fortieth, rounding stochastically).
// Included by block_kernels.inl in the instruction sets that have AVX2.
//
// It must give exactly what the lean cast (cast.hpp, saturating_nearest_even_from_normal) and the
// walker give, and the kernels-vs-scalar tests hold it to the scalar path bit for bit. It takes a
// block only whole: every element zero or with v / 2^X a normal float32 (X the block's scale
// exponent), and the scale not NaN; any other block is left to the caller's general path.
//
// NVFP4 takes a block whose products v * factor (float32, rounded, as nvfp4_element_code makes
// them) are all normal float32 numbers or zero, and no input a float32 subnormal.
//
// Per element, q = v * 2^-X in float32 (exact for those, 2^-X a normal float32), then one
// float32 addition rounds q to F's grid: M = 2^(max(e, emin) + 23 - m), e = floor(log2 q), has
// F's unit in the last place at q's binade (its subnormal spacing below 2^emin) as its own, so
// q + M is rounded there in the processor's rounding (to nearest even: checked before use), and
// units = bits(q + M) - bits(M) counts F's units: 2^m + the mantissa for normal q (2^(m+1) when it
// rounds up to the next binade), the whole code below 2^emin. The code is units plus
// (max(e, emin) - emin) << m, clamped at the largest finite code (saturation, which raises
// overflow); it is exact iff (q + M) - M == q.
// The relative exponent floor(log2 amax) - floor(log2 |v|) of a normal v is a difference of
// exponent fields; the common ones are counted in byte lanes, the rest one by one.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fpscope/core/block_format.hpp"
#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/cast.hpp"
#include "fpscope/core/e8m0.hpp"
#include "whole_blocks.hpp"

namespace fpscope::mx_avx2 {

using whole_block::float_arithmetic_is_default;
using whole_block::takes;

template <Format F>
class Blocks : private whole_block::Setting<F> {
  FPSCOPE_WHOLE_BLOCK_SETTING;
  // MXINT8 (whole_block::mxint8_magnitudes): codes in two's complement, and no subnormal codes
  // (below_grid then counts the zero codes, so that made_subnormal is 0).
  static constexpr bool int8 = F == whole_block::mxint8_magnitudes;

 public:
  // (Written out: GCC compiles an inherited constructor, which sets the vector members, for the
  // baseline rather than for the unit's instruction set.)
  Blocks(const BlockFormat& format, ScaleRule rule, bool tininess_before, float tensor_scale)
      : Setting(format, rule, tininess_before, tensor_scale) {}
  using Setting::round_stochastically;

  // Quantizes the leading blocks of the `blocks` consecutive blocks at `in` (codes to `out`,
  // scale codes to `scales`) and returns how many it took: it stops before the first block it
  // cannot take whole (blocks of 16 go in pairs, so before the pair). Counts go to the
  // statistics at finish(). `random_index`: the stochastic random word of in[0] (stochastic
  // rounding only).
  template <bool Record>
  std::size_t take(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, std::size_t blocks, BlockStatistics* statistics,
                   std::uint64_t random_index) {
    if (stochastic_)
      return halves_ ? take_groups<Record, true, true>(in, out, scales, blocks, statistics, random_index)
                     : take_groups<Record, false, true>(in, out, scales, blocks, statistics, random_index);
    return halves_ ? take_groups<Record, true, false>(in, out, scales, blocks, statistics, 0)
                   : take_groups<Record, false, false>(in, out, scales, blocks, statistics, 0);
  }

  // Quantizes the leading groups of `groups` groups of 8 adjacent columns of a band of a block's
  // rows, 32 or 16 (group g's row r at in + 8g + r * stride, codes likewise at out, scale codes
  // at scales[8g .. 8g + 7]) and returns how many it took: it stops before the first group with a
  // block it cannot take (nothing of that group counted). The vector lanes are the blocks:
  // nothing is transposed. The band is walked row by row, a chunk of groups at a time
  // (band_chunk). `random_index`: as take's (element (r, c) draws random_index + r * stride + c).
  template <bool Record>
  std::size_t take_column_groups(const std::uint32_t* in, std::size_t stride, std::uint8_t* out, std::uint8_t* scales, BlockStatistics* statistics,
                                 std::size_t groups, std::uint64_t random_index) {
    std::size_t done = 0;
    while (done < groups) {
      const std::size_t n = std::min(groups - done, chunk_groups), at = 8 * done;
      // What is read next: the band's next chunk, or after its last the next band's first (a
      // prefetch past the tensor's end is only a hint, never a fault).
      const std::uint32_t* next = done + n < groups ? in + at + 8 * n : in + static_cast<std::size_t>(format_.block_size) * stride;
      const std::uint64_t index = random_index + at;
      const std::size_t took =
          stochastic_ ? (flags_settled_ ? band_chunk<Record, false, true>(in + at, stride, out + at, scales + at, statistics, n, next, index)
                                        : band_chunk<Record, true, true>(in + at, stride, out + at, scales + at, statistics, n, next, index))
                      : (flags_settled_ ? band_chunk<Record, false, false>(in + at, stride, out + at, scales + at, statistics, n, next, 0)
                                        : band_chunk<Record, true, false>(in + at, stride, out + at, scales + at, statistics, n, next, 0));
      flags_settled_ = flags_raised();
      done += took;
      if (took < n) break;
    }
    return done;
  }

  // Adds what the blocks taken add up to into `statistics` (when recording) and `flags`.
  void finish(BlockStatistics* statistics, CastFlags& flags) {
    bool any_saturated = _mm256_testz_si256(saturated_, saturated_) == 0;
    if (statistics != nullptr) {
      count_bins(statistics);
      statistics->blocks += taken_;
      statistics->elements += taken_ * static_cast<std::uint64_t>(format_.block_size);
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
  template <bool Record, bool Halves, bool Stochastic>
  std::size_t take_groups(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, std::size_t blocks, BlockStatistics* statistics,
                          std::uint64_t random_index);
  template <bool Record, bool TrackFlags, bool Halves, bool Stochastic>
  std::size_t take_blocks(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, std::size_t blocks, BlockStatistics* statistics,
                          std::uint64_t random_index);
  // Groups of 8 columns a band walk takes at once: 32 rows of 64 x 8 float32 (64 KiB) stay in L2
  // between its two passes.
  static constexpr std::size_t chunk_groups = 64;
  template <bool Record, bool TrackFlags, bool Stochastic>
  std::size_t band_chunk(const std::uint32_t* in, std::size_t stride, std::uint8_t* out, std::uint8_t* scales, BlockStatistics* statistics,
                         std::size_t groups, const std::uint32_t* next, std::uint64_t random_index);

  // One call's work on 32 elements at a time (a block along a row, or 4 rows of 8 column
  // blocks), with its constants and what it adds up held in registers; begun from and put back
  // into the Blocks.
  struct Pass;
  // A block's scale code and factor (whole_block::scale), and whether its smallest nonzero
  // magnitude (less one) clears the kernel's bound; false where the block is not taken.
  bool scale_block(std::uint32_t amax, std::uint32_t smallest_less_one, std::uint8_t& scale_code, float& factor) const {
    whole_block::Scale scale;
    if (!whole_block::scale(format_, rule_, tensor_scale_, amax, scale) || smallest_less_one < scale.smallest_magnitude - 1) return false;
    scale_code = scale.code, factor = scale.factor;
    return true;
  }
  // NVFP4's E4M3 block scales and element factors for 8 blocks at once, lane l block l:
  // mx_blocks_avx512.hpp's make_nvfp4_scales in AVX2 -- (amax / 6) * tensor scale in float32 as
  // nvfp4_block_scale_code makes it, to E4M3 by the grid's addition (E4M3's subnormal grid below
  // 2^-6), saturating to 448; its value decoded; the factor tensor scale / value, 0 for a zero
  // scale. Returns the lanes taken as bits (scale_block's rule: not where amax is infinite or
  // NaN, a NaN scale, nor where the smallest nonzero magnitude, less one in `least`, is below
  // float32's smallest normal).
  unsigned nvfp4_scales(__m256i amax, __m256i least, std::uint8_t* codes, float* factors) const {
    constexpr std::uint32_t e4m3_min_normal32 = E4m3ScaleGrid::min_normal32, e4m3_drop = E4m3ScaleGrid::drop, e4m3_max_code = E4m3ScaleGrid::max_code;
    const __m256 tensor_scale = _mm256_set1_ps(tensor_scale_);
    // At most 2^10 (the grid's addition stays finite; anything from 464 saturates all the same).
    const __m256 wanted = _mm256_min_ps(_mm256_mul_ps(_mm256_div_ps(_mm256_castsi256_ps(amax), _mm256_set1_ps(6.0f)), tensor_scale),
                                        _mm256_set1_ps(1024.0f));
    const __m256i binade = _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(wanted), _mm256_set1_epi32(0x7F800000)),
                                            _mm256_set1_epi32(static_cast<int>(e4m3_min_normal32)));
    const __m256 unit = _mm256_castsi256_ps(_mm256_add_epi32(binade, _mm256_set1_epi32(static_cast<int>(e4m3_drop << 23))));
    const __m256i units = _mm256_sub_epi32(_mm256_castps_si256(_mm256_add_ps(wanted, unit)), _mm256_castps_si256(unit));
    const __m256i code = _mm256_min_epi32(
        _mm256_add_epi32(units, _mm256_sub_epi32(_mm256_srli_epi32(binade, e4m3_drop), _mm256_set1_epi32(static_cast<int>(e4m3_min_normal32 >> e4m3_drop)))),
        _mm256_set1_epi32(static_cast<int>(e4m3_max_code)));
    // E4M3's value: a normal code's fields moved into float32's (bias 7 -> 127); a subnormal's
    // mantissa times 2^-9. A zero scale divides as one (no division by zero) and gives 0.
    const __m256 subnormal = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), code));
    const __m256 value = _mm256_blendv_ps(_mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(code, 20), _mm256_set1_epi32(120 << 23))),
                                          _mm256_mul_ps(_mm256_cvtepi32_ps(code), _mm256_set1_ps(1.0f / 512.0f)), subnormal);
    const __m256 nonzero = _mm256_cmp_ps(value, _mm256_setzero_ps(), _CMP_NEQ_UQ);
    _mm256_storeu_ps(factors, _mm256_and_ps(_mm256_div_ps(tensor_scale, _mm256_blendv_ps(_mm256_set1_ps(1.0f), value, nonzero)), nonzero));
    alignas(32) std::uint32_t wide_codes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(wide_codes), code);
    for (int lane = 0; lane < 8; ++lane) codes[lane] = static_cast<std::uint8_t>(wide_codes[lane]);
    const __m256i not_taken = _mm256_or_si256(_mm256_cmpgt_epi32(amax, _mm256_set1_epi32(0x7F7FFFFF)),  // amax has no sign
                                              Pass::below_unsigned(least, _mm256_set1_epi32(0x007FFFFF)));
    return ~static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(not_taken))) & 0xFFu;
  }
  // NVFP4's products made ready for the grid: false where one is a float32 subnormal; those
  // at or above 2^(emax + 2) (an infinity included), which saturate whatever they are, lowered to
  // it, where the grid's addition stays finite. MX's need nothing (scale_block saw to them).
  bool products_taken(__m256 (&q)[4]) const {
    if (!nvfp4_) return true;
    const __m256i smallest_normal = _mm256_set1_epi32(0x00800000);
    const __m256 ceiling = _mm256_castsi256_ps(_mm256_set1_epi32((F.emax() + 2 + 127) << 23));
    __m256i subnormal = _mm256_setzero_si256();
    for (__m256& product : q) {
      const __m256i bits = _mm256_castps_si256(product);  // no sign: the products are of magnitudes
      subnormal = _mm256_or_si256(
          subnormal, _mm256_andnot_si256(_mm256_cmpeq_epi32(bits, _mm256_setzero_si256()), _mm256_cmpgt_epi32(smallest_normal, bits)));
      product = _mm256_min_ps(product, ceiling);
    }
    return _mm256_testz_si256(subnormal, subnormal) != 0;
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
  // The buffered blocks' bins counted into the statistics: each bin below dense_bins_ as the
  // count of equal bytes, lane by lane over the buffer (at most buffer_blocks per lane), then
  // summed, up to the largest bin in the buffer; four bins per pass, so that no count waits on
  // another; zeros (-1) the same way. Then dense_bins_ follows the data: up by 8 where the bins
  // beyond it came one by one in more than one block in four on average (each may cost a
  // mispredicted branch), down by 8 where its top 8 bins held fewer than one in sixteen blocks.
  void count_bins(BlockStatistics* statistics) {
    if (buffered_ == 0) return;
    saturated_total_ += whole_block::byte_sum(saturated_), below_grid_total_ += whole_block::byte_sum(below_grid_), code_zero_total_ += whole_block::byte_sum(code_zero_);
    saturated_ = below_grid_ = code_zero_ = _mm256_setzero_si256();
    alignas(32) std::int8_t largest[32];  // signed: zeros' 0xFF, and bins of 128 and more, read negative
    _mm256_store_si256(reinterpret_cast<__m256i*>(largest), buffer_max_);
    const int top = std::min<int>(*std::max_element(largest, largest + 32), dense_bins_ - 1);
    std::uint64_t top_eight = 0;  // how many in bins top - 7 .. top
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
        const std::uint64_t count = whole_block::byte_sum(counts[i]);
        if (bin < 0) {
          statistics->zeros += count;
          zeros_ += count;
        } else {
          statistics->relative_exponents[static_cast<std::size_t>(bin)] += count;
          if (bin >= dense_bins_ - 8) top_eight += count;
        }
      }
    }
    if (4 * sparse_ > static_cast<std::uint64_t>(buffered_) && dense_bins_ < max_dense_bins) dense_bins_ += 8;
    else if (16 * top_eight < static_cast<std::uint64_t>(buffered_) && dense_bins_ > 8) dense_bins_ -= 8;
    buffered_ = 0;
    buffer_max_ = _mm256_set1_epi8(-1);
    sparse_ = 0;
  }

  std::uint64_t taken_ = 0, zeros_ = 0;
  // Counts per byte lane since the last count_bins (recording; else saturated_ is nonzero where
  // any element saturated), and their totals: saturated elements, codes below 2^m (subnormal or
  // zero), zero codes.
  __m256i saturated_ = _mm256_setzero_si256(), below_grid_ = _mm256_setzero_si256(), code_zero_ = _mm256_setzero_si256();
  std::uint64_t saturated_total_ = 0, below_grid_total_ = 0, code_zero_total_ = 0;
  __m256i exact_ = _mm256_set1_epi32(-1), underflow_ = _mm256_setzero_si256();
  bool flags_settled_ = false;  // inexact and underflow both raised (MXINT8: inexact)
  // Whether the flags the elements can raise all are: inexact and underflow; MXINT8, which never
  // underflows (mxint8_element_code), inexact alone.
  bool flags_raised() const {
    return _mm256_movemask_epi8(exact_) != -1 && (int8 || _mm256_testz_si256(underflow_, underflow_) == 0);
  }
  // The bins of up to buffer_blocks blocks, one byte each (see take_blocks), and their largest.
  static constexpr int buffer_blocks = 64, max_dense_bins = 64;
  __m256i bin_buffer_[buffer_blocks];
  __m256i buffer_max_ = _mm256_set1_epi8(-1);
  int buffered_ = 0;
  int dense_bins_ = 16;       // bins counted over the buffer; the rest one by one as they come
  std::uint64_t sparse_ = 0;  // how many came one by one since the buffer was last counted
};

template <Format F>
template <bool Record, bool Halves, bool Stochastic>
std::size_t Blocks<F>::take_groups(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, std::size_t blocks,
                                   BlockStatistics* statistics, std::uint64_t random_index) {
  // Inexact and underflow are sticky: once both are raised, the blocks after need not look.
  constexpr std::size_t per_group = Halves ? 2 : 1, chunk_groups = 8;
  const std::size_t block = static_cast<std::size_t>(format_.block_size);
  std::size_t done = 0;  // blocks
  while (blocks - done >= per_group && !flags_settled_) {
    const std::size_t chunk = std::min(blocks - done, chunk_groups * per_group) / per_group * per_group;
    const std::size_t took =
        take_blocks<Record, true, Halves, Stochastic>(in + done * block, out + done * block, scales + done, chunk, statistics, random_index + done * block);
    done += took;
    flags_settled_ = flags_raised();
    if (took < chunk) return done;
  }
  if (blocks - done >= per_group)
    done += take_blocks<Record, false, Halves, Stochastic>(in + done * block, out + done * block, scales + done, blocks - done, statistics,
                                                           random_index + done * block);
  return done;
}

template <Format F>
struct Blocks<F>::Pass {
  Blocks& owner;
  BlockStatistics* statistics;
  const __m256i zero = _mm256_setzero_si256();
  const __m256i exponent_field = _mm256_set1_epi32(0x7F800000);
  const __m256i min_normal = _mm256_set1_epi32(static_cast<int>(min_normal32));
  const __m256i unit_offset = _mm256_set1_epi32(static_cast<int>(drop << 23));  // M = 2^(max(e, emin) + 23 - m)
  const __m256i binade_offset = _mm256_set1_epi32(-static_cast<int>(min_normal32 >> drop));  // (max(e, emin) - emin) << m
  const __m256i largest_byte = _mm256_set1_epi8(static_cast<char>(max_code)), above_largest = _mm256_set1_epi8(static_cast<char>(max_code + 1));
  const __m256i grid_byte = _mm256_set1_epi8(static_cast<char>(int8 ? 1 : 1 << m));
  const __m256i tiny_below;
  const __m256i in_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i byte_sign = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256i dense_bins;
  __m256i saturated, below_grid, code_zero, exact_all, underflow;

  Pass(Blocks& blocks, BlockStatistics* st)
      : owner(blocks),
        statistics(st),
        tiny_below(_mm256_set1_epi32(static_cast<int>(blocks.tiny_threshold_))),
        dense_bins(_mm256_set1_epi8(static_cast<char>(blocks.dense_bins_))),
        saturated(blocks.saturated_),
        below_grid(blocks.below_grid_),
        code_zero(blocks.code_zero_),
        exact_all(blocks.exact_),
        underflow(blocks.underflow_) {}
  void put_back() {
    owner.saturated_ = saturated, owner.below_grid_ = below_grid, owner.code_zero_ = code_zero;
    owner.exact_ = exact_all, owner.underflow_ = underflow;
  }

  // The unclamped code of q = |v| * factor per lane (see the top).
  template <bool TrackFlags>
  [[gnu::always_inline]] __m256i code(__m256 q) {
    const __m256i binade = _mm256_max_epi32(_mm256_and_si256(_mm256_castps_si256(q), exponent_field), min_normal);
    const __m256 unit = _mm256_castsi256_ps(_mm256_add_epi32(binade, unit_offset));
    const __m256 on_grid = _mm256_add_ps(q, unit);
    const __m256i units = _mm256_sub_epi32(_mm256_castps_si256(on_grid), _mm256_castps_si256(unit));
    if constexpr (TrackFlags) {
      const __m256i exact = _mm256_castps_si256(_mm256_cmp_ps(_mm256_sub_ps(on_grid, unit), q, _CMP_EQ_OQ));
      exact_all = _mm256_and_si256(exact_all, exact);
      underflow = _mm256_or_si256(underflow, _mm256_andnot_si256(exact, _mm256_cmpgt_epi32(tiny_below, _mm256_castps_si256(q))));
    }
    return _mm256_add_epi32(units, _mm256_add_epi32(_mm256_srli_epi32(binade, drop), binade_offset));
  }

  // a < b per lane, as unsigned numbers (AVX2 compares signed ones): all ones where it is.
  [[gnu::always_inline]] static __m256i below_unsigned(__m256i a, __m256i b) {
    const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
    return _mm256_cmpgt_epi32(_mm256_xor_si256(b, sign), _mm256_xor_si256(a, sign));
  }
  [[gnu::always_inline]] static __m256i below_unsigned64(__m256i a, __m256i b) {
    const __m256i sign = _mm256_set1_epi64x(static_cast<long long>(0x8000000000000000ull));
    return _mm256_cmpgt_epi64(_mm256_xor_si256(b, sign), _mm256_xor_si256(a, sign));
  }
  // z * c in 64-bit lanes, modulo 2^64: AVX2 multiplies only 32-bit halves, so of three such
  // products (the high halves' product falls off the end).
  template <std::uint64_t C>
  [[gnu::always_inline]] static __m256i times(__m256i z) {
    const __m256i c_low = _mm256_set1_epi64x(static_cast<long long>(C & 0xFFFFFFFFu)), c_high = _mm256_set1_epi64x(static_cast<long long>(C >> 32));
    const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(z, 32), c_low), _mm256_mul_epu32(z, c_high));
    return _mm256_add_epi64(_mm256_mul_epu32(z, c_low), _mm256_slli_epi64(cross, 32));
  }
  // SplitMix64's mixing of z, per 64-bit lane (context.hpp's stochastic_random). (Member functions
  // rather than lambdas here: GCC warns of a lambda passing a vector that it breaks the ABI.)
  [[gnu::always_inline]] static __m256i mix(__m256i z) {
    z = times<0xBF58476D1CE4E5B9ull>(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)));
    z = times<0x94D049BB133111EBull>(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)));
    return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
  }
  // Whether each of four words is below its lane's fraction64: dropped << (64 - shift), or
  // dropped >> (shift - 64) (a count of 64 or more, as a wrapped negative one is, gives 0).
  [[gnu::always_inline]] static __m256i up4(__m128i dropped4, __m128i shift4, __m256i random) {
    const __m256i d = _mm256_cvtepu32_epi64(dropped4), s = _mm256_cvtepu32_epi64(shift4), sixty_four = _mm256_set1_epi64x(64);
    const __m256i fraction = _mm256_or_si256(_mm256_sllv_epi64(d, _mm256_sub_epi64(sixty_four, s)), _mm256_srlv_epi64(d, _mm256_sub_epi64(s, sixty_four)));
    return below_unsigned64(random, fraction);
  }
  // The random words of elements index .. index + 7, four 64-bit lanes to a register: context.hpp's
  // stochastic_random (SplitMix64), lane k's z = seed + (index + k + 1) * golden.
  [[gnu::always_inline]] void random_words(std::uint64_t index, __m256i& low, __m256i& high) const {
    constexpr std::uint64_t golden = 0x9E3779B97F4A7C15ull;
    const __m256i first = _mm256_set1_epi64x(static_cast<long long>(owner.seed_ + (index + 1) * golden));
    low = mix(_mm256_add_epi64(first, _mm256_setr_epi64x(0, static_cast<long long>(golden), static_cast<long long>(2 * golden),
                                                             static_cast<long long>(3 * golden))));
    high = mix(_mm256_add_epi64(first, _mm256_setr_epi64x(static_cast<long long>(4 * golden), static_cast<long long>(5 * golden),
                                                              static_cast<long long>(6 * golden), static_cast<long long>(7 * golden))));
  }

  // The unclamped code of q per lane (a normal float32 or zero) rounded stochastically, lane l
  // deciding with the word in 64-bit lane l of `random_low` (l < 4) or l - 4 of `random_high`:
  // mx_blocks_avx512.hpp's stochastic_code in AVX2 (detail::round_bits32 and cast_from_f32's two
  // ranges). The bits kept: F's normal range, q's bits less `drop` (the exponent rides along,
  // rebiased after); below it, q's significand less drop + (emin - q's exponent) bits, those
  // dropped compared, as a 64-bit fraction, with the word.
  template <bool TrackFlags>
  [[gnu::always_inline]] __m256i stochastic_code(__m256 q, __m256i random_low, __m256i random_high) {
    constexpr std::uint32_t min_biased = min_normal32 >> 23;
    constexpr std::uint32_t rebias = static_cast<std::uint32_t>(127 - F.bias()) << m;
    const __m256i bits = _mm256_castps_si256(q), one = _mm256_set1_epi32(1);
    const __m256i biased = _mm256_srli_epi32(bits, 23);
    const __m256i below_normal = _mm256_cmpgt_epi32(min_normal, bits);  // zero too (q has no sign)
    const __m256i is_zero = _mm256_cmpeq_epi32(bits, zero);
    const __m256i fraction_bits = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFF));
    const __m256i sig = _mm256_or_si256(fraction_bits, _mm256_andnot_si256(is_zero, _mm256_set1_epi32(0x800000)));  // the implicit bit
    const __m256i below = _mm256_and_si256(below_normal, _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int>(min_biased)), _mm256_max_epu32(biased, one)));
    const __m256i x = _mm256_blendv_epi8(bits, sig, below_normal);
    const __m256i shift = _mm256_add_epi32(below, _mm256_set1_epi32(static_cast<int>(drop)));
    const __m256i kept = _mm256_srlv_epi32(x, shift);  // 0 from 32 on, as x >> min(shift, 31) is
    const __m256i dropped = _mm256_and_si256(x, _mm256_sub_epi32(_mm256_sllv_epi32(one, shift), one));  // all of x from 32 on
    const __m256i nothing_dropped = _mm256_cmpeq_epi32(dropped, zero);
    // The words' high halves in lane order: odd dwords of both, whose 128-bit lanes the shuffle
    // interleaves and the permutation puts back.
    const __m256i high_halves = _mm256_permute4x64_epi64(
        _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(random_low), _mm256_castsi256_ps(random_high), _MM_SHUFFLE(3, 1, 3, 1))),
        _MM_SHUFFLE(3, 1, 2, 0));
    // As the AVX-512 kernel decides: where shift <= 32 by the words' high halves shifted right by
    // 32 - shift against dropped; a lane with more to drop (shift > 32) can round up only where
    // the high half is at most dropped >> (shift - 32), and only those take the 64-bit comparison.
    const __m256i thirty_two = _mm256_set1_epi32(32);
    const __m256i deep = _mm256_andnot_si256(nothing_dropped, _mm256_cmpgt_epi32(shift, thirty_two));
    const __m256i limit = _mm256_srlv_epi32(dropped, _mm256_sub_epi32(shift, thirty_two));
    const __m256i close = _mm256_and_si256(deep, _mm256_cmpeq_epi32(_mm256_max_epu32(high_halves, limit), limit));
    __m256i up = _mm256_andnot_si256(deep, below_unsigned(_mm256_srlv_epi32(high_halves, _mm256_sub_epi32(thirty_two, shift)), dropped));
    if (_mm256_testz_si256(close, close) == 0) [[unlikely]] {
      const __m256i up_low = up4(_mm256_castsi256_si128(dropped), _mm256_castsi256_si128(shift), random_low);
      const __m256i up_high = up4(_mm256_extracti128_si256(dropped, 1), _mm256_extracti128_si256(shift, 1), random_high);
      const __m256i up64 = _mm256_permute4x64_epi64(
          _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(up_low), _mm256_castsi256_ps(up_high), _MM_SHUFFLE(2, 0, 2, 0))),
          _MM_SHUFFLE(3, 1, 2, 0));
      up = _mm256_or_si256(up, _mm256_and_si256(up64, close));
    }
    if constexpr (TrackFlags) {
      __m256i tiny = _mm256_andnot_si256(is_zero, below_normal);
      if (!owner.tininess_before_) {
        // Not tiny after rounding: q in the binade below 2^emin whose significand, rounded to
        // m + 1 bits with the same word (unbounded exponent), reaches 2^emin.
        const __m256i kept_fine = _mm256_srli_epi32(sig, drop);
        const __m256i dropped_fine = _mm256_and_si256(sig, _mm256_set1_epi32(static_cast<int>((1u << drop) - 1)));
        const __m256i up_fine = below_unsigned(_mm256_srli_epi32(high_halves, 32 - drop), dropped_fine);  // drop <= 23: as above
        const __m256i reaches =
            _mm256_and_si256(up_fine, _mm256_and_si256(_mm256_cmpeq_epi32(kept_fine, _mm256_set1_epi32(static_cast<int>((2u << m) - 1))),
                                                       _mm256_cmpeq_epi32(_mm256_add_epi32(biased, one), _mm256_set1_epi32(static_cast<int>(min_biased)))));
        tiny = _mm256_andnot_si256(reaches, tiny);
      }
      exact_all = _mm256_and_si256(exact_all, nothing_dropped);
      underflow = _mm256_or_si256(underflow, _mm256_andnot_si256(nothing_dropped, tiny));
    }
    const __m256i rounded = _mm256_sub_epi32(kept, up);  // up: -1 where it rounds up
    return _mm256_sub_epi32(rounded, _mm256_andnot_si256(below_normal, _mm256_set1_epi32(static_cast<int>(rebias))));
  }

  // Four vectors of unclamped codes (and the inputs' bits, for the signs) as 32 code bytes: lanes
  // 0-7 of codes[0], then of codes[1], ... Packed with unsigned saturation (a code above 255 reads
  // 255, still above max), counted and clamped there (magnitude codes are below 128), then given
  // their signs: a negative input's bits pack with signed saturation to 0x80. The packs
  // interleave 128-bit lanes; the permutation undoes it.
  template <bool Record>
  [[gnu::always_inline]] __m256i pack(const __m256i (&codes)[4], const __m256i (&u)[4]) {
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
    __m256i signs = _mm256_and_si256(_mm256_packs_epi16(_mm256_packs_epi32(u[0], u[1]), _mm256_packs_epi32(u[2], u[3])), byte_sign);
    if constexpr (int8) {  // two's complement: a negative input's code is 0 - its magnitude's
      const __m256i negative = _mm256_cmpeq_epi8(signs, byte_sign);
      return _mm256_permutevar8x32_epi32(_mm256_sub_epi8(_mm256_xor_si256(clamped, negative), negative), in_order);
    }
    if constexpr (F.width() < 8) signs = _mm256_srli_epi16(signs, 8 - F.width());  // no bit crosses into the byte below
    return _mm256_permutevar8x32_epi32(_mm256_or_si256(clamped, signs), in_order);
  }

  // The exponent fields of four vectors of magnitudes as bytes (0 .. 254; 0 for a zero), in the
  // packs' order.
  [[gnu::always_inline]] static __m256i fields(const __m256i (&magnitude)[4]) {
    return _mm256_packus_epi16(_mm256_packs_epi32(_mm256_srli_epi32(magnitude[0], 23), _mm256_srli_epi32(magnitude[1], 23)),
                               _mm256_packs_epi32(_mm256_srli_epi32(magnitude[2], 23), _mm256_srli_epi32(magnitude[3], 23)));
  }

  // The relative exponents of 32 elements, amax's exponent field less each element's (both as
  // bytes in the same order; 0 .. 253 for normal elements, zeros marked 0xFF), into the buffer;
  // those from dense_bins_ on one by one. A full buffer is counted, with the byte counters.
  [[gnu::always_inline]] void bins(__m256i element_fields, __m256i amax_fields) {
    const __m256i zeros = _mm256_cmpeq_epi8(element_fields, zero);
    const __m256i bytes = _mm256_or_si256(_mm256_sub_epi8(amax_fields, element_fields), zeros);
    const __m256i sparse = _mm256_andnot_si256(zeros, _mm256_cmpeq_epi8(_mm256_max_epu8(bytes, dense_bins), bytes));
    if (auto lanes = static_cast<std::uint32_t>(_mm256_movemask_epi8(sparse)); lanes != 0) {
      alignas(32) std::uint8_t bin_of[32];
      _mm256_store_si256(reinterpret_cast<__m256i*>(bin_of), bytes);
      owner.sparse_ += static_cast<std::uint64_t>(__builtin_popcount(lanes));
      while (lanes != 0) {
        ++statistics->relative_exponents[bin_of[__builtin_ctz(lanes)]];
        lanes &= lanes - 1;
      }
    }
    _mm256_store_si256(&owner.bin_buffer_[owner.buffered_], bytes);
    owner.buffer_max_ = _mm256_max_epi8(owner.buffer_max_, bytes);
    if (++owner.buffered_ == buffer_blocks) {  // the byte counters are full too
      owner.saturated_ = saturated, owner.below_grid_ = below_grid, owner.code_zero_ = code_zero;
      owner.count_bins(statistics);
      saturated = below_grid = code_zero = zero;
      dense_bins = _mm256_set1_epi8(static_cast<char>(owner.dense_bins_));
    }
  }
};

template <Format F>
template <bool Record, bool TrackFlags, bool Halves, bool Stochastic>
std::size_t Blocks<F>::take_blocks(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, std::size_t blocks,
                                   BlockStatistics* statistics, std::uint64_t random_index) {
  // 32 elements at a time: one block of 32, or (Halves) two of 16, vectors 0-1 and 2-3.
  constexpr std::size_t per_group = Halves ? 2 : 1;
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7FFFFFFF), one = _mm256_set1_epi32(1);
  Pass pass(*this, statistics);
  // NVFP4 (blocks of 16, two to a group): the scales of four groups made at once (nvfp4_scales),
  // block 2j + k of the batch in lane 2j + k.
  alignas(32) std::uint32_t batch_amax[8], batch_least[8];
  alignas(32) float batch_factor[8];
  std::uint8_t batch_code[8];
  unsigned batch_taken = 0;  // lanes
  std::size_t g = 0;
  for (; g < blocks / per_group; ++g) {
    const std::uint32_t* p = in + g * 32;
    if constexpr (Halves) {
      if (nvfp4_ && g % 4 == 0) {
        for (std::size_t j = 0; j < 4; ++j) {
          if (g + j >= blocks / 2) {  // past the run: lanes that take nothing and are not looked at
            batch_amax[2 * j] = batch_amax[2 * j + 1] = 0, batch_least[2 * j] = batch_least[2 * j + 1] = 0xFFFFFFFFu;
            continue;
          }
          __m256i m[4], l[4];
          for (int i = 0; i < 4; ++i) {
            m[i] = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * j + 8 * i)), magnitude_mask);
            l[i] = _mm256_sub_epi32(m[i], one);
          }
          batch_amax[2 * j] = horizontal_max(_mm256_max_epu32(m[0], m[1])), batch_amax[2 * j + 1] = horizontal_max(_mm256_max_epu32(m[2], m[3]));
          batch_least[2 * j] = horizontal_min(_mm256_min_epu32(l[0], l[1])), batch_least[2 * j + 1] = horizontal_min(_mm256_min_epu32(l[2], l[3]));
        }
        batch_taken = nvfp4_scales(_mm256_load_si256(reinterpret_cast<const __m256i*>(batch_amax)),
                                   _mm256_load_si256(reinterpret_cast<const __m256i*>(batch_least)), batch_code, batch_factor);
      }
    }
    __m256i u[4], magnitude[4], less_one[4];  // the bits, without their signs, less one (a zero's wraps to the largest)
    for (int i = 0; i < 4; ++i) {
      u[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8 * i));
      magnitude[i] = _mm256_and_si256(u[i], magnitude_mask);
      less_one[i] = _mm256_sub_epi32(magnitude[i], one);
    }
    const __m256i amax01 = _mm256_max_epu32(magnitude[0], magnitude[1]), amax23 = _mm256_max_epu32(magnitude[2], magnitude[3]);
    const __m256i least01 = _mm256_min_epu32(less_one[0], less_one[1]), least23 = _mm256_min_epu32(less_one[2], less_one[3]);
    std::uint32_t amax[per_group];
    std::uint8_t scale_code[per_group];
    float factor[per_group];
    bool taken = true;
    if constexpr (Halves) {
      if (nvfp4_) {
        const std::size_t lane = 2 * (g % 4);
        taken = ((batch_taken >> lane) & 3u) == 3u;
        for (std::size_t k = 0; k < 2; ++k) amax[k] = batch_amax[lane + k], scale_code[k] = batch_code[lane + k], factor[k] = batch_factor[lane + k];
      } else {
        amax[0] = horizontal_max(amax01), amax[1] = horizontal_max(amax23);
        taken = scale_block(amax[0], horizontal_min(least01), scale_code[0], factor[0]) &&
                scale_block(amax[1], horizontal_min(least23), scale_code[1], factor[1]);
      }
    } else {
      amax[0] = horizontal_max(_mm256_max_epu32(amax01, amax23));
      taken = scale_block(amax[0], horizontal_min(_mm256_min_epu32(least01, least23)), scale_code[0], factor[0]);
    }
    if (!taken) break;
    const __m256 factor_low = _mm256_set1_ps(factor[0]), factor_high = _mm256_set1_ps(factor[per_group - 1]);
    __m256 q[4];  // MX: exact, and a zero stays zero; NVFP4: the products nvfp4_element_code makes
    for (int i = 0; i < 4; ++i) q[i] = _mm256_mul_ps(_mm256_castsi256_ps(magnitude[i]), i < 2 ? factor_low : factor_high);
    if (!products_taken(q)) break;
    __m256i codes[4];
    for (int i = 0; i < 4; ++i) {
      if constexpr (Stochastic) {
        __m256i low, high;  // elements 8i .. 8i + 3's words, 8i + 4 .. 8i + 7's
        pass.random_words(random_index + g * 32 + 8 * static_cast<std::uint64_t>(i), low, high);
        codes[i] = pass.template stochastic_code<TrackFlags>(q[i], low, high);
      } else {
        codes[i] = pass.template code<TrackFlags>(q[i]);
      }
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + g * 32), pass.template pack<Record>(codes, u));
    for (std::size_t k = 0; k < per_group; ++k) scales[g * per_group + k] = scale_code[k];
    if constexpr (Record) {
      for (std::size_t k = 0; k < per_group; ++k) ++statistics->scale_codes[scale_code[k]];
      // Each block's amax field under its elements' fields: vectors 0-1 are dwords 0, 1, 4, 5 of the packed bytes.
      const __m256i amax_low = _mm256_set1_epi8(static_cast<char>(amax[0] >> 23));
      const __m256i amax_fields =
          Halves ? _mm256_blend_epi32(amax_low, _mm256_set1_epi8(static_cast<char>(amax[per_group - 1] >> 23)), 0xCC) : amax_low;
      pass.bins(Pass::fields(magnitude), amax_fields);
    }
  }
  pass.put_back();
  taken_ += g * per_group;
  return g * per_group;
}

template <Format F>
template <bool Record, bool TrackFlags, bool Stochastic>
std::size_t Blocks<F>::band_chunk(const std::uint32_t* in, std::size_t stride, std::uint8_t* out, std::uint8_t* scales,
                                  BlockStatistics* statistics, std::size_t groups, const std::uint32_t* next, std::uint64_t random_index) {
  // Row by row, not group by group: a group's 32 rows read down its columns at once are 32
  // streams, and where rows lie a power of two apart (as they mostly do) their lines share one L1
  // set, which holds eight -- each group read its rows twice from L2, and the next group, in the
  // other half of the same lines, again (twice the time of blocks along rows). First each
  // column's largest and smallest magnitude (less one) for the chunk's groups (lane l of amax[g]:
  // column 8g + l), four groups at a time down the rows with their extremes in registers; then
  // the elements, four rows at a time, from L2. A band is a block's rows: 32, or 16.
  const std::size_t rows = static_cast<std::size_t>(format_.block_size);
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7FFFFFFF), one = _mm256_set1_epi32(1);
  const auto at = [&](std::size_t r, std::size_t g) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + r * stride + 8 * g)); };
  alignas(32) std::uint32_t amax[chunk_groups][8], least[chunk_groups][8];
  constexpr std::size_t at_once = 4;
  std::size_t g0 = 0;
  const auto extremes = [&]<std::size_t N>(std::size_t first) {
    __m256i high[N], low[N];
    for (std::size_t j = 0; j < N; ++j) high[j] = _mm256_setzero_si256(), low[j] = _mm256_set1_epi32(-1);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < N; ++j) {
        const __m256i magnitude = _mm256_and_si256(at(r, first + j), magnitude_mask);
        high[j] = _mm256_max_epu32(high[j], magnitude);
        low[j] = _mm256_min_epu32(low[j], _mm256_sub_epi32(magnitude, one));
      }
    for (std::size_t j = 0; j < N; ++j) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(amax[first + j]), high[j]);
      _mm256_store_si256(reinterpret_cast<__m256i*>(least[first + j]), low[j]);
    }
  };
  for (; g0 + at_once <= groups; g0 += at_once) extremes.template operator()<at_once>(g0);
  for (; g0 < groups; ++g0) extremes.template operator()<1>(g0);
  // The scales, up to the first group with a block not taken.
  alignas(32) float factor[chunk_groups][8];
  std::uint8_t codes_of_scales[chunk_groups][8];
  std::size_t taken = groups;
  for (std::size_t g = 0; g < groups && taken == groups; ++g) {
    if (nvfp4_) {  // NVFP4's 8 scales at once (nvfp4_block_scale_code per block took a fifth of the time)
      if (nvfp4_scales(_mm256_load_si256(reinterpret_cast<const __m256i*>(amax[g])), _mm256_load_si256(reinterpret_cast<const __m256i*>(least[g])),
                       codes_of_scales[g], factor[g]) != 0xFF)
        taken = g;
    } else {
      for (int lane = 0; lane < 8; ++lane)
        if (!scale_block(amax[g][lane], least[g][lane], codes_of_scales[g][lane], factor[g][lane])) {
          taken = g;
          break;
        }
    }
    if (nvfp4_ && taken == groups) {
      // No product a float32 subnormal (products_taken would refuse it half way through the
      // band): the smallest nonzero magnitude's is the smallest, products rounding monotonically.
      __m256 smallest[4] = {_mm256_mul_ps(_mm256_castsi256_ps(_mm256_add_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(least[g])), one)),
                                          _mm256_load_ps(factor[g]))};
      smallest[1] = smallest[2] = smallest[3] = smallest[0];
      if (!products_taken(smallest)) taken = g;
    }
  }
  Pass pass(*this, statistics);
  for (std::size_t r = 0; r < rows; r += 4) {
    for (std::size_t g = 0; g < taken; ++g) {
      // The next chunk's lines into L2 meanwhile (rows r .. r + 3, a line per two groups), so that
      // its first pass finds them there rather than waits on memory alone.
      if (g % 2 == 0)
        for (std::size_t i = 0; i < 4; ++i) _mm_prefetch(reinterpret_cast<const char*>(next + (r + i) * stride + 8 * g), _MM_HINT_T1);
      const __m256 lane_factor = _mm256_load_ps(factor[g]);  // per lane: MX's 2^-X (exact products), NVFP4's factor
      __m256i u[4], magnitude[4], codes[4];
      __m256 q[4];  // MX: exact, and a zero stays zero; NVFP4: the products nvfp4_element_code makes
      for (std::size_t i = 0; i < 4; ++i) {
        u[i] = at(r + i, g);
        magnitude[i] = _mm256_and_si256(u[i], magnitude_mask);
        q[i] = _mm256_mul_ps(_mm256_castsi256_ps(magnitude[i]), lane_factor);
      }
      products_taken(q);  // NVFP4's saturating products lowered (none is a subnormal: checked above)
      for (std::size_t i = 0; i < 4; ++i) {
        if constexpr (Stochastic) {
          __m256i low, high;  // row r + i's columns 8g .. 8g + 3's words, 8g + 4 .. 8g + 7's
          pass.random_words(random_index + (r + i) * stride + 8 * g, low, high);
          codes[i] = pass.template stochastic_code<TrackFlags>(q[i], low, high);
        } else {
          codes[i] = pass.template code<TrackFlags>(q[i]);
        }
      }
      // Row r + i's 8 codes are bytes 8i .. 8i + 7.
      const __m256i packed = pass.template pack<Record>(codes, u);
      const __m128i low = _mm256_castsi256_si128(packed), high = _mm256_extracti128_si256(packed, 1);
      std::uint8_t* codes_out = out + r * stride + 8 * g;
      _mm_storel_epi64(reinterpret_cast<__m128i*>(codes_out), low);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(codes_out + stride), _mm_unpackhi_epi64(low, low));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(codes_out + 2 * stride), high);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(codes_out + 3 * stride), _mm_unpackhi_epi64(high, high));
      if constexpr (Record) {
        const __m256i group_amax = _mm256_load_si256(reinterpret_cast<const __m256i*>(amax[g]));
        pass.bins(Pass::fields(magnitude), Pass::fields({group_amax, group_amax, group_amax, group_amax}));  // each lane's, laid out as the rows' fields
      }
    }
  }
  pass.put_back();
  for (std::size_t g = 0; g < taken; ++g) {
    std::memcpy(scales + 8 * g, codes_of_scales[g], 8);
    if constexpr (Record)
      for (int lane = 0; lane < 8; ++lane) ++statistics->scale_codes[codes_of_scales[g][lane]];
  }
  taken_ += 8 * taken;
  return taken;
}

// Blocks<F> as the walker's whole_blocks.
template <Format F>
using WholeBlocks = whole_block::Walker<Blocks<F>, 8>;

}  // namespace fpscope::mx_avx2
