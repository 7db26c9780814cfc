// MX and NVFP4 blocks of floating-point elements in round to nearest even (and stochastically),
// written with AVX-512 (F, BW, VL, DQ) intrinsics: the same cases and the same arithmetic as
// mx_blocks_avx2.hpp (read its top for the grid's addition that rounds an element), arranged for
// the wider registers and their masks. Included by block_kernels.inl in the instruction sets that
// have AVX-512 BW.
//
// What differs from the AVX2 kernel is the order of the work, so that nothing waits on a block's
// scale:
// - Blocks go in groups of 16. Their amaxes and their smallest nonzero magnitudes come out of two
//   transposing reductions (lane b of one register is block b's); the OCP rule's scale codes and
//   factors are made in that register, other rules' (and NVFP4's) one block at a time from it.
//   Whether every element's quotient is a normal float32 is checked for the 16 blocks at once.
// - Then the elements, 32 at a time, through the grid, packed by the saturating down-conversions,
//   signed through a mask.
// - Blocks down columns are walked a band of a block's rows (32 or 16) at a time, row by row
//   (band_chunk): the vector lanes are the columns, so nothing is transposed.
// - Recorded relative exponents r = field(amax) - field(element) are made one-hot in the element's
//   own lane (1 << r: nothing where r >= 32, which a zero's r, field(amax), is unless the block's
//   amax is below 2^-95) and counted per position by bit-sliced carry-save adders
//   (positional_counts_avx512.hpp), at a cost that does not grow with the number of bins. Bins of
//   32 and more are counted one by one, in blocks whose smallest nonzero element lies 2^31 or more
//   below the largest (rare); zeros are the elements no bin counted.
// It must give exactly what the AVX2 kernel and the scalar path give; the kernels-vs-scalar tests
// hold it to the scalar path bit for bit under FPSCOPE_BULK_ISA=avx512.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fpscope/core/block_format.hpp"
#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/cast.hpp"
#include "fpscope/core/e8m0.hpp"
#include "positional_counts_avx512.hpp"
#include "whole_blocks.hpp"

// GCC 12 warns that the unmasked AVX-512 intrinsics read an uninitialized register (their
// _mm512_undefined_epi32() source; GCC bug 105593, fixed in GCC 13): not a read of ours.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace fpscope::mx_avx512 {

using avx512::PositionalCounts;
using whole_block::float_arithmetic_is_default;
using whole_block::takes;

// Lane b of the result: the largest unsigned lane of v[b].
[[gnu::always_inline]] inline __m512i lane_maxima(const __m512i (&v)[16]) {
  __m512i pairs[8], quads[4], octets[2];
  // Each step halves the lanes a vector's partial maxima take and doubles the vectors per register.
  for (int j = 0; j < 8; ++j)
    pairs[j] = _mm512_max_epu32(_mm512_shuffle_i32x4(v[2 * j], v[2 * j + 1], 0x44), _mm512_shuffle_i32x4(v[2 * j], v[2 * j + 1], 0xEE));
  for (int j = 0; j < 4; ++j)  // 128-bit lane q of quads[j]: v[4j + q]'s four
    quads[j] = _mm512_max_epu32(_mm512_shuffle_i32x4(pairs[2 * j], pairs[2 * j + 1], 0x88),
                                _mm512_shuffle_i32x4(pairs[2 * j], pairs[2 * j + 1], 0xDD));
  for (int j = 0; j < 2; ++j)  // lane q: v[8j + q]'s two, then v[8j + 4 + q]'s
    octets[j] = _mm512_max_epu32(_mm512_unpacklo_epi64(quads[2 * j], quads[2 * j + 1]), _mm512_unpackhi_epi64(quads[2 * j], quads[2 * j + 1]));
  const __m512 a = _mm512_castsi512_ps(octets[0]), b = _mm512_castsi512_ps(octets[1]);
  const __m512i maxima = _mm512_max_epu32(_mm512_castps_si512(_mm512_shuffle_ps(a, b, 0x88)), _mm512_castps_si512(_mm512_shuffle_ps(a, b, 0xDD)));
  // Dword e of lane q holds v[q + 4e]'s.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(order, maxima);
}

template <Format F>
class Blocks : private whole_block::Setting<F> {
  FPSCOPE_WHOLE_BLOCK_SETTING;
  static constexpr std::uint8_t sign_byte = static_cast<std::uint8_t>(1u << (F.width() - 1));
  // MXINT8 (whole_block::mxint8_magnitudes): codes in two's complement, and no subnormal codes
  // (below_grid then counts the zero codes, so that made_subnormal is 0).
  static constexpr bool int8 = F == whole_block::mxint8_magnitudes;
  static constexpr int below_grid_code = int8 ? 1 : 1 << m;
  static constexpr int group = 16;  // blocks whose scales are made together
  static constexpr std::size_t prefetch_ahead = 1024;  // elements

 public:
  // (Written out: GCC compiles an inherited constructor, which sets the vector members, for the
  // baseline rather than for the unit's instruction set.)
  Blocks(const BlockFormat& format, ScaleRule rule, bool tininess_before, float tensor_scale)
      : Setting(format, rule, tininess_before, tensor_scale) {}
  using Setting::round_stochastically;

  // Quantizes the leading blocks of the `blocks` consecutive blocks at `in` (codes to `out`,
  // scale codes to `scales`) and returns how many it took: it stops before the first block it
  // cannot take whole (blocks of 16 go in pairs, so before the pair). Counts go to the
  // statistics at finish().
  // `random_index`: the stochastic random word of the first element (stochastic rounding only).
  template <bool Record>
  std::size_t take(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, std::size_t blocks, BlockStatistics* statistics,
                   std::uint64_t random_index) {
    const std::size_t block = static_cast<std::size_t>(format_.block_size);
    if (halves_) blocks &= ~std::size_t{1};
    streaming_ = stream_codes_ && reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
    std::size_t done = 0;
    while (done < blocks) {
      const int n = static_cast<int>(std::min<std::size_t>(blocks - done, group));
      const std::uint64_t index = random_index + done * block;
      const int took = flags_settled_ ? take_group_shaped<Record, false>(in + done * block, out + done * block, scales + done, n, statistics, index)
                                      : take_group_shaped<Record, true>(in + done * block, out + done * block, scales + done, n, statistics, index);
      done += static_cast<std::size_t>(took);
      if (took < n) break;
    }
    return done;
  }

  // Quantizes the leading groups of `groups` groups of 16 adjacent columns of a band of a block's
  // rows (group g's row r at in + 16g + r * stride, codes likewise at out, scale codes at
  // scales[16g .. 16g + 15]) and returns how many it took: it stops before the first group with a
  // block it cannot take (nothing of that group counted). The vector lanes are the blocks:
  // nothing is transposed. The band is walked row by row, a chunk of groups at a time
  // (band_chunk).
  template <bool Record>
  std::size_t take_column_groups(const std::uint32_t* in, std::size_t stride, std::uint8_t* out, std::uint8_t* scales, BlockStatistics* statistics,
                                 std::size_t groups, std::uint64_t random_index) {
    std::size_t done = 0;
    while (done < groups) {
      const std::size_t n = std::min(groups - done, chunk_groups), at = done * group;
      // What is read next: the band's next chunk, or after its last the next band's first (a
      // prefetch past the tensor's end is only a hint, never a fault).
      const std::uint32_t* next = done + n < groups ? in + at + n * group : in + static_cast<std::size_t>(format_.block_size) * stride;
      const auto chunk = [&]<bool TrackFlags, bool Stochastic>() {
        return nvfp4_ ? band_chunk<Record, TrackFlags, Stochastic, true>(in + at, stride, out + at, scales + at, statistics, n, next, random_index + at)
                      : band_chunk<Record, TrackFlags, Stochastic, false>(in + at, stride, out + at, scales + at, statistics, n, next, random_index + at);
      };
      const std::size_t took = stochastic_ ? (flags_settled_ ? chunk.template operator()<false, true>() : chunk.template operator()<true, true>())
                                           : (flags_settled_ ? chunk.template operator()<false, false>() : chunk.template operator()<true, false>());
      done += took;
      if (took < n) break;
    }
    return done;
  }

  // Codes along rows written with non-temporal stores (whole_block::streams_codes) where a run's
  // codes are 16-byte aligned, ordered before finish() returns. Columns' 16-byte pieces a stride
  // apart never are.
  void stream_codes(bool stream) { stream_codes_ = stream; }

  // Adds what the blocks taken add up to into `statistics` (when recording) and `flags`.
  void finish(BlockStatistics* statistics, CastFlags& flags) {
    if (stream_codes_) _mm_sfence();
    if (statistics != nullptr) {
      flush_byte_counters();
      while (tally_.words % 16 != 0) one_hot_[tally_.words++] = _mm512_setzero_si512();
      if (tally_.words != 0) relative_counts_.add16(one_hot_);
      tally_.words = 0;
      const std::uint64_t elements = taken_ * static_cast<std::uint64_t>(format_.block_size);
      const std::uint64_t zeros = elements - relative_counts_.drain_into(statistics->relative_exponents.data()) - tally_.sparse;
      tally_.sparse = 0;
      statistics->blocks += taken_;
      statistics->elements += elements;
      statistics->zeros += zeros;
      statistics->made_subnormal += below_grid_total_ - code_zero_total_;
      statistics->flushed_to_zero += code_zero_total_ - zeros;
      statistics->saturated += saturated_total_;
    }
    const bool any_saturated = statistics != nullptr ? saturated_total_ != 0 : tally_.any_saturated;
    if (any_inexact_ || any_saturated) flags.inexact = 1;
    if (any_underflow_) flags.underflow = 1;
    if (any_saturated) flags.overflow = 1;
  }

 private:
  // What the element loops add to, copied into locals for a group of blocks (the code stores,
  // bytes that may alias anything, would otherwise send every update through memory).
  struct Tally {
    // Counts per byte lane (recording), at most 255 per lane: saturated elements, codes below
    // 2^m (subnormal or zero), zero codes; `counted`: units since they were last summed.
    // (A constructor written out: GCC compiles an implicit one for the baseline, not for the
    // unit's instruction set, and the intrinsics would not inline into it.)
    Tally() : saturated(_mm256_setzero_si256()), below_grid(saturated), code_zero(saturated) {}
    Tally(const Tally&) = default;
    // Member by member: the implicit copy of a local back into the member went through the stack
    // in pieces of another width (a 64-byte load over a 32-byte store), each stalling on store
    // forwarding, about 8% of an MXFP8 run along rows (perf annotate).
    Tally& operator=(const Tally& other) {
      saturated = other.saturated, below_grid = other.below_grid, code_zero = other.code_zero;
      counted = other.counted, words = other.words, sparse = other.sparse;
      inexact_lanes = other.inexact_lanes, underflow_lanes = other.underflow_lanes, any_saturated = other.any_saturated;
      return *this;
    }
    __m256i saturated, below_grid, code_zero;
    int counted = 0;
    int words = 0;             // one-hot words in one_hot_
    std::uint64_t sparse = 0;  // elements counted one by one (bins of 32 and more)
    std::uint32_t inexact_lanes = 0, underflow_lanes = 0;  // since the last settle_flags
    bool any_saturated = false;                            // (not recording)
  };
  // The scale code and element factor of up to 16 blocks (lane b: block b), from their amaxes;
  // `taken` is how many leading blocks have a scale (the rest are left: a NaN scale, or X = 127,
  // where 2^-X would be a float32 subnormal). `thresholds` per block: the smallest magnitude
  // (less one) its elements may have, so that each nonzero v / 2^X is a normal float32 (MX), or
  // that no input is a float32 subnormal (NVFP4).
  struct Scales {
    alignas(64) std::uint32_t amax[group];
    alignas(64) float factor[group] = {};
    alignas(64) std::uint32_t threshold[group] = {};
    alignas(16) std::uint8_t code[group];
    alignas(16) std::uint8_t amax_field[group];
    int taken = 0;
    // Per block (bit b): an element may have a bin of 32 or more; the amax is below 2^-95 (then a
    // zero's r is below 32 and is masked out).
    std::uint32_t may_be_sparse = 0, tiny_amax = 0;
  };
  // The per-block bits of s from the amaxes and the smallest nonzero magnitudes (0: none).
  static void mark_bins(__m512i amax, __m512i smallest, Scales& s) {
    const __m512i amax_field = _mm512_srli_epi32(amax, 23), far_bin = _mm512_set1_epi32(dense_bins);
    s.may_be_sparse = _mm512_cmple_epi32_mask(_mm512_add_epi32(_mm512_srli_epi32(smallest, 23), far_bin), amax_field);
    s.tiny_amax = _mm512_cmplt_epi32_mask(amax_field, far_bin);
  }
  void make_scales(__m512i amax, int n, Scales& s) const {
    _mm512_store_si512(s.amax, amax);
    _mm_store_si128(reinterpret_cast<__m128i*>(s.amax_field), _mm512_cvtepi32_epi8(_mm512_srli_epi32(amax, 23)));
    if (!nvfp4_ && rule_ == ScaleRule::floor) {
      // The OCP rule: X = floor(log2 amax) - emax, as the E8M0 code field(amax) - emax at least 0
      // (which is also X's floor of -127 for a subnormal or zero amax); a field of 255 is a NaN scale.
      const __m512i field = _mm512_srli_epi32(amax, 23);
      const __m512i code = _mm512_max_epi32(_mm512_sub_epi32(field, _mm512_set1_epi32(format_.element_emax())), _mm512_setzero_si512());
      _mm_store_si128(reinterpret_cast<__m128i*>(s.code), _mm512_cvtepi32_epi8(code));
      _mm512_store_ps(s.factor, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(254), code), 23)));
      // X + 1 = code - 126 at least 1, in the exponent field.
      _mm512_store_si512(s.threshold, _mm512_slli_epi32(_mm512_max_epi32(_mm512_sub_epi32(code, _mm512_set1_epi32(126)), _mm512_set1_epi32(1)), 23));
      const auto nan_or_top = static_cast<std::uint32_t>(
          _mm512_cmpeq_epi32_mask(field, _mm512_set1_epi32(255)) | _mm512_cmpeq_epi32_mask(code, _mm512_set1_epi32(254)));
      s.taken = std::min(n, nan_or_top == 0 ? group : __builtin_ctz(nan_or_top));
      return;
    }
    if (nvfp4_) {
      make_nvfp4_scales(amax, n, s);
      return;
    }
    s.taken = n;
    for (int b = 0; b < n; ++b) {
      whole_block::Scale scale;
      if (!whole_block::scale(format_, rule_, tensor_scale_, s.amax[b], scale)) {
        s.taken = b;
        return;
      }
      s.code[b] = scale.code, s.factor[b] = scale.factor, s.threshold[b] = scale.smallest_magnitude;
    }
  }
  // NVFP4's E4M3 block scales and element factors (nvfp4_block_scale_code, nvfp4_element_factor)
  // for 16 blocks at once: (amax / 6) * tensor scale in float32 as there, to E4M3 by the grid's
  // addition (this file's top; E4M3's subnormal grid below 2^-6), saturating to 448; its value
  // decoded; the factor tensor scale / value, 0 for a zero scale. A block with an infinite or NaN
  // amax (a NaN scale) and those after it are left.
  void make_nvfp4_scales(__m512i amax, int n, Scales& s) const {
    constexpr std::uint32_t e4m3_min_normal32 = E4m3ScaleGrid::min_normal32, e4m3_drop = E4m3ScaleGrid::drop, e4m3_max_code = E4m3ScaleGrid::max_code;
    const __m512 tensor_scale = _mm512_set1_ps(tensor_scale_);
    // At most 2^10 (the grid's addition stays finite; anything from 464 saturates all the same).
    const __m512 wanted = _mm512_min_ps(_mm512_mul_ps(_mm512_div_ps(_mm512_castsi512_ps(amax), _mm512_set1_ps(6.0f)), tensor_scale),
                                        _mm512_set1_ps(1024.0f));
    const __m512i binade = _mm512_max_epi32(_mm512_and_si512(_mm512_castps_si512(wanted), _mm512_set1_epi32(0x7F800000)),
                                            _mm512_set1_epi32(static_cast<int>(e4m3_min_normal32)));
    const __m512 unit = _mm512_castsi512_ps(_mm512_add_epi32(binade, _mm512_set1_epi32(static_cast<int>(e4m3_drop << 23))));
    const __m512i units = _mm512_sub_epi32(_mm512_castps_si512(_mm512_add_ps(wanted, unit)), _mm512_castps_si512(unit));
    const __m512i code = _mm512_min_epi32(
        _mm512_add_epi32(units, _mm512_sub_epi32(_mm512_srli_epi32(binade, e4m3_drop), _mm512_set1_epi32(static_cast<int>(e4m3_min_normal32 >> e4m3_drop)))),
        _mm512_set1_epi32(static_cast<int>(e4m3_max_code)));
    // E4M3's value: a normal code's fields moved into float32's (bias 7 -> 127); a subnormal's
    // mantissa times 2^-9.
    const __mmask16 subnormal = _mm512_cmplt_epi32_mask(code, _mm512_set1_epi32(8));
    const __m512 value = _mm512_mask_mul_ps(_mm512_castsi512_ps(_mm512_add_epi32(_mm512_slli_epi32(code, 20), _mm512_set1_epi32(120 << 23))), subnormal,
                                            _mm512_cvtepi32_ps(code), _mm512_set1_ps(1.0f / 512.0f));
    const __mmask16 nonzero = _mm512_cmpneq_ps_mask(value, _mm512_setzero_ps());
    _mm_store_si128(reinterpret_cast<__m128i*>(s.code), _mm512_cvtepi32_epi8(code));
    _mm512_store_ps(s.factor, _mm512_maskz_div_ps(nonzero, tensor_scale, value));
    _mm512_store_si512(s.threshold, _mm512_set1_epi32(0x00800000));
    const auto nan_scale = static_cast<std::uint32_t>(_mm512_cmpge_epu32_mask(amax, _mm512_set1_epi32(0x7F800000)));
    s.taken = std::min(n, nan_scale == 0 ? group : __builtin_ctz(nan_scale));
  }
  // The blocks' shape as a template argument, so that the element loop does not ask for it.
  // (NVFP4's scales in blocks of 16, as the format has them, or of 32, --block 32: each its own
  // shape, a block size and a scale kind.)
  enum class Shape { blocks_of_32, blocks_of_16, nvfp4, nvfp4_blocks_of_32 };
  static constexpr bool in_halves(Shape shape) { return shape == Shape::blocks_of_16 || shape == Shape::nvfp4; }
  static constexpr bool with_nvfp4_scales(Shape shape) { return shape == Shape::nvfp4 || shape == Shape::nvfp4_blocks_of_32; }
  template <bool Record, bool TrackFlags>
  int take_group_shaped(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, int n, BlockStatistics* statistics,
                        std::uint64_t random_index) {
    if (stochastic_) {
      if (nvfp4_) return halves_ ? take_group<Record, TrackFlags, Shape::nvfp4, true>(in, out, scales, n, statistics, random_index)
                                 : take_group<Record, TrackFlags, Shape::nvfp4_blocks_of_32, true>(in, out, scales, n, statistics, random_index);
      if (halves_) return take_group<Record, TrackFlags, Shape::blocks_of_16, true>(in, out, scales, n, statistics, random_index);
      return take_group<Record, TrackFlags, Shape::blocks_of_32, true>(in, out, scales, n, statistics, random_index);
    }
    if (nvfp4_) return halves_ ? take_group<Record, TrackFlags, Shape::nvfp4, false>(in, out, scales, n, statistics, 0)
                               : take_group<Record, TrackFlags, Shape::nvfp4_blocks_of_32, false>(in, out, scales, n, statistics, 0);
    if (halves_) return take_group<Record, TrackFlags, Shape::blocks_of_16, false>(in, out, scales, n, statistics, 0);
    return take_group<Record, TrackFlags, Shape::blocks_of_32, false>(in, out, scales, n, statistics, 0);
  }
  template <bool Record, bool TrackFlags, Shape BlockShape, bool Stochastic>
  int take_group(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, int n, BlockStatistics* statistics, std::uint64_t random_index);
  // The random words of elements index .. index + 8 Vectors - 1, eight to a register
  // (context.hpp's stochastic_random, SplitMix64, in 64-bit lanes).
  template <int Vectors>
  [[gnu::always_inline]] void random_words(std::uint64_t index, __m512i* words) const {
    constexpr std::uint64_t golden = 0x9E3779B97F4A7C15ull;
    const __m512i first = _mm512_set1_epi64(static_cast<long long>(seed_ + (index + 1) * golden));
    const __m512i steps = _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7), _mm512_set1_epi64(static_cast<long long>(golden)));
    for (int v = 0; v < Vectors; ++v) {
      __m512i z = _mm512_add_epi64(_mm512_add_epi64(first, steps), _mm512_set1_epi64(static_cast<long long>(8ull * static_cast<std::uint64_t>(v) * golden)));
      z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), _mm512_set1_epi64(static_cast<long long>(0xBF58476D1CE4E5B9ull)));
      z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), _mm512_set1_epi64(static_cast<long long>(0x94D049BB133111EBull)));
      words[v] = _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
    }
  }
  // Groups of columns a band walk takes at once: 32 rows of 64 x 16 float32 (128 KiB) stay in L2
  // between its two passes.
  static constexpr std::size_t chunk_groups = 64;
  template <bool Record, bool TrackFlags, bool Stochastic, bool Nvfp4>
  std::size_t band_chunk(const std::uint32_t* in, std::size_t stride, std::uint8_t* out, std::uint8_t* scales, BlockStatistics* statistics,
                         std::size_t groups, const std::uint32_t* next, std::uint64_t random_index);

  // 32 elements (two registers of bits, each with its factor and its blocks' amax exponent
  // fields), through the grid to signed code bytes, recorded; false (nothing recorded) where an
  // NVFP4 product is a float32 subnormal. `may_be_sparse`, `tiny_amax`: as Scales' bits, for
  // any of the elements' blocks.
  template <bool Record, bool TrackFlags, bool Nvfp4, bool Stochastic = false>
  [[gnu::always_inline]] bool quantize32(__m512i u0, __m512i u1, __m512 factor0, __m512 factor1, __m512i amax_field0, __m512i amax_field1,
                                         bool may_be_sparse, bool tiny_amax, __m256i& codes, Tally& t, BlockStatistics* statistics,
                                         const __m512i* random = nullptr);
  // The unclamped code of q per lane (mx_blocks_avx2.hpp's top).
  template <bool TrackFlags>
  [[gnu::always_inline]] __m512i code(__m512 q, Tally& t) const {
    const __m512i exponent_field = _mm512_set1_epi32(0x7F800000);
    const __m512i binade = _mm512_max_epi32(_mm512_and_si512(_mm512_castps_si512(q), exponent_field), _mm512_set1_epi32(static_cast<int>(min_normal32)));
    const __m512 unit = _mm512_castsi512_ps(_mm512_add_epi32(binade, _mm512_set1_epi32(static_cast<int>(drop << 23))));
    const __m512 on_grid = _mm512_add_ps(q, unit);
    const __m512i units = _mm512_sub_epi32(_mm512_castps_si512(on_grid), _mm512_castps_si512(unit));
    if constexpr (TrackFlags) {
      const __mmask16 exact = _mm512_cmp_ps_mask(_mm512_sub_ps(on_grid, unit), q, _CMP_EQ_OQ);
      t.inexact_lanes |= static_cast<__mmask16>(~exact);
      t.underflow_lanes |= _mm512_mask_cmplt_epu32_mask(static_cast<__mmask16>(~exact), _mm512_castps_si512(q), _mm512_set1_epi32(static_cast<int>(tiny_threshold_)));
    }
    return _mm512_add_epi32(units, _mm512_add_epi32(_mm512_srli_epi32(binade, drop), _mm512_set1_epi32(-static_cast<int>(min_normal32 >> drop))));
  }
  // The unclamped code of q per lane (a normal float32 or zero) rounded stochastically, each lane
  // deciding with its word (the low eight lanes' in `random_low`, the high eight's in
  // `random_high`): detail::round_bits32 and cast_from_f32's two ranges, in vector lanes. The
  // bits kept: F's normal range, q's bits less `drop` (the exponent rides along, rebiased after);
  // below it, q's significand less drop + (emin - q's exponent) bits, those dropped compared, as
  // a 64-bit fraction, with the word.
  template <bool TrackFlags>
  [[gnu::always_inline]] __m512i stochastic_code(__m512 q, __m512i random_low, __m512i random_high, Tally& t) const {
    constexpr std::uint32_t min_biased = min_normal32 >> 23;
    constexpr std::uint32_t rebias = static_cast<std::uint32_t>(127 - F.bias()) << m;
    const __m512i bits = _mm512_castps_si512(q), one = _mm512_set1_epi32(1);
    const __m512i biased = _mm512_srli_epi32(bits, 23);
    const __mmask16 below_normal = _mm512_cmplt_epu32_mask(bits, _mm512_set1_epi32(static_cast<int>(min_normal32)));  // zero too
    const __mmask16 nonzero = _mm512_test_epi32_mask(bits, bits);
    const __m512i fraction_bits = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFF));
    const __m512i sig = _mm512_mask_or_epi32(fraction_bits, nonzero, fraction_bits, _mm512_set1_epi32(0x800000));  // the implicit bit
    const __m512i below = _mm512_maskz_sub_epi32(below_normal, _mm512_set1_epi32(static_cast<int>(min_biased)), _mm512_max_epu32(biased, one));
    const __m512i x = _mm512_mask_mov_epi32(bits, below_normal, sig);
    const __m512i shift = _mm512_add_epi32(below, _mm512_set1_epi32(static_cast<int>(drop)));
    const __m512i kept = _mm512_srlv_epi32(x, shift);  // 0 from 32 on, as x >> min(shift, 31) is
    const __m512i dropped = _mm512_and_si512(x, _mm512_sub_epi32(_mm512_sllv_epi32(one, shift), one));  // all of x from 32 on
    // fraction64: dropped << (64 - shift), or dropped >> (shift - 64) (a count of 64 or more,
    // as a wrapped negative one is, gives 0).
    const auto up8 = [](__m256i dropped8, __m256i shift8, __m512i random) {
      const __m512i d = _mm512_cvtepu32_epi64(dropped8), s = _mm512_cvtepu32_epi64(shift8), sixty_four = _mm512_set1_epi64(64);
      const __m512i fraction = _mm512_or_si512(_mm512_sllv_epi64(d, _mm512_sub_epi64(sixty_four, s)), _mm512_srlv_epi64(d, _mm512_sub_epi64(s, sixty_four)));
      return _mm512_cmplt_epu64_mask(random, fraction);
    };
    // Where shift <= 32, dropped << (64 - shift) is a whole multiple of 2^32, so the word is below
    // it exactly when the word's high half, shifted right by 32 - shift, is below dropped: one
    // 32-bit comparison for 16 lanes. A lane with more to drop (a nonzero value far below F's
    // normal range: shift > 32) can round up only where the word's high half is at most the
    // fraction's, dropped >> (shift - 32) (0 from shift 64 on) -- seldom, as the fraction is below
    // 2^-8 -- and only those take the 64-bit comparison.
    const __m512i high_halves = _mm512_permutex2var_epi32(
        random_low, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), random_high);
    const __m512i thirty_two = _mm512_set1_epi32(32);
    const __mmask16 deep = _mm512_mask_cmpgt_epu32_mask(_mm512_test_epi32_mask(dropped, dropped), shift, thirty_two);
    const __mmask16 close = _mm512_mask_cmple_epu32_mask(deep, high_halves, _mm512_srlv_epi32(dropped, _mm512_sub_epi32(shift, thirty_two)));
    __mmask16 up = _mm512_mask_cmplt_epu32_mask(static_cast<__mmask16>(~deep), _mm512_srlv_epi32(high_halves, _mm512_sub_epi32(thirty_two, shift)), dropped);
    if (close != 0) [[unlikely]] {
      const __mmask16 up64 = _mm512_kunpackb(up8(_mm512_extracti64x4_epi64(dropped, 1), _mm512_extracti64x4_epi64(shift, 1), random_high),
                                             up8(_mm512_castsi512_si256(dropped), _mm512_castsi512_si256(shift), random_low));
      up = static_cast<__mmask16>(up | (up64 & close));
    }
    if constexpr (TrackFlags) {
      const __mmask16 inexact = _mm512_test_epi32_mask(dropped, dropped);
      __mmask16 tiny = below_normal & nonzero;
      if (!tininess_before_) {
        // Not tiny after rounding: q in the binade below 2^emin whose significand, rounded to
        // m + 1 bits with the same word (unbounded exponent), reaches 2^emin.
        const __m512i kept_fine = _mm512_srli_epi32(sig, drop);
        const __m512i dropped_fine = _mm512_and_si512(sig, _mm512_set1_epi32(static_cast<int>((1u << drop) - 1)));
        // drop <= 23: the 32-bit comparison above.
        const __mmask16 up_fine = _mm512_cmplt_epu32_mask(_mm512_srli_epi32(high_halves, 32 - drop), dropped_fine);
        const __mmask16 reaches = up_fine & _mm512_cmpeq_epi32_mask(kept_fine, _mm512_set1_epi32(static_cast<int>((2u << m) - 1))) &
                                  _mm512_cmpeq_epi32_mask(_mm512_add_epi32(biased, one), _mm512_set1_epi32(static_cast<int>(min_biased)));
        tiny &= static_cast<__mmask16>(~reaches);
      }
      t.inexact_lanes |= inexact;
      t.underflow_lanes |= tiny & inexact;
    }
    const __m512i rounded = _mm512_mask_add_epi32(kept, up, kept, one);
    return _mm512_mask_sub_epi32(rounded, static_cast<__mmask16>(~below_normal), rounded, _mm512_set1_epi32(static_cast<int>(rebias)));
  }
  void settle_flags() {
    any_inexact_ = any_inexact_ || tally_.inexact_lanes != 0;
    any_underflow_ = any_underflow_ || tally_.underflow_lanes != 0;
    tally_.inexact_lanes = tally_.underflow_lanes = 0;
    // MXINT8 raises no underflow (whole_blocks.hpp's tiny_threshold_): inexact alone settles it.
    flags_settled_ = any_inexact_ && (any_underflow_ || int8);
  }
  // Room in the byte counters (255 units at most) for the 16 units of 32 elements that a group
  // of blocks or a band of columns adds: they are summed before, never inside, the element loop.
  void make_room() {
    if (tally_.counted > 255 - 16) flush_byte_counters();
  }
  void flush_byte_counters() {
    Tally& t = tally_;
    saturated_total_ += whole_block::byte_sum(t.saturated), below_grid_total_ += whole_block::byte_sum(t.below_grid), code_zero_total_ += whole_block::byte_sum(t.code_zero);
    t.saturated = t.below_grid = t.code_zero = _mm256_setzero_si256();
    t.counted = 0;
  }
  std::uint64_t taken_ = 0;
  Scales chunk_scales_[chunk_groups];  // band_chunk's
  bool stream_codes_ = false, streaming_ = false;  // the tensor's codes, this run's (aligned)
  bool any_inexact_ = false, any_underflow_ = false;  // raised by the blocks taken
  bool flags_settled_ = false;  // inexact and underflow (where it can be) raised: not looked at again
  std::uint64_t saturated_total_ = 0, below_grid_total_ = 0, code_zero_total_ = 0;
  static constexpr int dense_bins = 32;  // bins counted one-hot; the rest one by one
  __m512i one_hot_[16];                  // words waiting for relative_counts_
  PositionalCounts relative_counts_;
  Tally tally_;
};

template <Format F>
template <bool Record, bool TrackFlags, bool Nvfp4, bool Stochastic>
[[gnu::always_inline]] inline bool Blocks<F>::quantize32(__m512i u0, __m512i u1, __m512 factor0, __m512 factor1, __m512i amax_field0,
                                                         __m512i amax_field1, bool may_be_sparse, bool tiny_amax, __m256i& codes, Tally& t,
                                                         BlockStatistics* statistics, const __m512i* random) {
  const __m512i magnitude_mask = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i magnitude0 = _mm512_and_si512(u0, magnitude_mask), magnitude1 = _mm512_and_si512(u1, magnitude_mask);
  __m512 q0 = _mm512_mul_ps(_mm512_castsi512_ps(magnitude0), factor0), q1 = _mm512_mul_ps(_mm512_castsi512_ps(magnitude1), factor1);
  if constexpr (Nvfp4) {
    // NVFP4's products made ready for the grid: a float32 subnormal one is not taken; those at or
    // above 2^(emax + 2) (an infinity included), which saturate whatever they are, are lowered to
    // it, where the grid's addition stays finite. MX's need nothing (the scales saw to them).
    const __m512i smallest_normal = _mm512_set1_epi32(0x00800000);
    const __mmask16 subnormal0 = _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(_mm512_castps_si512(q0), _mm512_castps_si512(q0)),
                                                              _mm512_castps_si512(q0), smallest_normal);
    const __mmask16 subnormal1 = _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(_mm512_castps_si512(q1), _mm512_castps_si512(q1)),
                                                              _mm512_castps_si512(q1), smallest_normal);
    if ((subnormal0 | subnormal1) != 0) return false;
    const __m512 ceiling = _mm512_castsi512_ps(_mm512_set1_epi32((F.emax() + 2 + 127) << 23));
    q0 = _mm512_min_ps(q0, ceiling), q1 = _mm512_min_ps(q1, ceiling);
  }
  // The codes as bytes by two saturating packs, which work within 128-bit lanes: lane L holds
  // codes 4L .. 4L + 3 of each register; the permutation puts them in order in the low half.
  // Unclamped codes fit a byte (at most one above the largest magnitude code).
  __m512i code0, code1;
  if constexpr (Stochastic) {
    code0 = stochastic_code<TrackFlags>(q0, random[0], random[1], t), code1 = stochastic_code<TrackFlags>(q1, random[2], random[3], t);
  } else {
    (void)random;
    code0 = code<TrackFlags>(q0, t), code1 = code<TrackFlags>(q1, t);
  }
  const __m512i code_words = _mm512_packus_epi32(code0, code1);
  const __m512i in_order = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
                                                    _mm512_packus_epi16(code_words, code_words));
  const __m256i unclamped = _mm512_castsi512_si256(in_order);
  const __m256i largest = _mm256_set1_epi8(static_cast<char>(max_code));
  const __mmask32 saturating = _mm256_cmpgt_epu8_mask(unclamped, largest);
  const __m256i clamped = _mm256_min_epu8(unclamped, largest);
  const __mmask32 negative = _mm512_kunpackw(_mm512_movepi32_mask(u1), _mm512_movepi32_mask(u0));
  if constexpr (int8) codes = _mm256_mask_sub_epi8(clamped, negative, _mm256_setzero_si256(), clamped);
  else codes = _mm256_mask_add_epi8(clamped, negative, clamped, _mm256_set1_epi8(static_cast<char>(sign_byte)));
  if constexpr (!Record) {
    t.any_saturated = t.any_saturated || saturating != 0;
  } else {
    const __m256i minus_one = _mm256_set1_epi8(-1);
    t.saturated = _mm256_mask_sub_epi8(t.saturated, saturating, t.saturated, minus_one);
    t.below_grid = _mm256_mask_sub_epi8(t.below_grid, _mm256_cmplt_epu8_mask(clamped, _mm256_set1_epi8(static_cast<char>(below_grid_code))), t.below_grid, minus_one);
    t.code_zero = _mm256_mask_sub_epi8(t.code_zero, _mm256_testn_epi8_mask(clamped, clamped), t.code_zero, minus_one);
    ++t.counted;  // at most 255: see make_room
    // Relative exponents: amax's exponent field less each element's (no input here is a float32
    // subnormal; a zero's field is 0).
    const __m512i r0 = _mm512_sub_epi32(amax_field0, _mm512_srli_epi32(magnitude0, 23));
    const __m512i r1 = _mm512_sub_epi32(amax_field1, _mm512_srli_epi32(magnitude1, 23));
    const __m512i one = _mm512_set1_epi32(1);
    if (tiny_amax) {
      one_hot_[t.words] = _mm512_maskz_sllv_epi32(_mm512_test_epi32_mask(magnitude0, magnitude0), one, r0);
      one_hot_[t.words + 1] = _mm512_maskz_sllv_epi32(_mm512_test_epi32_mask(magnitude1, magnitude1), one, r1);
    } else {
      one_hot_[t.words] = _mm512_sllv_epi32(one, r0), one_hot_[t.words + 1] = _mm512_sllv_epi32(one, r1);
    }
    if ((t.words += 2) == 16) {
      relative_counts_.add16(one_hot_);
      t.words = 0;
    }
    if (may_be_sparse) {
      const __m512i far_bin = _mm512_set1_epi32(dense_bins);
      auto sparse = static_cast<std::uint32_t>(_mm512_kunpackw(_mm512_mask_cmpge_epu32_mask(_mm512_test_epi32_mask(magnitude1, magnitude1), r1, far_bin),
                                                               _mm512_mask_cmpge_epu32_mask(_mm512_test_epi32_mask(magnitude0, magnitude0), r0, far_bin)));
      if (sparse != 0) {
        alignas(64) std::uint32_t bin_of[32];
        _mm512_store_si512(bin_of, r0), _mm512_store_si512(bin_of + 16, r1);
        t.sparse += static_cast<std::uint64_t>(__builtin_popcount(sparse));
        for (; sparse != 0; sparse &= sparse - 1) ++statistics->relative_exponents[bin_of[__builtin_ctz(sparse)]];
      }
    }
  }
  return true;
}

template <Format F>
template <bool Record, bool TrackFlags, typename Blocks<F>::Shape BlockShape, bool Stochastic>
int Blocks<F>::take_group(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, int n, BlockStatistics* statistics,
                          std::uint64_t random_index) {
  constexpr bool halves = in_halves(BlockShape);
  const __m512i magnitude_mask = _mm512_set1_epi32(0x7FFFFFFF), one = _mm512_set1_epi32(1);
  const auto load = [&](int j) { return _mm512_loadu_si512(in + 16 * j); };  // the 16 elements j
  // Each block's largest magnitude, and its smallest nonzero one negated (as an unsigned number
  // -m is largest for the smallest m; a zero's is 0, the least, and stays where all are zero).
  __m512i block_max[group], block_negated_min[group];
  for (int b = 0; b < group; ++b) {
    if (b >= n) {
      block_max[b] = block_negated_min[b] = _mm512_setzero_si512();
      continue;
    }
    if constexpr (halves) {
      const __m512i magnitude = _mm512_and_si512(load(b), magnitude_mask);
      block_max[b] = magnitude;
      block_negated_min[b] = _mm512_sub_epi32(_mm512_setzero_si512(), magnitude);
    } else {
      const __m512i magnitude0 = _mm512_and_si512(load(2 * b), magnitude_mask), magnitude1 = _mm512_and_si512(load(2 * b + 1), magnitude_mask);
      block_max[b] = _mm512_max_epu32(magnitude0, magnitude1);
      block_negated_min[b] = _mm512_max_epu32(_mm512_sub_epi32(_mm512_setzero_si512(), magnitude0), _mm512_sub_epi32(_mm512_setzero_si512(), magnitude1));
    }
  }
  const __m512i amax = lane_maxima(block_max), smallest = _mm512_sub_epi32(_mm512_setzero_si512(), lane_maxima(block_negated_min));
  Scales s;
  make_scales(amax, n, s);
  if constexpr (Record) mark_bins(amax, smallest, s);
  // Every quotient a normal float32 (or zero) in the leading blocks whose smallest clears their
  // threshold (an all-zero block's smallest less one wraps to the largest).
  const std::uint32_t below = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(smallest, one), _mm512_sub_epi32(_mm512_load_si512(s.threshold), one));
  int taken = std::min(s.taken, below == 0 ? group : __builtin_ctz(below));
  if constexpr (halves) taken &= ~1;
  // The elements, 32 at a time: one block of 32, or two of 16.
  constexpr int per_unit = halves ? 2 : 1;
  if constexpr (Record) make_room();
  Tally t = tally_;
  int b = 0;
  for (; b + per_unit <= taken; b += per_unit) {
    const int j = halves ? b : 2 * b;  // the unit's first 16 elements
    // The lines two groups on (of blocks of 32) on their way while this one computes: a group's
    // loads come in a burst after all of the last group's work, beyond the reach of out-of-order
    // execution, and the processor's own prefetchers did not run far enough ahead (measured).
    _mm_prefetch(reinterpret_cast<const char*>(in + 16 * j + prefetch_ahead), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(in + 16 * j + 16 + prefetch_ahead), _MM_HINT_T0);
    const __m512 factor0 = _mm512_set1_ps(s.factor[b]), factor1 = _mm512_set1_ps(s.factor[b + per_unit - 1]);
    const __m512i amax_field0 = _mm512_set1_epi32(s.amax_field[b]), amax_field1 = _mm512_set1_epi32(s.amax_field[b + per_unit - 1]);
    const std::uint32_t unit_blocks = (per_unit == 1 ? 1u : 3u) << b;
    __m256i codes;
    __m512i random[4];
    if constexpr (Stochastic) random_words<4>(random_index + 16 * static_cast<std::uint64_t>(j), random);
    if (!quantize32<Record, TrackFlags, with_nvfp4_scales(BlockShape), Stochastic>(load(j), load(j + 1), factor0, factor1, amax_field0, amax_field1,
                                                                                (s.may_be_sparse & unit_blocks) != 0, (s.tiny_amax & unit_blocks) != 0,
                                                                                codes, t, statistics, random))
      break;
    if (streaming_) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 16 * j), _mm256_castsi256_si128(codes));
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 16 * j + 16), _mm256_extracti128_si256(codes, 1));
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 * j), codes);
    }
  }
  tally_ = t;
  std::memcpy(scales, s.code, static_cast<std::size_t>(b));
  if constexpr (Record)
    for (int k = 0; k < b; ++k) ++statistics->scale_codes[s.code[k]];
  if constexpr (TrackFlags) settle_flags();
  taken_ += static_cast<std::uint64_t>(b);
  return b;
}

template <Format F>
template <bool Record, bool TrackFlags, bool Stochastic, bool Nvfp4>
std::size_t Blocks<F>::band_chunk(const std::uint32_t* in, std::size_t stride, std::uint8_t* out, std::uint8_t* scales,
                                  BlockStatistics* statistics, std::size_t groups, const std::uint32_t* next, std::uint64_t random_index) {
  // Row by row, not column by column: 32 rows read down a column at once are 32 streams, and
  // where rows lie a power of two apart (as they mostly do) their lines share one L1 set, which
  // holds eight. First each column's largest and smallest magnitude (lane l of amax[g]: column
  // 16g + l), then the elements, two rows at a time, from L2. A band is a block's rows: 32, or 16.
  const std::size_t rows = static_cast<std::size_t>(format_.block_size);
  const __m512i magnitude_mask = _mm512_set1_epi32(0x7FFFFFFF), one = _mm512_set1_epi32(1);
  const auto at = [&](std::size_t r, std::size_t g) { return _mm512_loadu_si512(in + r * stride + g * group); };
  __m512i amax[chunk_groups], least[chunk_groups];
  // Eight groups at a time down the band's rows, their extremes in registers (a pass over all the
  // groups row by row would load and store each group's pair of extremes for every row).
  constexpr std::size_t at_once = 8;
  std::size_t g0 = 0;
  for (; g0 + at_once <= groups; g0 += at_once) {
    __m512i high[at_once], low[at_once];
    for (std::size_t j = 0; j < at_once; ++j) high[j] = _mm512_setzero_si512(), low[j] = _mm512_set1_epi32(-1);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < at_once; ++j) {
        const __m512i magnitude = _mm512_and_si512(at(r, g0 + j), magnitude_mask);
        high[j] = _mm512_max_epu32(high[j], magnitude);
        low[j] = _mm512_min_epu32(low[j], _mm512_sub_epi32(magnitude, one));
      }
    for (std::size_t j = 0; j < at_once; ++j) amax[g0 + j] = high[j], least[g0 + j] = low[j];
  }
  for (std::size_t g = g0; g < groups; ++g) {
    amax[g] = _mm512_setzero_si512(), least[g] = _mm512_set1_epi32(-1);
    for (std::size_t r = 0; r < rows; ++r) {
      const __m512i magnitude = _mm512_and_si512(at(r, g), magnitude_mask);
      amax[g] = _mm512_max_epu32(amax[g], magnitude);
      least[g] = _mm512_min_epu32(least[g], _mm512_sub_epi32(magnitude, one));
    }
  }
  std::size_t taken = groups;
  for (std::size_t g = 0; g < groups; ++g) {
    Scales& s = chunk_scales_[g];
    make_scales(amax[g], group, s);
    bool whole = s.taken == group && _mm512_cmplt_epu32_mask(least[g], _mm512_sub_epi32(_mm512_load_si512(s.threshold), one)) == 0;
    if constexpr (Nvfp4) {
      // No product a float32 subnormal (quantize32 would refuse it half way through the band, and
      // the band's codes and counts would be left half made). Products round monotonically, so
      // none is when the smallest nonzero magnitude's product is normal, or when even amax's is
      // zero; a smallest product that underflowed to zero while amax's did not says nothing of
      // those between (2^-30 * 2^-127 is zero, 2^-10 * 2^-127 subnormal).
      const __m512 factor = _mm512_load_ps(s.factor);
      const __m512i smallest = _mm512_add_epi32(least[g], one);  // 0 where the column holds only zeros
      const __m512i product = _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(smallest), factor));
      const __m512i largest = _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(amax[g]), factor));
      const __mmask16 below_normal = _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(smallest, smallest), product, _mm512_set1_epi32(0x00800000));
      whole = whole && (below_normal & _mm512_test_epi32_mask(largest, largest)) == 0;
    }
    if (!whole) {
      taken = g;
      break;
    }
    if constexpr (Record) mark_bins(amax[g], _mm512_add_epi32(least[g], one), s);
  }
  Tally t = tally_;
  for (std::size_t r = 0; r < rows; r += 2) {
    for (std::size_t first = 0; first < taken; first += 16) {
      if constexpr (Record) {  // room for the 16 units that follow
        tally_ = t;
        make_room();
        t = tally_;
      }
      for (std::size_t g = first; g < std::min(taken, first + 16); ++g) {
        // The next chunk's lines into L2 meanwhile (rows r and r + 1, group g's), so that its
        // first pass finds them there rather than waits on memory alone.
        _mm_prefetch(reinterpret_cast<const char*>(next + r * stride + g * group), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(next + (r + 1) * stride + g * group), _MM_HINT_T1);
        const Scales& s = chunk_scales_[g];
        const __m512 factor = _mm512_load_ps(s.factor);  // 2^-X per lane: the products are exact
        const __m512i amax_fields = _mm512_srli_epi32(amax[g], 23);
        __m256i codes;
        __m512i random[4];  // rows r's and r + 1's words (element (r, c) draws random_index + r stride + c)
        if constexpr (Stochastic) {
          const std::uint64_t index = random_index + r * stride + g * group;
          random_words<2>(index, random);
          random_words<2>(index + stride, random + 2);
        }
        quantize32<Record, TrackFlags, Nvfp4, Stochastic>(at(r, g), at(r + 1, g), factor, factor, amax_fields, amax_fields, s.may_be_sparse != 0,
                                                          s.tiny_amax != 0, codes, t, statistics, random);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + r * stride + g * group), _mm256_castsi256_si128(codes));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (r + 1) * stride + g * group), _mm256_extracti128_si256(codes, 1));
      }
    }
  }
  tally_ = t;
  for (std::size_t g = 0; g < taken; ++g) {
    const Scales& s = chunk_scales_[g];
    std::memcpy(scales + g * group, s.code, group);
    if constexpr (Record)
      for (int k = 0; k < group; ++k) ++statistics->scale_codes[s.code[k]];
  }
  if constexpr (TrackFlags) settle_flags();
  taken_ += taken * group;
  return taken;
}

// Blocks<F> as the walker's whole_blocks.
template <Format F>
using WholeBlocks = whole_block::Walker<Blocks<F>, 16>;

}  // namespace fpscope::mx_avx512

#pragma GCC diagnostic pop
