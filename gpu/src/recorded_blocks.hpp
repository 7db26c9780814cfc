// What --record-blocks records, said once for both backends: the axis a tensor's features lie
// along (the axis block formats block along), the layout a matrix is blocked in, and the GPT's
// packed attention triangles blocked along each query's keys. The CPU backend computes the records
// on the host; the device step lays its tensors out the same way and checks its counts against them.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "fpscope/core/block_scaling.hpp"
#include "fpscope/gpu/gpt_element.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/parallel.hpp"

namespace fpscope {

// Which axis of an Eigen matrix a tensor's features lie along, the axis block formats block along:
// the second for the MLP's batch x features activations and every out x in weight (the reduction
// axis of the forward GEMM), the first for the GPT's features x tokens activations.
enum class FeatureAxis : std::uint8_t { second, first };

// A GPT's weight matrix (out x in) blocks along its inputs, a vector (a LayerNorm gain) along itself.
inline FeatureAxis weight_features(std::size_t cols) { return cols == 1 ? FeatureAxis::first : FeatureAxis::second; }
template <typename Matrix>
FeatureAxis weight_features(const Matrix& m) {
  return weight_features(static_cast<std::size_t>(m.cols()));
}

// What `blocks` would do to the values of an Eigen matrix (rows x cols, column-major), blocked
// along its feature axis. Column-major R x C is row-major C x R: blocks along the second axis run
// down that row-major matrix's columns, blocks along the first along its rows.
inline BlockLayout recorded_block_layout(const BlockRecording& blocks, std::size_t rows, std::size_t cols, FeatureAxis features) {
  return BlockLayout{cols, rows, features == FeatureAxis::second ? BlockAxis::cols : BlockAxis::rows, blocks.format.block_size};
}
template <typename Matrix>
BlockRecord block_record(const BlockRecording& blocks, const Matrix& m, FeatureAxis features = FeatureAxis::second) {
  const std::span<const float> values(m.data(), static_cast<std::size_t>(m.size()));
  const BlockLayout layout = recorded_block_layout(blocks, static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols()), features);
  std::vector<std::uint8_t> codes(values.size()), scales(layout.block_count());
  BlockRecord record{blocks.format, blocks.rule, {}};
  float tensor_scale = 1;
  Context nearest_even;  // its own context: recording never moves the run's stochastic stream
  block_quantize(blocks.format, blocks.rule, layout, values, codes, scales, tensor_scale, nearest_even, &record.statistics);
  return record;
}

// Packed causal attention triangles (gpt_element.hpp: per sequence and head, query j's values over
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
        std::copy_n(packed.data() + t * P + triangle_start(static_cast<int>(j)), j + 1, padded.data() + (t * T + j) * T);
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
