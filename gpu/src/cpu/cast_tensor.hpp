// The CPU backend's one cast of a training tensor: rounded in place into the run's format (nothing
// for fp32), with the values before the cast recorded where the step records, and what a block
// format would do to them where the run asks. The MLP and the GPT both cast through here.
#pragma once

#include <Eigen/Core>
#include <optional>
#include <span>
#include <vector>

#include "fpscope/core/bulk.hpp"
#include "fpscope/gpu/cast_record.hpp"
#include "fpscope/gpu/mlp.hpp"

namespace fpscope {

// Which axis of an Eigen matrix a tensor's features lie along, the axis block formats block along:
// the second for the MLP's batch x features activations and every out x in weight (the reduction
// axis of the forward GEMM), the first for the GPT's features x tokens activations.
enum class FeatureAxis : std::uint8_t { second, first };

// What `blocks` would do to the values of an Eigen matrix (rows x cols, column-major), blocked
// along its feature axis. Column-major R x C is row-major C x R: blocks along the second axis run
// down that row-major matrix's columns, blocks along the first along its rows.
template <typename Matrix>
BlockRecord block_record(const BlockRecording& blocks, const Matrix& m, FeatureAxis features = FeatureAxis::second) {
  const std::span<const float> values(m.data(), static_cast<std::size_t>(m.size()));
  const BlockLayout layout{static_cast<std::size_t>(m.cols()), static_cast<std::size_t>(m.rows()),
                           features == FeatureAxis::second ? BlockAxis::cols : BlockAxis::rows, blocks.format.block_size};
  std::vector<std::uint8_t> codes(values.size()), scales(layout.block_count());
  BlockRecord record{blocks.format, blocks.rule, {}};
  float tensor_scale = 1;
  Context nearest_even;  // its own context: recording never moves the run's stochastic stream
  block_quantize(blocks.format, blocks.rule, layout, values, codes, scales, tensor_scale, nearest_even, &record.statistics);
  return record;
}

// Rounds a matrix in place into f (nothing for fp32), recording the values before the cast (and
// what a block format would do to them, where the run asks).
template <typename Matrix>
inline void cast(Format f, bool low_precision, Matrix& m, Context& ctx, TensorRecord* record,
                 const std::optional<BlockRecording>& blocks = std::nullopt, FeatureAxis features = FeatureAxis::second) {
  const std::span<float> values(m.data(), static_cast<std::size_t>(m.size()));
  if (record != nullptr && blocks) record->blocks = block_record(*blocks, m, features);
  if (!low_precision) {
    if (record != nullptr) record->histogram.add(values);
    return;
  }
  if (record == nullptr) {
    round_f32(f, values, values, ctx);
    return;
  }
  CastCounts counts;
  cast_and_record(f, values, values, ctx, record->histogram, counts);
  record->cast = counts;
}

}  // namespace fpscope
