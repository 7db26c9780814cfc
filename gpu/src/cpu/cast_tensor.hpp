// The CPU backend's one cast of a training tensor: rounded in place into the run's format (nothing
// for fp32), with the values before the cast recorded where the step records, and what a block
// format would do to them where the run asks. The MLP and the GPT both cast through here.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <optional>
#include <span>
#include <vector>

#include "fpscope/core/bulk.hpp"
#include "fpscope/gpu/cast_record.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/parallel.hpp"
#include "fpscope/gpu/sgd_update.hpp"

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

// Rounds `in` into f (none for fp32: copied) as `out` (the same span, or one beside it) and adds
// the values before the cast to the record's histogram and counts where there is a record -- split
// over the element threads (parallel.hpp) in slices of 64K values, each with its own copy of the
// context starting at its slice's random word (stochastic rounding draws word `counter + index`
// for each element), its own histogram and counts, merged in order: the same bits, counts, flags
// and counter as one pass.
inline void cast_values(Format f, bool low_precision, std::span<const float> in, std::span<float> out, Context& ctx, TensorRecord* record) {
  constexpr std::size_t slice = 65536;
  const std::size_t slices = (in.size() + slice - 1) / slice;
  const bool in_place = in.data() == out.data();
  std::vector<Context> contexts(slices, ctx);
  std::vector<ExponentHistogram> histograms(record != nullptr ? slices : 0);
  std::vector<CastCounts> counts(record != nullptr ? slices : 0);
  parallel_for(slices, 1, [&](std::size_t first, std::size_t last) {
    for (std::size_t s = first; s < last; ++s) {
      const std::size_t start = s * slice, n = std::min(slice, in.size() - start);
      const std::span<const float> from = in.subspan(start, n);
      const std::span<float> to = out.subspan(start, n);
      contexts[s].stochastic_counter = ctx.stochastic_counter + start;
      if (!low_precision) {
        if (record != nullptr) histograms[s].add(from);
        if (!in_place) std::copy(from.begin(), from.end(), to.begin());
      } else if (record == nullptr) {
        round_f32(f, from, to, contexts[s]);
      } else {
        cast_and_record(f, from, to, contexts[s], histograms[s], counts[s]);
      }
    }
  });
  if (low_precision) {
    for (const Context& c : contexts) ctx.raise(c.flags);
    ctx.stochastic_counter += in.size();
  }
  if (record == nullptr) return;
  CastCounts total;
  for (std::size_t s = 0; s < slices; ++s) {
    record->histogram.merge(histograms[s]);
    total.flushed_to_zero += counts[s].flushed_to_zero;
    total.made_subnormal += counts[s].made_subnormal;
    total.overflowed += counts[s].overflowed;
  }
  if (low_precision) record->cast = total;
}

// Rounds a matrix in place into f (nothing for fp32), recording the values before the cast (and
// what a block format would do to them, where the run asks).
template <typename Matrix>
inline void cast(Format f, bool low_precision, Matrix& m, Context& ctx, TensorRecord* record,
                 const std::optional<BlockRecording>& blocks = std::nullopt, FeatureAxis features = FeatureAxis::second) {
  if (record != nullptr && blocks) record->blocks = block_record(*blocks, m, features);
  if (!low_precision && record == nullptr) return;
  const std::span<float> values(m.data(), static_cast<std::size_t>(m.size()));
  cast_values(f, low_precision, values, values, ctx, record);
}

// The same cast of `from` made into `copy` (resized to it), `from` left as it was: one pass over
// the values on the threads where a copy and then a cast in place would be two, the copy serial.
template <typename Matrix>
inline void cast_copy(Format f, bool low_precision, const Matrix& from, Matrix& copy, Context& ctx, TensorRecord* record,
                      const std::optional<BlockRecording>& blocks = std::nullopt, FeatureAxis features = FeatureAxis::second) {
  if (record != nullptr && blocks) record->blocks = block_record(*blocks, from, features);
  copy.resize(from.rows(), from.cols());
  const auto n = static_cast<std::size_t>(from.size());
  cast_values(f, low_precision, std::span<const float>(from.data(), n), std::span<float>(copy.data(), n), ctx, record);
}

// Whether any gradient of a matrix is infinite or NaN (sgd_update.hpp's gradient_non_finite, the
// rule; here as a branch-free pass the compiler vectorises, on the threads).
template <typename Matrix>
bool any_non_finite(const Matrix& m) {
  const float* values = m.data();
  const std::size_t count = static_cast<std::size_t>(m.size());
  std::atomic<bool> found{false};
  parallel_for(count, 65536, [&](std::size_t begin, std::size_t end) {
    std::size_t count = 0;  // a count, not a bool: GCC vectorises the sum
    for (std::size_t i = begin; i < end; ++i) count += gradient_non_finite(values[i]) ? 1 : 0;
    if (count != 0) found = true;
  });
  return found;
}

}  // namespace fpscope
