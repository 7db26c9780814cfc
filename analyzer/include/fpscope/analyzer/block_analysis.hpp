// What a block-scaled format does to a tensor, exactly from its values: counts, error, and the
// scale rules side by side.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "fpscope/core/block_scaling.hpp"

namespace fpscope {

// How far the quantized values lie from the originals, over the elements of blocks whose scale is
// a number and whose values are finite.
struct QuantizationError {
  std::uint64_t compared = 0;
  double max_abs = 0;    // largest |quantized - original|
  double rms = 0;        // root mean square of the difference
  double rms_value = 0;  // root mean square of the originals (rms / rms_value: the relative error)
  // Elements whose value lies beyond float32's largest: dequantized to float32 (block_dequantize,
  // `fpscope quantize --out`) they become infinities. A scale rule that rounds a scale up (round-up,
  // rceil, even) can put a block holding values near float32's largest there.
  std::uint64_t beyond_float32 = 0;
  // rms / rms_value; none where the values' RMS is 0 (no finite values, or all of them zero):
  // an error relative to nothing is not a number to show.
  std::optional<double> relative_rms() const { return rms_value == 0 ? std::nullopt : std::optional<double>(rms / rms_value); }
};

// The quantized values as the format defines them -- element times scale (MX), element times block
// scale over tensor scale (NVFP4) -- in double precision, against the originals: the MX values
// exactly, even where float32 cannot hold them (counted as beyond_float32), and the error of the
// error far below what it measures.
QuantizationError quantization_error(const BlockFormat& format, const BlockLayout& layout, std::span<const float> original,
                                     std::span<const std::uint8_t> element_codes, std::span<const std::uint8_t> scale_codes, float tensor_scale);

// The binades of the blocks' scales (E8M0 exponents, or the binades of NVFP4's E4M3 scales), over
// blocks whose scale is a positive number; nullopt when there is none.
struct ScaleExponentRange {
  int low = 0, high = 0;
};
std::optional<ScaleExponentRange> scale_exponent_range(const BlockFormat& format, const BlockStatistics& statistics);

// Where an element lands under round to nearest (as recorded block statistics are rounded) by
// its exponent relative to its block's largest (floor(log2|v|) - floor(log2 amax)), when the
// block's largest lands in the element format's top binade, as the floor rule puts it: from
// `normal_from` up (to 0) the element is normal, from `subnormal_from` up to normal_from - 1
// subnormal, and below subnormal_from it flushes to zero. subnormal_from's binade lies under the
// smallest subnormal and rounds up to it (all but its lowest value, exactly half of it, which
// ties to zero). MXINT8 has no subnormals: both bounds are where values round to the integer 1.
// Other rules scale a block one binade higher where its largest would saturate, moving that
// block's window one binade to the right; NVFP4's E4M3 scales place a block's largest near
// E2M1's top, not exactly there. The exact counts are the record's.
struct RelativeWindow {
  int normal_from = 0;
  int subnormal_from = 0;
};
RelativeWindow relative_window(const BlockFormat& format);

// One tensor quantized under one rule.
struct BlockRuleReport {
  ScaleRule rule = ScaleRule::floor;
  BlockStatistics statistics;
  QuantizationError error;
  std::uint64_t blocks_differing = 0;  // blocks whose scale differs from the first report's (compare_scale_rules)
  std::optional<ScaleExponentRange> scale_range;
  std::vector<std::uint8_t> scale_codes;
};

// Quantizes `values` under `rule` in `ctx`'s rounding (ctx is copied: every report starts from
// the same stochastic stream), with statistics and error; NVFP4 under `tensor_scale` where one is
// given (block_quantize_under_tensor_scale), else its values' own; `square_tiles`: each block
// scaled by its square tile's amax (block_quantize_square_tiles; no given tensor scale).
BlockRuleReport analyze_blocks(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                               const Context& ctx, std::optional<float> tensor_scale = std::nullopt, bool square_tiles = false);

// Every scale rule (MX formats; NVFP4 has one), blocks_differing counted against the first
// (the OCP spec's floor rule).
std::vector<BlockRuleReport> compare_scale_rules(const BlockFormat& format, const BlockLayout& layout, std::span<const float> values,
                                                 const Context& ctx, bool square_tiles = false);

}  // namespace fpscope
