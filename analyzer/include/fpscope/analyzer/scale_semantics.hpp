// The one scale semantics, for analyze, export and the app: a recorded histogram is first brought
// back to scale 1 with the scale its values carry (TensorRecord::scale); a hypothetical loss scale
// 2^s then multiplies only what a loss scale multiplies -- activation gradients, and weight
// gradients before unscaling. Activations and weights never move. Loss-scale advice comes from
// gradients only.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fpscope/analyzer/range_analysis.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/snapshot/snapshot.hpp"

namespace fpscope {

// Activation and weight gradients (is_gradient, snapshot.hpp), and tensors of unknown kind (a .npy
// file: the user who asks what a scale does to it says what it is).
bool loss_scale_multiplies(TensorKind kind);

// The nearest power of two to a recorded scale, and whether the scale was exactly that.
struct ScaleLog2 {
  int log2 = 0;
  bool exact = true;
};
ScaleLog2 scale_log2_of(double scale);

// One tensor over a run: its histograms summed per recorded scale. A binade histogram can only
// move by whole binades, and steps recorded at different scales sit at different binades, so they
// are kept apart and each is shifted exactly, never re-binned.
struct TensorSeries {
  std::string name;
  TensorKind kind = TensorKind::other;
  Capture captured = Capture::before_cast;
  std::vector<std::pair<int, ExponentHistogram>> parts;  // (log2 of the recorded scale, summed counts)
  bool scale_inexact = false;  // a recorded scale was not a power of two and was rounded to one
  std::uint64_t steps = 0;     // recorded steps summed
};

// The series of a run's snapshots (a tensor is its name and kind), in first-seen order. Throws
// std::overflow_error naming the tensor when its counts pass 2^64 - 1.
std::vector<TensorSeries> tensor_series(std::span<const Snapshot> snapshots);
// The same over snapshots held elsewhere (the app's store), without copying them.
std::vector<TensorSeries> tensor_series(std::span<const Snapshot* const> snapshots);
// One histogram of known scale as a series (a .npy file, a single step).
TensorSeries single_series(std::string name, TensorKind kind, const ExponentHistogram& histogram, double scale = 1.0,
                           Capture captured = Capture::before_cast);

// How far a part recorded at 2^recorded_log2 moves: to a hypothetical loss scale 2^s where the
// kind is scaled (to scale 1 for the rest); nullopt leaves every part as recorded.
int shift_of_part(TensorKind kind, int recorded_log2, std::optional<int> loss_scale_log2);

// The series' values in `format` at a hypothetical loss scale (nullopt: as recorded).
RangeReport analyze_series(const TensorSeries& series, Format format, std::optional<int> loss_scale_log2);

// The largest and smallest nonzero binades of the values at scale 1 (they may lie outside
// float32's range: a gradient recorded at 2^24 in binade -140 is at -164); nullopt without any.
std::optional<int> highest_binade_at_scale_one(const TensorSeries& series);
std::optional<int> lowest_binade_at_scale_one(const TensorSeries& series);

// The series' histogram with every part moved as shift_of_part says, clamped into float32's
// binades (counts pushed past an end are added to the end binade: `clamped` says how many).
struct ShiftedHistogram {
  ExponentHistogram histogram;
  std::uint64_t clamped = 0;
};
ShiftedHistogram shifted_histogram(const TensorSeries& series, std::optional<int> loss_scale_log2);
// One histogram moved by `shift` binades, clamped the same way.
ShiftedHistogram shift_histogram(const ExponentHistogram& histogram, int shift);

// The loss scale for a format, from the gradients among `series` (Micikevicius et al. 2018,
// section 3.2): the largest 2^k that keeps the largest gradient `margin` binades below the
// overflow threshold, never more than float32 can hold (2^127, and no scaled gradient past
// float32's range). "No scaling needed" when at 2^0 no gradient value flushes, turns subnormal
// or overflows (bf16 with ordinary gradients), rather than an absurd 2^140.
// Where the series hold fp32 shadows of gradients (is_shadow_tensor), the advice comes from those
// alone: a recorded gradient lacks what later layers flushed, its shadow does not.
struct LossScaleAdvice {
  enum class Kind : std::uint8_t { scale, no_scaling_needed, no_gradients };
  Kind kind = Kind::no_gradients;
  int scale_log2 = 0;        // the scale to use (0 for no_scaling_needed)
  std::string decided_by;    // "fc1 weight_gradient": the tensor whose largest values set it
  bool from_shadow = false;  // decided from fp32 shadows
};
LossScaleAdvice recommend_loss_scale(std::span<const TensorSeries> series, Format format, int margin_binades = 1);
// The same for one series (its own advice, as if it were the only gradient).
LossScaleAdvice recommend_loss_scale(const TensorSeries& series, Format format, int margin_binades = 1);

}  // namespace fpscope
