// Snapshot: one recorded step of one run -- the unit the engine publishes and the analyzer reads.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/snapshot/boxed_optional.hpp"

namespace fpscope {

enum class TensorKind : std::uint8_t { activation, activation_gradient, weight, weight_gradient, other };

// The gradients: what a training step's loss scale multiplies.
constexpr bool is_gradient(TensorKind kind) { return kind == TensorKind::activation_gradient || kind == TensorKind::weight_gradient; }
// The factor a training step's tensor carries when it is read before unscaling: a gradient the
// step's loss scale, anything else none. The engine records every tensor so, and version-1 run
// logs are read so (run_log.hpp); the analyzer's scale semantics undo it (scale_semantics.hpp).
constexpr double scale_carried_before_unscaling(TensorKind kind, double loss_scale) { return is_gradient(kind) ? loss_scale : 1.0; }

// A tensor's fp32 shadow -- the same step in float32 without casts, whose values nothing flushed --
// is recorded beside it under its name and this suffix, by the engine (train --shadow) and the
// PyTorch bridge's shadow mode alike: "fc1 (fp32 shadow)".
inline constexpr std::string_view shadow_suffix = " (fp32 shadow)";
inline std::string shadow_tensor_name(std::string_view name) { return std::string(name) + std::string(shadow_suffix); }
constexpr bool is_shadow_tensor(std::string_view name) { return name.ends_with(shadow_suffix); }

// "activation", "activation_gradient", "weight", "weight_gradient", "other".
std::string_view tensor_kind_name(TensorKind kind);
// Throws std::invalid_argument naming the text when it is none of the names above.
TensorKind parse_tensor_kind(std::string_view name);

// Where a tensor's values were taken. before_cast: the float32 values a cast is about to round, so
// what it flushes or overflows shows in the histogram. as_stored: values already held in the
// low-precision format, so what a cast flushed is among the zeros and cannot be told apart.
enum class Capture : std::uint8_t { before_cast, as_stored };
std::string_view capture_name(Capture capture);  // "before_cast", "as_stored"
// Throws std::invalid_argument naming the text when it is neither.
Capture parse_capture(std::string_view name);

// Exact counts of what the cast of a tensor into its low-precision format did.
struct CastCounts {
  std::uint64_t flushed_to_zero = 0;  // nonzero fp32 values that became zero
  std::uint64_t made_subnormal = 0;   // values that landed in the subnormal range
  std::uint64_t overflowed = 0;       // finite values that became infinite (or NaN, or saturated)
  friend bool operator==(const CastCounts&, const CastCounts&) = default;
};

// What a block-scaled format (MX, NVFP4) would do to a tensor's values, recorded beside its
// histogram: blocks along the tensor's feature axis (the reduction axis of the forward GEMM for
// activations and weights, and the same axis for their gradients), elements rounded to nearest
// even. A tensor-wide histogram cannot predict this: every block has its own scale.
struct BlockRecord {
  BlockFormat format;  // with its block size
  ScaleRule rule = ScaleRule::floor;
  BlockStatistics statistics;
  friend bool operator==(const BlockRecord&, const BlockRecord&) = default;
};

struct TensorRecord {
  std::string name;  // layer or module name, such as "fc1" or "encoder.layers.0.mlp"
  TensorKind kind = TensorKind::other;
  ExponentHistogram histogram;  // of the values as `captured`, multiplied by `scale`
  std::optional<CastCounts> cast;
  // The factor the values carry: the loss scale for gradients read before unscaling, else 1.
  // Analysis divides it out first (scale_semantics.hpp).
  double scale = 1.0;
  Capture captured = Capture::before_cast;
  BoxedOptional<BlockRecord> blocks;  // where the run records a block format's statistics (on the heap: usually absent)
  friend bool operator==(const TensorRecord&, const TensorRecord&) = default;
};

// One GEMM operand's per-tensor FP8 scaling in one step (the engine's fp8-delayed and fp8-current
// recipes, gemm_recipe.hpp): the operand ("input", "weight" or "output_gradient" of layer `name`),
// the FP8 format it was cast to, the largest |value| it held this step (the amax that goes into
// the history), the scale it was multiplied by before the cast (FP8 value = cast(x * scale)), and
// what that cast flushed to zero and saturated.
struct OperandScaling {
  std::string name;
  std::string operand;
  std::string format;
  double amax = 0;
  double scale = 1;
  std::uint64_t elements = 0;
  std::uint64_t zeros = 0;            // elements that were zero before the cast
  std::uint64_t flushed_to_zero = 0;  // nonzero elements the cast made zero
  std::uint64_t saturated = 0;
  friend bool operator==(const OperandScaling&, const OperandScaling&) = default;
};

// One GEMM operand's block quantizations in one recorded step (the engine's block-scaled recipes,
// gemm_recipe.hpp): layer `name`'s operand ("input", "weight" or "output_gradient") and what the
// step's quantizations of it did -- each product it feeds blocked along its own reduction axis,
// summed (weights in square tiles: once) -- in the recipe's format and rule.
struct OperandBlocks {
  std::string name;
  std::string operand;
  BlockRecord blocks;
  friend bool operator==(const OperandBlocks&, const OperandBlocks&) = default;
};

enum class CulpritFault : std::uint8_t { nan, infinity, overflow };
std::string_view culprit_fault_name(CulpritFault fault);  // "nan", "inf", "overflow"
// Throws std::invalid_argument naming the text when it is none of the names above.
CulpritFault parse_culprit_fault(std::string_view name);

// The culprit of a step that skipped its update or whose loss was not finite (culprit.hpp: the rule
// that finds it). The step record carries it.
struct Culprit {
  std::string name;  // as the step's records name it
  TensorKind kind = TensorKind::other;
  CulpritFault fault = CulpritFault::nan;
  std::string format;          // the format its values were about to be cast to ("fp16")
  double format_largest = 0;   // that format's largest finite value
  std::optional<double> largest;  // its largest magnitude (infinity where it holds one); none where it holds a NaN
  std::int64_t position = 0;   // its place in the step's execution order, from 0
  // How its values were made: before_cast, in float32 and read before their cast (the engine: a
  // NaN or infinity there is not the format's overflow); as_stored, by operations that round
  // into the format (the bridge under autocast: an overflow inside one is an infinity).
  Capture captured = Capture::before_cast;
  // Of the tensors before it in execution order that lead to it -- the gradients before a
  // gradient, the weights and activations before a weight or an activation -- (all finite and
  // within the format) the one with the largest magnitude and that magnitude; empty and 0 where
  // there is none.
  std::string upstream;
  TensorKind upstream_kind = TensorKind::other;
  double upstream_largest = 0;
  // Its counts in the step's histograms, where the step was recorded (its snapshot): NaNs,
  // infinities, finite values the cast overflowed.
  std::optional<std::uint64_t> nan_count, infinity_count, overflow_count;
  // Where the writer knows them (the PyTorch bridge under torch.distributed, with gradient
  // accumulation): the rank and the micro-batch (from 0) whose tensor it was.
  std::optional<std::int64_t> rank, micro_batch;
  friend bool operator==(const Culprit&, const Culprit&) = default;
};

// One training step, recorded or not: its loss (NaN where not known), the loss scale its backward
// pass used, whether the optimizer step was skipped, its GEMM operands' FP8 scaling where the run
// uses a per-tensor FP8 recipe, and the culprit of a bad step.
struct StepRecord {
  std::int64_t step = 0;
  double loss = 0;
  double loss_scale = 1;
  bool skipped = false;
  std::vector<OperandScaling> scaling;
  BoxedOptional<Culprit> culprit;  // a step that skipped or lost its loss (on the heap: usually absent)
  // False for a step its writer stopped inside: the PyTorch bridge closing (or the interpreter
  // exiting) within a step that never reached Recorder.step(), a loop that raised. It has no loss
  // and no update, and carries the culprit its readings so far named.
  bool finished = true;
  friend bool operator==(const StepRecord&, const StepRecord&) = default;
};

struct Snapshot {
  std::int64_t step = 0;
  double loss = 0;
  double loss_scale = 1;
  bool skipped = false;  // the optimizer step was skipped (non-finite gradients)
  std::vector<TensorRecord> tensors;
  std::vector<OperandScaling> scaling;  // as StepRecord::scaling
  // Runs with a block-scaled recipe: what each GEMM operand's block quantizations did this step.
  std::vector<OperandBlocks> block_operands;
  BoxedOptional<Culprit> culprit;  // as StepRecord::culprit
  bool finished = true;            // as StepRecord::finished
  friend bool operator==(const Snapshot&, const Snapshot&) = default;
  StepRecord step_record() const { return {step, loss, loss_scale, skipped, scaling, culprit, finished}; }
};

}  // namespace fpscope
