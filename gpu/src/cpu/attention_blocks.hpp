// Block statistics of the GPT's packed attention triangles (scores and probabilities, and their
// gradients): what --record-blocks records for them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "fpscope/core/block_scaling.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/parallel.hpp"
#include "gpt_pass.hpp"

namespace fpscope {

// Packed causal attention triangles (gpt_pass.hpp: per sequence and head, query j's values over
// keys 0 .. j, T = `context` queries) are blocked along each query's keys, its last block short:
// laid out as T x T rows with the keys after each query as zeros (triangle_padded_layout, one row
// per query, its keys contiguous) and blocked in one pass; then the padding is taken back out
// exactly (take_out_triangle_padding): its zeros from the zeros and elements, and the blocks that
// hold nothing else (every one gets the scale code an all-zero block gets, as one quantized alone
// says) from the blocks and that code's count (no zero is counted in a block with a NaN scale).
// A zero changes no block's amax, scale or element codes, and NVFP4's tensor amax likewise. The
// CPU backend pads on the host (triangle_block_record), the CUDA backend on its device.
inline BlockLayout triangle_padded_layout(const BlockRecording& blocks, std::size_t context, std::size_t triangles) {
  return BlockLayout{triangles * context, context, BlockAxis::rows, blocks.format.block_size};
}

// The padding taken back out of `statistics`, made of triangle_padded_layout's tensor. `scales`:
// its blocks' scale codes, needed only where statistics.nan_blocks is not 0 (empty otherwise).
inline void take_out_triangle_padding(const BlockRecording& blocks, BlockStatistics& statistics, std::size_t context, std::size_t triangles,
                                      std::span<const std::uint8_t> scales) {
  const std::size_t T = context, P = T * (T + 1) / 2, block = static_cast<std::size_t>(blocks.format.block_size);
  if (statistics.nan_blocks != 0 && scales.size() != triangles * T * ((T + block - 1) / block))
    throw std::logic_error("take_out_triangle_padding: a block's scale is NaN, and the scale codes are not given");
  // The zero block's scale code.
  const std::vector<float> zeros(block, 0.0f);
  std::vector<std::uint8_t> zero_codes(block), zero_scale(1);
  float zero_tensor_scale = 1;
  Context zero_ctx;
  block_quantize(blocks.format, blocks.rule, {1, block, BlockAxis::rows, blocks.format.block_size}, zeros, zero_codes, zero_scale, zero_tensor_scale,
                 zero_ctx);
  // Query j's row holds (j + 1 + block - 1) / block blocks of its own; the rest of the row's
  // (T + block - 1) / block are padding alone.
  const std::size_t row_blocks = (T + block - 1) / block;
  std::uint64_t padding_blocks = 0;
  for (std::size_t j = 0; j < T; ++j) padding_blocks += row_blocks - (j + block) / block;
  const std::uint64_t padding_zeros = static_cast<std::uint64_t>(triangles) * (T * T - P);
  padding_blocks *= triangles;
  // A block with a NaN scale counts its elements but no zeros: the padding in one is no zero to
  // take back.
  std::uint64_t padding_in_nan_blocks = 0;
  if (statistics.nan_blocks != 0)
    for (std::size_t row = 0; row < triangles * T; ++row)
      for (std::size_t k = 0; k < row_blocks; ++k)
        if (std::isnan(block_scale_value(blocks.format, scales[row * row_blocks + k]))) {
          const std::size_t keys = row % T + 1, start = k * block, end = std::min(T, start + block);
          padding_in_nan_blocks += end - std::max(start, std::min(end, keys));
        }
  statistics.elements -= padding_zeros;
  statistics.zeros -= padding_zeros - padding_in_nan_blocks;
  statistics.blocks -= padding_blocks;
  statistics.scale_codes[zero_scale[0]] -= padding_blocks;
}

// What `blocks` would do to the packed triangles, on the host.
inline BlockRecord triangle_block_record(const BlockRecording& blocks, std::span<const float> packed, int context) {
  const auto T = static_cast<std::size_t>(context), P = T * (T + 1) / 2, triangles = packed.size() / P;
  std::vector<float> padded(triangles * T * T, 0.0f);
  parallel_for(triangles, 1, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t)
      for (std::size_t j = 0; j < T; ++j)
        std::copy_n(packed.data() + t * P + gpt_pass::triangle_row(static_cast<int>(j)), j + 1, padded.data() + (t * T + j) * T);
  });
  const BlockLayout layout = triangle_padded_layout(blocks, T, triangles);
  std::vector<std::uint8_t> codes(padded.size()), scales(layout.block_count());
  BlockRecord record{blocks.format, blocks.rule, {}};
  float tensor_scale = 1;
  Context nearest_even;  // its own context: recording never moves the run's stochastic stream
  block_quantize(blocks.format, blocks.rule, layout, padded, codes, scales, tensor_scale, nearest_even, &record.statistics);
  take_out_triangle_padding(blocks, record.statistics, T, triangles, scales);
  return record;
}

}  // namespace fpscope
