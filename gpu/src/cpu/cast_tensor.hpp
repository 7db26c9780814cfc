// The CPU backend's one cast of a training tensor: rounded in place into the run's format (nothing
// for fp32), with the values before the cast recorded where the step records, and what a block
// format would do to them where the run asks. The MLP and the GPT both cast through here.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "fpscope/core/bits.hpp"
#include "fpscope/core/bulk.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/gpu/cast_record.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/parallel.hpp"
#include "fpscope/gpu/sgd_update.hpp"
#include "activation_pass.hpp"
#include "recorded_blocks.hpp"

namespace fpscope {

// One tensor's cast -- rounded into f (none for fp32), the values before the cast added to the
// record's histogram and counts where there is a record -- made piece by piece as the pieces are
// computed (a product's slices, each as its thread finishes it), in any order on any threads. A
// piece draws its random words at its own offset (stochastic rounding draws word `counter +
// index` for each element), keeps its own histogram and counts and merges them under a lock;
// finish() raises the flags in the run's context. The same bits, counts, flags and counter as one
// pass over the whole tensor at the moment the PiecewiseCast was made: it takes the tensor's
// random words then, and the next cast's follow them.
class PiecewiseCast {
 public:
  PiecewiseCast(Format f, bool low_precision, Context& ctx, TensorRecord* record, std::size_t total)
      : f_(f), low_(low_precision), ctx_(ctx), start_(ctx), record_(record) {
    if (low_) ctx.stochastic_counter += total;
  }
  PiecewiseCast(const PiecewiseCast&) = delete;
  PiecewiseCast& operator=(const PiecewiseCast&) = delete;

  // The cast's output is `operand`'s values (whole, each piece's `out` inside them): each piece is
  // packed for the bf16 kernels as soon as it is rounded (ProductOperand's pieces). Only for casts
  // into bf16, whose outputs are the only ones those kernels take; before the first piece.
  void pack_for_products(ProductOperand* operand) {
    if (packs(operand) && operand->start_pieces()) operand_ = operand;
  }
  // The same where the operand's matrix does not hold the output yet (it is moved there before
  // the operand's first product): `count` values (ProductOperand::start_pieces(count)).
  void pack_for_products(ProductOperand* operand, std::size_t count) {
    if (packs(operand) && operand->start_pieces(count)) operand_ = operand;
  }
  // The same where `operand`'s products are all that will read the cast's output, `output` (the
  // operand's values): where nothing is recorded, each piece is cast straight into their bf16
  // bits, its float32 values left unwritten (ProductOperand::start_bits makes them from the bits
  // if anything asks for them).
  void make_for_products_only(ProductOperand* operand, std::span<float> output) {
    if (record_ != nullptr) return pack_for_products(operand);
    if (packs(operand) && operand->start_bits(output)) {
      operand_ = operand;
      bits_of_ = output.data();
    }
  }

  // The step sentinel's reading of this tensor (step_sentinel.hpp): each piece's largest magnitude
  // bits taken into *largest (before the values are rounded), recorded step or not.
  void watch(std::uint32_t* largest) { largest_ = largest; }

  // The values at `offset` in the tensor: `in` rounded into `out` (the same span, or one beside it).
  // Returns the piece's largest magnitude bits where the cast is watched (0 where not).
  std::uint32_t piece(std::span<const float> in, std::span<float> out, std::size_t offset) {
    std::uint32_t top = 0;
    // A recorded piece's reading comes from its histogram's pass, an unrecorded one rounded in
    // float32 from its rounding's pass (round_f32, round_f32_with_bits); any other piece reads its
    // values once more.
    const bool histogram_reads = record_ != nullptr && bits_of_ == nullptr;
    const bool rounding_reads = record_ == nullptr && low_ && bits_of_ == nullptr;
    if (largest_ != nullptr && !histogram_reads && !rounding_reads) top = largest_magnitude_bits(in);  // bulk.hpp
    std::uint32_t* const reading = largest_ != nullptr && (histogram_reads || rounding_reads) ? &top : nullptr;
    if (!low_) {  // float32: copied, and recorded where there is a record
      if (in.data() != out.data()) std::copy(in.begin(), in.end(), out.begin());
      if (record_ == nullptr) {
        if (largest_ != nullptr) {
          const std::lock_guard lock(mutex_);
          *largest_ = std::max(*largest_, top);
        }
        return top;
      }
    }
    Context context = start_;
    context.stochastic_counter = start_.stochastic_counter + offset;
    context.flags = 0;
    ExponentHistogram histogram;
    CastCounts counts;
    if (!low_) {
      histogram.add(in, reading);
    } else if (bits_of_ != nullptr) {
      const auto at = static_cast<std::size_t>(out.data() - bits_of_);
      f32_to_bits(f_, in, operand_->piece_bits(at, out.size()), context);
      operand_->scan_bits(at, out.size());
    } else if (operand_ != nullptr) {  // packed as it is rounded: the values and their bf16 bits in one pass
      const std::span<std::uint16_t> bits = operand_->piece_bits(offset, out.size());
      if (record_ == nullptr) round_f32_with_bits(f_, in, out, bits, context, false, reading);
      else cast_and_record(f_, in, out, context, histogram, counts, reading, bits);
      operand_->scan_bits(offset, out.size());
    } else if (record_ == nullptr) {
      round_f32(f_, in, out, context, reading);
    } else {
      cast_and_record(f_, in, out, context, histogram, counts, reading);
    }
    const std::lock_guard lock(mutex_);
    flags_ |= context.flags;
    if (largest_ != nullptr) *largest_ = std::max(*largest_, top);
    if (record_ == nullptr) return top;
    record_->histogram.merge(histogram);
    total_.flushed_to_zero += counts.flushed_to_zero;
    total_.made_subnormal += counts.made_subnormal;
    total_.overflowed += counts.overflowed;
    return top;
  }
  std::uint32_t piece(std::span<float> values, std::size_t offset) { return piece(values, values, offset); }

  // After the last piece, on the thread that made it.
  void finish() {
    if (operand_ != nullptr) operand_->finish_pieces();
    ctx_.raise(flags_);
    if (record_ != nullptr && low_) record_->cast = total_;
  }

 private:
  // Whether the output goes to `operand`'s products packed at all: casts into bf16 alone.
  bool packs(const ProductOperand* operand) const { return operand != nullptr && low_ && f_ == formats::bf16; }

  Format f_;
  bool low_;
  Context& ctx_;
  Context start_;
  TensorRecord* record_;
  std::uint32_t* largest_ = nullptr;
  ProductOperand* operand_ = nullptr;
  const float* bits_of_ = nullptr;  // the output, where only its bits are made (make_for_products_only)
  std::mutex mutex_;
  std::uint8_t flags_ = 0;
  CastCounts total_;
};

// Who reads a cast's output: anyone (its float32 values are written), or only the products of the
// ProductOperand made from it (where the cast can, it writes only their bf16 bits:
// PiecewiseCast::make_for_products_only).
enum class OutputReaders : std::uint8_t { anyone, products_only };

// Rounds `in` into f (none for fp32: copied) as `out` (the same span, or one beside it), recording
// where there is a record: a PiecewiseCast in slices of 64K values on the element threads
// (parallel.hpp); `out` packed for the products as it goes where it is `operand`'s values.
// `largest`, where given, takes the step sentinel's reading (PiecewiseCast::watch).
inline void cast_values(Format f, bool low_precision, std::span<const float> in, std::span<float> out, Context& ctx, TensorRecord* record,
                        ProductOperand* operand = nullptr, OutputReaders readers = OutputReaders::anyone, std::uint32_t* largest = nullptr) {
  constexpr std::size_t slice = 65536;
  PiecewiseCast cast(f, low_precision, ctx, record, in.size());
  cast.watch(largest);
  if (readers == OutputReaders::products_only) cast.make_for_products_only(operand, out);
  else cast.pack_for_products(operand);
  parallel_for((in.size() + slice - 1) / slice, 1, [&](std::size_t first, std::size_t last) {
    for (std::size_t s = first; s < last; ++s) {
      const std::size_t start = s * slice, n = std::min(slice, in.size() - start);
      cast.piece(in.subspan(start, n), out.subspan(start, n), start);
    }
  });
  cast.finish();
}

// Rounds a matrix in place into f (nothing for fp32), recording the values before the cast (and
// what a block format would do to them, where the run asks). Where `operand` is given it refers to
// `m`, which is packed for the products as it is rounded; where `largest` is, it takes the step
// sentinel's reading.
template <typename Matrix>
inline void cast(Format f, bool low_precision, Matrix& m, Context& ctx, TensorRecord* record,
                 const std::optional<BlockRecording>& blocks = std::nullopt, FeatureAxis features = FeatureAxis::second,
                 ProductOperand* operand = nullptr, std::uint32_t* largest = nullptr) {
  if (record != nullptr && blocks) record->blocks = block_record(*blocks, m, features);
  if (!low_precision && record == nullptr && largest == nullptr) return;
  const std::span<float> values(m.data(), static_cast<std::size_t>(m.size()));
  cast_values(f, low_precision, values, values, ctx, record, operand, OutputReaders::anyone, largest);
}

// The same cast of `from` made into `copy` (resized to it), `from` left as it was: one pass over
// the values on the threads where a copy and then a cast in place would be two, the copy serial.
// Where `operand` is given it refers to `copy`, which is packed for the products as it is made
// (and, where they are its only `readers`, may be left unwritten but for their bits).
template <typename Matrix>
inline void cast_copy(Format f, bool low_precision, const Matrix& from, Matrix& copy, Context& ctx, TensorRecord* record,
                      const std::optional<BlockRecording>& blocks = std::nullopt, FeatureAxis features = FeatureAxis::second,
                      ProductOperand* operand = nullptr, OutputReaders readers = OutputReaders::anyone, std::uint32_t* largest = nullptr) {
  if (record != nullptr && blocks) record->blocks = block_record(*blocks, from, features);
  copy.resize(from.rows(), from.cols());
  const auto n = static_cast<std::size_t>(from.size());
  cast_values(f, low_precision, std::span<const float>(from.data(), n), std::span<float>(copy.data(), n), ctx, record, operand, readers, largest);
}

// The magnitude bits of f's largest finite value as a float32: no value at or below it rounds to an
// infinity in any mode, so a cast whose input's reading (largest_magnitude_bits) is at most this
// made no infinity or NaN; a reading above it asks the output (has_non_finite).
inline std::uint32_t largest_finite_magnitude_bits(Format f) { return magnitude_bits(static_cast<float>(largest_finite_value(f))); }

// Whether any gradient in `values` is infinite or NaN (sgd_update.hpp's gradient_non_finite, the
// rule; here as a branch-free loop the compiler vectorises).
inline bool has_non_finite(std::span<const float> values) {
  std::size_t count = 0;  // a count, not a bool: GCC vectorises the sum
  for (const float v : values) count += gradient_non_finite(v) ? 1 : 0;
  return count != 0;
}

// The same over a matrix, on the threads.
template <typename Matrix>
bool any_non_finite(const Matrix& m) {
  const std::span<const float> values(m.data(), static_cast<std::size_t>(m.size()));
  std::atomic<bool> found{false};
  parallel_for(values.size(), 65536, [&](std::size_t begin, std::size_t end) {
    if (has_non_finite(values.subspan(begin, end - begin))) found = true;
  });
  return found;
}

}  // namespace fpscope
