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

  std::size_t element_count() const { return rows * cols; }
  // The scale array's shape: rows x ceil(cols / block) for axis rows, ceil(rows / block) x cols for cols.
  std::size_t scale_rows() const { return axis == BlockAxis::rows ? rows : (rows + block_size - 1) / block_size; }
  std::size_t scale_cols() const { return axis == BlockAxis::rows ? (cols + block_size - 1) / block_size : cols; }
  std::size_t block_count() const { return scale_rows() * scale_cols(); }
};

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

// The same through the scalar path alone (every element through round_pack and the element
// rules in block_format.hpp): block_quantize runs per-instruction-set kernels for MX blocks of
// the formats the branch-free cast knows, and must give exactly this (codes, scales, flags,
// statistics, outcomes); the tests hold them together.
void block_quantize_scalar(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                           std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float& tensor_scale,
                           Context& ctx, BlockStatistics* statistics = nullptr, std::span<BlockOutcome> outcomes = {});

// The float32 values of quantized codes: element * scale (MX, exact but for results beyond
// float32's range, which become infinities), or element * block scale / tensor scale (NVFP4,
// one rounding); NaN throughout a block whose scale is NaN.
void block_dequantize(const BlockFormat& format, const BlockLayout& layout, std::span<const std::uint8_t> element_codes,
                      std::span<const std::uint8_t> scale_codes, float tensor_scale, std::span<float> values);

// The value of one element code before its block scale is applied (float32, exact).
float block_element_value(const BlockFormat& format, std::uint32_t code);
// The value of one scale code (E8M0 or E4M3) as float32, exact.
float block_scale_value(const BlockFormat& format, std::uint32_t scale_code);

}  // namespace fpscope
