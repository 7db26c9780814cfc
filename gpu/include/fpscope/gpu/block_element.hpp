// One block of a block-scaled recipe's operand (gemm_recipe.hpp's block_scaled_operand), as
// FPSCOPE_HD code: the CUDA kernel runs it per thread and the host twin per block. The block is
// quantized by block_quantize's own rule (quantize_one_block), dequantized by block_dequantize's
// (dequantized_element), and its statistics -- BlockStatistics' fields -- added to counters, so
// that both agree with the CPU backend bit for bit and count for count.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fpscope/core/block_scaling.hpp"

namespace fpscope {

// Where each of BlockStatistics' fields is counted in a device array of block_counter_count words.
struct BlockCounter {
  static constexpr std::size_t scale_codes = 0;  // 256 of them
  static constexpr std::size_t relative_exponents = 256;
  static constexpr std::size_t zeros = relative_exponents + BlockStatistics::relative_exponent_bins;
  static constexpr std::size_t elements = zeros + 1, blocks = zeros + 2, nan_blocks = zeros + 3, flushed_to_zero = zeros + 4,
                               made_subnormal = zeros + 5, saturated = zeros + 6, count = zeros + 7;
};
inline constexpr std::size_t block_counter_count = BlockCounter::count;
// The most elements a device block holds: the recipes' formats' blocks (32 for MX, 16 for NVFP4).
inline constexpr int device_block_size_limit = 32;

// Block `index` (row-major over the layout's scale array) of `in`, quantized in ctx's rounding mode
// (element i of the tensor draws word ctx.stochastic_counter + i) and dequantized into `out` (null:
// not written);
// `add(counter, amount)` adds to a BlockCounter place. Precondition: layout.block_size <=
// device_block_size_limit.
template <typename Add>
FPSCOPE_HD inline void quantize_dequantize_block(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, float tensor_scale,
                                                 const Context& ctx, const float* in, float* out, std::size_t index, const Add& add) {
  const BlockSpan span = block_span(layout, index / layout.scale_cols(), index % layout.scale_cols());
  std::uint32_t amax = 0;
  for (std::size_t j = 0; j < span.count; ++j) {
    const std::uint32_t m = magnitude_bits(in[span.first + j * span.stride]);
    amax = m > amax ? m : amax;
  }
  std::uint8_t codes[device_block_size_limit];
  const QuantizedBlock block = quantize_one_block(format, rule, tensor_scale, ctx, ctx.stochastic_counter, in, span.first, span.stride, span.count, amax, codes);
  const bool nvfp4 = format.scale == BlockFormat::Scale::e4m3_nvfp4;
  const float scale = block_scale_value(format, block.scale_code);
  const int amax_exponent = amax == 0 ? 0 : floor_log2_of_magnitude(amax);
  std::uint64_t zeros = 0;
  for (std::size_t j = 0; j < span.count; ++j) {
    const std::size_t i = span.first + j * span.stride;
    const std::uint32_t magnitude = magnitude_bits(in[i]);  // read before out[i], which may be in[i], is written
    if (out != nullptr) out[i] = dequantized_element(nvfp4, block_element_value(format, codes[j]), scale, tensor_scale);
    if (block.nan_block) continue;  // a NaN block's elements are counted by their block alone (block_quantize)
    if (magnitude == 0) ++zeros;
    else add(BlockCounter::relative_exponents + static_cast<std::size_t>(amax_exponent - floor_log2_of_magnitude(magnitude)), 1);
  }
  add(BlockCounter::scale_codes + (block.scale_code & 0xFFu), 1);
  add(BlockCounter::blocks, 1);
  add(BlockCounter::elements, span.count);
  if (block.nan_block) add(BlockCounter::nan_blocks, 1);
  if (zeros != 0) add(BlockCounter::zeros, zeros);
  if (block.outcome.flushed_to_zero != 0) add(BlockCounter::flushed_to_zero, block.outcome.flushed_to_zero);
  if (block.outcome.made_subnormal != 0) add(BlockCounter::made_subnormal, block.outcome.made_subnormal);
  if (block.outcome.saturated != 0) add(BlockCounter::saturated, block.outcome.saturated);
}

// The counters added into statistics.
inline void add_block_counters(const unsigned long long* counters, BlockStatistics& statistics) {
  for (std::size_t c = 0; c < 256; ++c) statistics.scale_codes[c] += counters[BlockCounter::scale_codes + c];
  for (std::size_t b = 0; b < statistics.relative_exponents.size(); ++b) statistics.relative_exponents[b] += counters[BlockCounter::relative_exponents + b];
  statistics.zeros += counters[BlockCounter::zeros];
  statistics.elements += counters[BlockCounter::elements];
  statistics.blocks += counters[BlockCounter::blocks];
  statistics.nan_blocks += counters[BlockCounter::nan_blocks];
  statistics.flushed_to_zero += counters[BlockCounter::flushed_to_zero];
  statistics.made_subnormal += counters[BlockCounter::made_subnormal];
  statistics.saturated += counters[BlockCounter::saturated];
}

}  // namespace fpscope
