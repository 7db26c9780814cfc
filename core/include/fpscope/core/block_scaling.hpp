// Block quantization of float32 arrays: codes, scales, dequantization and exact per-block counts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "fpscope/core/block_format.hpp"
#include "fpscope/core/context.hpp"

namespace fpscope {

// A matrix of rows x cols float32 values in row-major (C) order, cut into blocks of
// format.block_size consecutive elements along a row (axis rows: blocks run along the last
// axis, as for the A operand of A·B) or down a column (axis cols: as for B). A row or column
// whose length is not a multiple of the block size ends in a shorter block.
enum class BlockAxis : std::uint8_t { rows, cols };

struct BlockLayout {
  std::size_t rows = 0;
  std::size_t cols = 0;
  BlockAxis axis = BlockAxis::rows;
  int block_size = 32;

  FPSCOPE_HD std::size_t element_count() const { return rows * cols; }
  // The scale array's shape: rows x ceil(cols / block) for axis rows, ceil(rows / block) x cols for cols.
  FPSCOPE_HD std::size_t scale_rows() const { return axis == BlockAxis::rows ? rows : (rows + block_size - 1) / block_size; }
  FPSCOPE_HD std::size_t scale_cols() const { return axis == BlockAxis::rows ? (cols + block_size - 1) / block_size : cols; }
  FPSCOPE_HD std::size_t block_count() const { return scale_rows() * scale_cols(); }
};

// Block (scale_row, scale_col) of a layout's row-major values: element j lies at first + j * stride.
struct BlockSpan {
  std::size_t first = 0, stride = 1, count = 0;
};
FPSCOPE_HD inline BlockSpan block_span(const BlockLayout& layout, std::size_t scale_row, std::size_t scale_col) {
  const std::size_t block = static_cast<std::size_t>(layout.block_size);
  if (layout.axis == BlockAxis::rows) {
    const std::size_t first_col = scale_col * block, left = layout.cols - first_col;
    return {scale_row * layout.cols + first_col, 1, left < block ? left : block};
  }
  const std::size_t first_row = scale_row * block, left = layout.rows - first_row;
  return {first_row * layout.cols + scale_col, layout.cols, left < block ? left : block};
}

// An element's value after dequantization: its element value times its block's scale (MX: one
// exact product, or an infinity beyond float32's range), or for NVFP4 that product (exact: 2 by 4
// significant bits) divided by the tensor scale (one rounding); NaN where the scale is NaN.
FPSCOPE_HD inline float dequantized_element(bool nvfp4, float element, float scale, float tensor_scale) {
  if (scale != scale) return bits_float(0x7FC00000u);
  return nvfp4 ? (element * scale) / tensor_scale : element * scale;
}

// What quantization did to one block's elements, counted exactly.
struct BlockOutcome {
  std::uint32_t flushed_to_zero = 0;  // nonzero inputs whose element is zero
  std::uint32_t made_subnormal = 0;   // inputs whose element is a subnormal of the element format
  std::uint32_t saturated = 0;        // inputs beyond the element's largest after scaling, clamped
  friend constexpr bool operator==(const BlockOutcome&, const BlockOutcome&) = default;
};

// Statistics of a whole quantized tensor: what a recorded step keeps for a block-scaled tensor.
struct BlockStatistics {
  // An element's exponent relative to its block's largest: floor(log2 |v|) - floor(log2 amax),
  // from 0 down to -276 (float32's whole range); index i counts the relative exponent -i.
  static constexpr int relative_exponent_bins = 277;
  std::array<std::uint64_t, 256> scale_codes{};  // how many blocks have each scale code
  std::array<std::uint64_t, relative_exponent_bins> relative_exponents{};
  std::uint64_t elements = 0;
  std::uint64_t blocks = 0;
  std::uint64_t nan_blocks = 0;  // blocks holding a NaN or infinity (their scale is NaN)
  std::uint64_t zeros = 0;       // zero inputs (not in relative_exponents)
  std::uint64_t flushed_to_zero = 0;
  std::uint64_t made_subnormal = 0;
  std::uint64_t saturated = 0;
  // Adds another tensor's (or step's) statistics to these.
  void merge(const BlockStatistics& other) {
    for (std::size_t i = 0; i < scale_codes.size(); ++i) scale_codes[i] += other.scale_codes[i];
    for (std::size_t i = 0; i < relative_exponents.size(); ++i) relative_exponents[i] += other.relative_exponents[i];
    elements += other.elements;
    blocks += other.blocks;
    nan_blocks += other.nan_blocks;
    zeros += other.zeros;
    flushed_to_zero += other.flushed_to_zero;
    made_subnormal += other.made_subnormal;
    saturated += other.saturated;
  }
  friend bool operator==(const BlockStatistics&, const BlockStatistics&) = default;
};

// Quantizes `values` (layout.element_count() of them) into one code per element (the element
// format's bits, or the MXINT8 byte) and one scale code per block (E8M0, or E4M3 for NVFP4,
// whose float32 tensor scale goes to `tensor_scale`; 1 for MX). Elements are rounded in
// ctx.rounding (stochastic: element i draws word ctx.stochastic_counter + i, and the counter
// advances by the element count) and always saturate; `rule` picks MX scales (NVFP4's scale
// has one rule, see block_format.hpp). The flags of every element conversion are ORed into
// ctx.flags. `statistics` (optional) has the tensor's statistics added to it, `outcomes` (empty, or
// one per block in scale order) each block's counts. Throws std::invalid_argument for spans of
// the wrong length or a layout whose block size differs from the format's. `threads` > 1 cuts a
// tensor of a million elements or more into bands of whole scale rows (half a million elements or
// more each) quantized side by side, 0 on every core the machine has:
// the same codes, scales, flags, statistics and outcomes as one thread.
void block_quantize(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                    std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float& tensor_scale,
                    Context& ctx, BlockStatistics* statistics = nullptr, std::span<BlockOutcome> outcomes = {}, int threads = 1);

// The amax NVFP4's tensor scale is made from (nvfp4_tensor_scale): the largest magnitude among
// the finite values, 0 where none is nonzero; NaNs and infinities are left out, their blocks
// being NaN blocks (block_format.hpp's nvfp4_amax_contribution says why). `threads` as
// block_quantize's.
float nvfp4_tensor_amax(std::span<const float> values, int threads = 1);

// The same under a tensor scale chosen beforehand rather than from the values' own amax: NVFP4's
// from a calibrated amax or an earlier step's (nvfp4_tensor_scale of it; one pass over the values
// where block_quantize makes two). Blocks the given scale lifts past E4M3's largest get scale 448
// and their elements saturate; blocks it makes small get E4M3 subnormal or zero scales. MX formats
// take 1. Throws std::invalid_argument for a tensor scale that is not a finite positive float32,
// or not 1 for an MX format.
void block_quantize_under_tensor_scale(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                                       std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float tensor_scale,
                                       Context& ctx, BlockStatistics* statistics = nullptr, std::span<BlockOutcome> outcomes = {},
                                       int threads = 1);

// The same through the scalar path alone (every element through round_pack and the element
// rules in block_format.hpp): block_quantize runs per-instruction-set kernels for MX blocks of
// the formats the branch-free cast knows, and must give exactly this (codes, scales, flags,
// statistics, outcomes); the tests hold them together.
void block_quantize_scalar(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                           std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float& tensor_scale,
                           Context& ctx, BlockStatistics* statistics = nullptr, std::span<BlockOutcome> outcomes = {});
void block_quantize_scalar_under_tensor_scale(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                                              std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float tensor_scale,
                                              Context& ctx, BlockStatistics* statistics = nullptr, std::span<BlockOutcome> outcomes = {});

// 2-D block scaling, as NVIDIA's NVFP4 training recipe quantizes weights (Transformer Engine's
// nvfp4_2d_quantization): the layout's blocks, scale codes and element codes as block_quantize
// makes them, but each block scaled by the amax of its square tile of block_size x block_size
// elements -- the block and the blocks beside it across the block axis (tiles at the matrix's
// right and bottom edges are cut short) -- so that the matrix blocked along its rows and blocked
// down its columns holds the same codes element for element (a product and its transposed
// product see the same values), and every block of a tile has the tile's scale code (as TE
// stores them). A NaN or infinity makes its whole tile NaN. Statistics count each block, their
// relative exponents taken from the tile's amax (the one that sets its scale). NVFP4's tensor
// scale from the values' finite amax, as block_quantize's. The scalar path, in bands of scale
// rows on up to `threads` threads (0: every core), the same bits and counts as one.
void block_quantize_square_tiles(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                                 std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float& tensor_scale, Context& ctx,
                                 BlockStatistics* statistics = nullptr, std::span<BlockOutcome> outcomes = {}, int threads = 1);

// The float32 values of quantized codes: element * scale (MX, exact but for results beyond
// float32's range, which become infinities), or element * block scale / tensor scale (NVFP4,
// one rounding); NaN throughout a block whose scale is NaN.
void block_dequantize(const BlockFormat& format, const BlockLayout& layout, std::span<const std::uint8_t> element_codes,
                      std::span<const std::uint8_t> scale_codes, float tensor_scale, std::span<float> values);

// How many element codes the format has: 2^width (256 for MXINT8's two's complement bytes). A
// code byte at or above it was not made for this format.
FPSCOPE_HD inline std::uint32_t block_element_code_count(const BlockFormat& format) {
  return format.elements == BlockFormat::Elements::int8 ? 256u : 1u << format.element.width();
}
// The value of one element code (below block_element_code_count) before its block scale is
// applied (float32, exact).
FPSCOPE_HD inline float block_element_value(const BlockFormat& format, std::uint32_t code) {
  if (format.elements == BlockFormat::Elements::int8) return mxint8_element_value(code);
  Context ignored;
  return to_float(format.element, code, ignored);
}
// The value of one scale code (E8M0 or E4M3) as float32, exact.
FPSCOPE_HD inline float block_scale_value(const BlockFormat& format, std::uint32_t scale_code) {
  if (format.scale == BlockFormat::Scale::e8m0) return e8m0::to_float(static_cast<std::uint8_t>(scale_code));
  std::uint32_t ignored = 0;  // the branch-free widening: convert's bits (bulk tests hold them together)
  return bits_float(cast_to_f32<formats::e4m3>(scale_code & 0xFFu, CastOptions{}, ignored));
}
// An element code that stands for "no value" in a block whose scale is NaN: the element
// format's NaN where it has one, else 0.
FPSCOPE_HD inline std::uint8_t block_nan_element_code(const BlockFormat& format) {
  if (format.elements == BlockFormat::Elements::floating && format.element.has_nan())
    return static_cast<std::uint8_t>(format.element.quiet_nan_bits());
  return 0;
}

// What quantizing one block gave: its scale code, whether that scale is NaN (a NaN or infinity in
// the block: every element then block_nan_element_code), its elements' counts and the flags raised.
struct QuantizedBlock {
  std::uint32_t scale_code = 0;
  bool nan_block = false;
  BlockOutcome outcome;
  std::uint8_t flags = 0;
};

// One block of `count` elements, element j at values[first + j * stride], whose largest
// magnitude's bits are `amax`: its scale by `rule` (MX) or from the tensor scale (NVFP4), and
// element j's code into codes[j], rounded in element_ctx's mode with saturation (element i of the
// tensor draws stochastic word first_random + i). The rule of block_quantize, which runs it for
// each block its vector kernels do not take; FPSCOPE_HD, so a CUDA kernel runs it per block.
FPSCOPE_HD inline QuantizedBlock quantize_one_block(const BlockFormat& format, ScaleRule rule, float tensor_scale, const Context& ctx,
                                                    std::uint64_t first_random, const float* values, std::size_t first, std::size_t stride,
                                                    std::size_t count, std::uint32_t amax, std::uint8_t* codes) {
  const bool nvfp4 = format.scale == BlockFormat::Scale::e4m3_nvfp4;
  QuantizedBlock block;
  int shared_exponent = 0;
  float factor = 0.0f;
  if (nvfp4) {
    block.scale_code = nvfp4_block_scale_code(amax, tensor_scale);
    block.nan_block = is_nan(formats::e4m3, block.scale_code);
    if (!block.nan_block) factor = nvfp4_element_factor(tensor_scale, block_scale_value(format, block.scale_code));
  } else {
    block.scale_code = mx_scale_code(format, rule, amax);
    block.nan_block = e8m0::is_nan(static_cast<std::uint8_t>(block.scale_code));
    if (!block.nan_block) shared_exponent = e8m0::exponent_of(static_cast<std::uint8_t>(block.scale_code));
  }
  if (block.nan_block) {
    for (std::size_t j = 0; j < count; ++j) codes[j] = block_nan_element_code(format);
    return block;
  }
  Context element_ctx = ctx;
  element_ctx.saturate = true;
  for (std::size_t j = 0; j < count; ++j) {
    const std::size_t i = first + j * stride;
    const float v = values[i];
    element_ctx.stochastic_counter = first_random + i;
    element_ctx.flags = 0;
    std::uint32_t code = 0;
    bool subnormal = false, zero = false;
    if (format.elements == BlockFormat::Elements::int8) {
      code = mxint8_element_code(v, shared_exponent, element_ctx);
      zero = code == 0;
    } else {
      code = nvfp4 ? nvfp4_element_code(v, factor, element_ctx) : mx_element_code(format.element, v, shared_exponent, element_ctx);
      subnormal = is_subnormal(format.element, code);
      zero = is_zero(format.element, code);
    }
    codes[j] = static_cast<std::uint8_t>(code);
    block.flags = static_cast<std::uint8_t>(block.flags | element_ctx.flags);
    if (magnitude_bits(v) != 0 && zero) ++block.outcome.flushed_to_zero;
    if (subnormal) ++block.outcome.made_subnormal;
    if ((element_ctx.flags & flag::overflow) != 0) ++block.outcome.saturated;
  }
  return block;
}

}  // namespace fpscope
