// What the vector kernels that take MX and NVFP4 blocks whole (mx_blocks_avx2.hpp,
// mx_blocks_avx512.hpp) share: which blocks they take, a block's scale, and their face to the
// walker (block_kernels.inl). Included only where AVX2 is compiled for, each unit's copy in an
// inline namespace named for its instruction set (BULK_ISA): the AVX2 and the AVX-512 unit both
// compile these functions, and the linker must not give one unit the other's.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fpscope/core/block_format.hpp"
#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/cast.hpp"
#include "fpscope/core/e8m0.hpp"
#include "whole_blocks_table.hpp"

namespace fpscope::whole_block {
inline namespace BULK_ISA {

// Whether the processor's float32 arithmetic is IEEE's default (MXCSR: round to nearest even, no
// flush-to-zero, no denormals-are-zero), as the grid's addition and NVFP4's products need.
inline bool float_arithmetic_is_default() { return (_mm_getcsr() & 0xE040u) == 0; }

// Whether a kernel writes a tensor's codes around the caches (non-temporal stores): when there are
// more of them than a last-level cache holds (32 MiB: the L3 of one core complex on current server
// processors; sysconf's figure can be the whole package's), they would not be there for their
// next reader anyway, and ordinary stores read each line of the output before they write it.
// (The kernel looks at each run's alignment: the stores want 16 bytes.)
// FPSCOPE_STREAM_CODES_FROM=BYTES moves the threshold (the tests use 0: every tensor).
inline bool streams_codes(std::size_t code_bytes) {
  static const std::size_t from = [] {
    const char* setting = std::getenv("FPSCOPE_STREAM_CODES_FROM");
    return setting != nullptr ? static_cast<std::size_t>(std::strtoull(setting, nullptr, 10)) : std::size_t{32} << 20;
  }();
  return code_bytes >= from;
}

// Whether the kernels take blocks of this format (the mode and options are the caller's to check).
// (MXINT8's go to them by block_kernels.inl's int8 branch, as whole_block::mxint8_magnitudes.)
inline bool takes(const BlockFormat& format) {
  return (format.elements == BlockFormat::Elements::floating || format.elements == BlockFormat::Elements::int8) &&
         (format.block_size == 32 || format.block_size == 16);
}

// The sum of 32 byte lanes (the kernels' per-lane counters).
inline std::uint64_t byte_sum(__m256i counts) {
  const __m256i sums = _mm256_sad_epu8(counts, _mm256_setzero_si256());
  alignas(32) std::uint64_t parts[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(parts), sums);
  return parts[0] + parts[1] + parts[2] + parts[3];
}

struct Scale {
  std::uint8_t code = 0;
  float factor = 0;
  // Every nonzero element's magnitude must be at least this (as float32 bits) for the kernels'
  // arithmetic to hold: MX, 2^max(X + 1, 1), so that v / 2^X is a normal float32; NVFP4, the
  // smallest normal float32 (a subnormal input goes the scalar way).
  std::uint32_t smallest_magnitude = 0;
};

// The float32 value of an E4M3 scale code (block_scale_value's, from a table made once): NVFP4's
// kernels decode a scale per 16 elements, where the general decoder cost a sixth of their time (AVX2).
inline float nvfp4_scale_value(std::uint8_t code) { return nvfp4_scale_values()[code]; }

// False where the block is not taken: a NaN scale, or (MX) X = 127, where 2^-X would be a
// float32 subnormal (no element format's rule gets there). MX: the factor is 2^-X; NVFP4: the
// E4M3 scale and the factor of nvfp4_element_factor (its products are looked at after).
inline bool scale(const BlockFormat& format, ScaleRule rule, float tensor_scale, std::uint32_t amax, Scale& s) {
  if (format.scale == BlockFormat::Scale::e4m3_nvfp4) {
    s.code = static_cast<std::uint8_t>(nvfp4_block_scale_code(amax, tensor_scale));
    if (is_nan(formats::e4m3, s.code)) return false;
    s.factor = nvfp4_element_factor(tensor_scale, nvfp4_scale_value(s.code));
    s.smallest_magnitude = 0x00800000u;
    return true;
  }
  // The OCP rule named as a constant, so that its call folds to a few instructions.
  s.code = rule == ScaleRule::floor ? mx_scale_code(format, ScaleRule::floor, amax) : mx_scale_code(format, rule, amax);
  if (e8m0::is_nan(s.code)) return false;
  const int shared = e8m0::exponent_of(s.code);
  if (shared == e8m0::max_exponent) return false;
  s.smallest_magnitude = static_cast<std::uint32_t>(std::max(shared + 1, 1)) << 23;
  s.factor = bits_float(static_cast<std::uint32_t>(127 - shared) << 23);
  return true;
}

// MXINT8's magnitudes as a float format: a 1-bit exponent of bias 1, 6 fraction bits, finite:
// n * 2^-6 for n = 0 .. 127 (the 64 below 1 its subnormals, spaced as its normals are), code n,
// largest 127/64. A kernel given it rounds an MXINT8 element's magnitude as it rounds any
// element's (its Blocks signs the code in two's complement, and counts no subnormals).
inline constexpr Format mxint8_magnitudes{1, 6, Flavour::finite, 1};
static_assert(mxint8_magnitudes.emin() == 0 && mxint8_magnitudes.emax() == 0 && mxint8_magnitudes.max_finite_bits() == 127);

// A kernel's parameters: element format F's constants and the blocks' format, rule and options.
template <Format F>
struct Setting {
  static_assert(F.width() <= 8 && F.flavour != Flavour::fnuz, "MX float elements of 8 bits or fewer");
  static constexpr int m = F.mantissa_bits;
  static constexpr std::uint32_t min_normal32 = static_cast<std::uint32_t>(F.emin() + 127) << 23;
  static constexpr std::uint32_t drop = 23 - m;
  static constexpr std::uint32_t max_code = static_cast<std::uint32_t>(F.max_finite_bits());
  static_assert(F.emin() + 127 > 1, "F's subnormals are normal float32 numbers");

  // `tensor_scale`: NVFP4's, for the whole tensor.
  Setting(const BlockFormat& format, ScaleRule rule, bool tininess_before, float tensor_scale)
      : format_(format),
        rule_(rule),
        // MXINT8 raises no underflow (mxint8_element_code): no quotient is below 0.
        tiny_threshold_(F == mxint8_magnitudes ? 0 : tininess_before ? min_normal32 : min_normal32 - (1u << drop) / 2),
        tensor_scale_(tensor_scale),
        nvfp4_(format.scale == BlockFormat::Scale::e4m3_nvfp4),
        halves_(format.block_size == 16) {}

  BlockFormat format_;
  ScaleRule rule_;
  std::uint32_t tiny_threshold_;  // a quotient below it that is not exact is tiny
  float tensor_scale_;
  bool nvfp4_, halves_;  // NVFP4's scales; blocks of 16 (two to the 32 elements taken at once)

  // Elements rounded stochastically, as cast_from_f32 rounds them in RoundingMode::stochastic:
  // element k of the tensor draws stochastic_random(seed, k) (k: take's random_index on), rounds
  // up where the word is below its dropped bits' fraction (64 bits), and raises underflow under
  // `tininess_before`'s rule (each kernel's stochastic_code).
  void round_stochastically(std::uint64_t seed, bool tininess_before) {
    stochastic_ = true;
    seed_ = seed;
    tininess_before_ = tininess_before;
  }
  bool stochastic_ = false, tininess_before_ = false;
  std::uint64_t seed_ = 0;
};
// The names of a Setting that a kernel's Blocks uses.
#define FPSCOPE_WHOLE_BLOCK_SETTING                                                                       \
  using Setting = whole_block::Setting<F>;                                                                \
  using Setting::m, Setting::min_normal32, Setting::drop, Setting::max_code, Setting::format_, Setting::rule_, \
      Setting::tiny_threshold_, Setting::tensor_scale_, Setting::nvfp4_, Setting::halves_, Setting::stochastic_, Setting::tininess_before_, \
      Setting::seed_

// A kernel's Blocks<F> as the walker's whole_blocks (block_kernels.inl, walk_blocks): runs of
// blocks along rows, and groups of ColumnsAtOnce adjacent columns of a band of blocks down columns
// (of every shape: take_column_groups takes the leading groups it can and says how many).
template <typename Blocks, std::size_t ColumnsAtOnce>
struct Walker {
  static constexpr bool uses_whole_blocks = true;
  static constexpr std::size_t columns_at_once = ColumnsAtOnce;
  Blocks* blocks;
  BlockStatistics* statistics;  // null: codes only
  // `random_index`: the stochastic random word of in[0] (where the kernel rounds stochastically).
  std::size_t operator()(const std::uint32_t* in, std::uint8_t* out, std::uint8_t* scales, std::size_t count, std::uint64_t random_index) const {
    return statistics != nullptr ? blocks->template take<true>(in, out, scales, count, statistics, random_index)
                                 : blocks->template take<false>(in, out, scales, count, nullptr, random_index);
  }
  // `random_index`: as above (element (r, c) of the band draws random_index + r * stride + c).
  std::size_t columns(const std::uint32_t* in, std::size_t stride, std::uint8_t* out, std::uint8_t* scales, std::size_t groups,
                      std::uint64_t random_index) const {
    return statistics != nullptr ? blocks->template take_column_groups<true>(in, stride, out, scales, statistics, groups, random_index)
                                 : blocks->template take_column_groups<false>(in, stride, out, scales, nullptr, groups, random_index);
  }
};

}  // namespace BULK_ISA
}  // namespace fpscope::whole_block
