// What every device step (device_mlp.cpp, device_gpt.cpp) shares, written once: device memory that
// gives itself back, the optimizer's device state and its update (the CPU's rules: sgd_update.hpp,
// optimizer_element.hpp), and the read-back's layout of recorded tensors.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "recorded_blocks.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/gpu/device_ops.hpp"
#include "fpscope/gpu/device_support.hpp"
#include "fpscope/gpu/block_element.hpp"
#include "fpscope/gpu/fp8_element.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "fpscope/gpu/gpt_element.hpp"
#include "fpscope/gpu/loss_scaler.hpp"
#include "fpscope/gpu/optimizer.hpp"
#include "fpscope/gpu/trainer_backend.hpp"
#include "recording.hpp"

namespace fpscope::device_step {

// Device memory that gives itself back.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(DeviceOps& ops, std::size_t n) : ops_(&ops), size_(n), data_(n == 0 ? nullptr : static_cast<T*>(ops.allocate(n * sizeof(T)))) {}
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    swap(other);
    return *this;
  }
  ~Buffer() {
    if (data_ != nullptr) ops_->release(data_);
  }
  T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }

 private:
  void swap(Buffer& other) noexcept {
    std::swap(ops_, other.ops_);
    std::swap(size_, other.size_);
    std::swap(data_, other.data_);
  }
  DeviceOps* ops_ = nullptr;
  std::size_t size_ = 0;
  T* data_ = nullptr;
};

// What a step's launches depend on beyond device memory and the run's settings (StepGraphOps's
// key): the batch's size, and whether the step records.
inline std::uint64_t graph_key(long long batch, bool record) { return (static_cast<std::uint64_t>(batch) << 1) | (record ? 1u : 0u); }

// The run's stochastic-rounding counter, kept on the device (one word), and a step's draws from it.
// Each launch that draws takes draw(n): the counter's device word and the words the step drew
// before it (RandomWords), so that a step queues the same arguments every step and the host never
// waits to learn what the counter is. finish_step queues the step's last launch, which moves the
// counter past the step's words -- and past the words of draw_unless_skipped (fp16-pure's re-casts
// after an update, drawn after every other) only where the step did not skip.
class StochasticCounter {
 public:
  StochasticCounter() = default;
  StochasticCounter(DeviceOps& ops, std::uint64_t seed) : word_(ops, 1), seed_(seed) {}

  RandomWords draw(std::uint64_t n) {
    if (unless_skipped_ != 0) throw std::logic_error("a step drew words after those drawn only unless it skips");
    const RandomWords words{seed_, word_.data(), drawn_};
    drawn_ += n;
    return words;
  }
  RandomWords draw_unless_skipped(std::uint64_t n) {
    const RandomWords words{seed_, word_.data(), drawn_ + unless_skipped_};
    unless_skipped_ += n;
    return words;
  }
  // *skip: the step's flag, set on the device by then.
  void finish_step(DeviceOps& ops, const int* skip) {
    ops.advance_counter(word_.data(), drawn_, unless_skipped_, skip);
    drawn_ = unless_skipped_ = 0;
  }
  // A step's first draw is at the counter's value: what a step that threw before finish_step drew is forgotten.
  void begin_step() { drawn_ = unless_skipped_ = 0; }

  std::uint64_t value(DeviceOps& ops) const {
    std::uint64_t v = 0;
    ops.download(&v, word_.data(), sizeof v);
    return v;
  }
  void restore(DeviceOps& ops, std::uint64_t value) { ops.upload(word_.data(), &value, sizeof value); }

 private:
  Buffer<std::uint64_t> word_;
  std::uint64_t seed_ = 0;
  std::uint64_t drawn_ = 0, unless_skipped_ = 0;
};

// A recorded tensor's place in the read-back: its histogram's slots, then 3 outcome counts.
inline constexpr std::size_t record_stride = bin_slot_count + 3;
inline RecordSlots record_slots(unsigned long long* base) { return {base, base + bin_slot_count}; }
// A recorded tensor as read back: `counters` at its place; cast counts where the step cast (low precision).
inline TensorRecord counted_record(std::string name, TensorKind kind, const unsigned long long* counters, bool cast) {
  TensorRecord t = new_record(std::move(name), kind);
  for (int b = 0; b < binade_count; ++b) t.histogram.set_count(b + min_binade, counters[b]);
  t.histogram.set_specials(counters[bin_zero], counters[bin_infinity], counters[bin_nan]);
  if (cast) t.cast = CastCounts{counters[bin_slot_count], counters[bin_slot_count + 1], counters[bin_slot_count + 2]};
  return t;
}

// A device trainer's position() (trainer_backend.hpp): its step count, the scaler read back, the
// stochastic counter and the FP8 histories (kept on the host), no parameters.
inline TrainerState position_of(std::int64_t steps, const LossScalerState& scaler, std::uint64_t stochastic_counter,
                                const std::vector<Fp8TensorState>& fp8) {
  TrainerState s;
  s.steps = steps;
  s.scaler = scaler;
  s.stochastic_counter = stochastic_counter;
  s.fp8 = fp8;
  return s;
}

// The scaler's state on the device, read back.
inline LossScalerState scaler_state(DeviceOps& ops, const LossScalerState* device) {
  LossScalerState s;
  ops.download(&s, device, sizeof s);
  return s;
}
// As LossScaler::reconfigure on the device's state: the new rule from its initial scale, the
// skipped count kept; `current` becomes `next`.
inline void reconfigure_scaler(DeviceOps& ops, LossScalerState* device, LossScalerConfig& current, const LossScalerConfig& next) {
  LossScaler scaler(current);
  scaler.restore(scaler_state(ops, device));
  scaler.reconfigure(next);
  current = next;
  ops.upload(device, &scaler.state(), sizeof(LossScalerState));
}

// What `blocks` would do to device tensors' values: the CPU backend's block_record of the same
// values, made on the device by block_quantize (block_element.hpp: block_quantize's per-block
// rule, nearest even, nothing written but the statistics), which are read back (the host waits for
// the device). Its counters are made once and serve every record.
class BlockRecorder {
 public:
  BlockRecorder() = default;
  explicit BlockRecorder(DeviceOps& ops) : counters_(ops, block_counter_count), amax_(ops, 1) {}
  // A tensor of rows x cols values (column-major), blocked along `features`.
  BlockRecord record(DeviceOps& ops, const BlockRecording& blocks, const float* values, std::size_t rows, std::size_t cols, FeatureAxis features) {
    return record(ops, blocks, values, recorded_block_layout(blocks, rows, cols, features));
  }
  // Values blocked as `layout` says.
  BlockRecord record(DeviceOps& ops, const BlockRecording& blocks, const float* values, const BlockLayout& layout) {
    ops.zero(counters_.data(), counters_.bytes());
    const Context nearest_even;  // recording never moves the run's stochastic stream
    ops.block_quantize(values, nullptr, layout, blocks.format, blocks.rule, nearest_even, {}, counters_.data(), amax_.data());
    std::vector<unsigned long long> host(block_counter_count);
    ops.download(host.data(), counters_.data(), counters_.bytes());
    BlockRecord record{blocks.format, blocks.rule, {}};
    add_block_counters(host.data(), record.statistics);
    return record;
  }

 private:
  Buffer<unsigned long long> counters_;
  Buffer<std::uint32_t> amax_;
};

// What `blocks` would do to `triangles` packed attention triangles of `context` queries at `packed`
// on the device (attention_blocks.hpp): laid out with their padding in `padded` (triangles *
// context^2 floats) and blocked there, the padding then taken back out; read back and made on the
// host only where a block's scale is NaN (the padding in those blocks needs every scale code).
inline BlockRecord triangle_block_record(DeviceOps& ops, BlockRecorder& recorder, const BlockRecording& blocks, const float* packed, int context,
                                         std::size_t triangles, float* padded) {
  const auto T = static_cast<std::size_t>(context);
  ops.unpack_triangles(packed, context, static_cast<int>(triangles), 1.0f, padded, nullptr, false);
  BlockRecord record = recorder.record(ops, blocks, padded, triangle_padded_layout(blocks, T, triangles));
  if (record.statistics.nan_blocks == 0) {
    take_out_triangle_padding(blocks, record.statistics, T, triangles, {});
    return record;
  }
  std::vector<float> host(triangles * triangle_start(context));
  ops.download(host.data(), packed, host.size() * sizeof(float));
  return fpscope::triangle_block_record(blocks, host, context);
}

// A GEMM recipe's operands on a device (gemm_recipe.hpp), quantized as the CPU backend quantizes
// them -- the same bits, the same random words at the same places in the run's stream, the same
// statistics -- and multiplied as float32 products (FP8 products with their dequantization factor
// as alpha).
//   per-tensor FP8: on the device (fp8_element.hpp): the operand's amax there, read back (4 bytes:
//     the host keeps the scale's state and picks the scale by the CPU's rule), then the scaled,
//     saturating cast there.
//   block-scaled: on the device (block_element.hpp: block_quantize's rule per block), nothing read
//     back but the statistics.
// Each step's counts and statistics are read back once, at its end.
class DeviceRecipe {
 public:
  DeviceRecipe() = default;
  DeviceRecipe(DeviceOps& ops, const TrainingConfig& config, std::size_t fp8_slots) : config_(config.recipe), fp8_(fp8_slots) {
    if (const std::string lacks = device_backend_lacks(config.recipe); !lacks.empty())
      throw std::invalid_argument(lacks + ": train it with --backend cpu (or auto)");
    ctx_.rounding = config.rounding;
    if (fp8_slots != 0) counts_ = Buffer<unsigned long long>(ops, 3 * fp8_slots);
    if (config.recipe.recipe != GemmRecipe::none) amax_ = Buffer<std::uint32_t>(ops, 1);
  }
  GemmRecipe recipe() const { return config_.recipe; }
  bool active() const { return config_.recipe != GemmRecipe::none; }
  // The per-tensor FP8 states (TrainerState::fp8's order), which checkpoints hold.
  const std::vector<Fp8TensorState>& fp8() const { return fp8_; }
  void restore_fp8(const std::vector<Fp8TensorState>& states) { fp8_ = states; }

  // C (rows x cols) = alpha op(A) op(B) of two quantized operands' float32 values, column-major.
  static void product(DeviceOps& ops, bool transpose_a, bool transpose_b, int rows, int cols, int k, const float* a, int lda, const float* b, int ldb,
                      float* c, int ldc, float alpha) {
    ProductCall call;
    call.transpose_a = transpose_a, call.transpose_b = transpose_b, call.m = rows, call.n = cols, call.k = k;
    call.a = {a, nullptr, lda, 0}, call.b = {b, nullptr, ldb, 0}, call.c = c, call.ldc = ldc, call.alpha = alpha;
    ops.product(call);
  }

  // Before a step's first quantization.
  void begin_step(DeviceOps& ops) {
    if (counts_.size() != 0) ops.zero(counts_.data(), counts_.bytes());
    recorded_slots_.clear();
    for (Buffer<unsigned long long>& counters : block_counters_) ops.zero(counters.data(), counters.bytes());
    block_entries_ = 0;
  }
  // x (a device tensor's rows x cols values, column-major) quantized and dequantized along its
  // rows or columns into `device` (x's size; may be x) as block_scaled_operand makes it, drawing
  // its words from the run's `counter`, counted into the step's block statistics at `entry`
  // (block_operand_index's place), read back by finish_step.
  void block_operand(DeviceOps& ops, GemmOperand operand, const float* x, int rows, int cols, bool along_rows, std::size_t entry,
                     StochasticCounter& counter, float* device) {
    const BlockFormat format = block_format_of(config_.recipe);
    const BlockLayout layout = recipe_block_layout(format, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols), along_rows);
    while (block_counters_.size() <= entry) {
      block_counters_.emplace_back(ops, block_counter_count);
      ops.zero(block_counters_.back().data(), block_counters_.back().bytes());
    }
    block_entries_ = std::max(block_entries_, entry + 1);
    Context ctx = ctx_;
    ctx.rounding = operand_rounding(config_, operand, ctx_.rounding);
    ops.block_quantize(x, device, layout, format, recipe_scale_rule, ctx, counter.draw(layout.element_count()), block_counters_[entry].data(),
                       amax_.data());
  }
  // The n values at x (device) cast for a per-tensor FP8 product into `device` (may be x) as
  // quantize_fp8_operand casts them, with FP8 state `slot` (quantized once a step), drawing n
  // words from `counter`; `record` described now, its counts filled in by finish_step. Returns the
  // dequantization factor.
  float fp8_operand(DeviceOps& ops, GemmOperand operand, const float* x, std::size_t n, std::size_t slot, OperandScaling& record,
                    StochasticCounter& counter, float* device) {
    ops.amax_bits(x, n, amax_.data());
    std::uint32_t largest = 0;
    ops.download(&largest, amax_.data(), sizeof largest);
    const float amax = amax_of_magnitude_bits(largest);
    const float scale = fp8_step_scale(config_, operand, amax, fp8_.at(slot));
    ops.fp8_quantize(x, device, n, scale, fp8_format_of(config_, operand) == formats::e5m2, operand_rounding(config_, operand, ctx_.rounding),
                     fp8_cast_options(ctx_), counter.draw(n), counts_.data() + 3 * slot);
    describe_fp8_operand(record, config_, operand, amax, scale, n);
    recorded_slots_.push_back(slot);
    return fp8_dequantize_factor(scale);
  }
  // After the step's last quantization: the FP8 records' counts (`scaling`: those fp8_operand
  // described, in its order) and the block-scaled operands' statistics (`block_operands`: the
  // entries block_operand counted into), read back.
  void finish_step(DeviceOps& ops, std::vector<OperandScaling>& scaling, std::vector<BlockOperandStatistics>& block_operands) {
    if (!recorded_slots_.empty()) {
      std::vector<unsigned long long> counts(counts_.size());
      ops.download(counts.data(), counts_.data(), counts_.bytes());
      for (std::size_t i = 0; i < recorded_slots_.size(); ++i) {
        const unsigned long long* c = counts.data() + 3 * recorded_slots_[i];
        scaling.at(i).zeros = c[0], scaling.at(i).flushed_to_zero = c[1], scaling.at(i).saturated = c[2];
      }
    }
    std::vector<unsigned long long> counters(block_counter_count);
    for (std::size_t entry = 0; entry < block_entries_; ++entry) {
      ops.download(counters.data(), block_counters_[entry].data(), block_counters_[entry].bytes());
      add_block_counters(counters.data(), block_operands.at(entry).statistics);
    }
  }

 private:
  RecipeConfig config_;
  std::vector<Fp8TensorState> fp8_;
  Context ctx_;  // the run's rounding mode and options (its words come from the StochasticCounter)
  Buffer<unsigned long long> counts_;  // per FP8 slot: zeros, flushed, saturated
  Buffer<std::uint32_t> amax_;
  std::vector<std::size_t> recorded_slots_;  // the step's FP8 records' slots, in order
  std::vector<Buffer<unsigned long long>> block_counters_;  // per block_operands entry (block_counter_count words)
  std::size_t block_entries_ = 0;  // entries counted this step
};

// Whether step `step` may run as a graph (StepGraphOps::run's `eligible`): a recipe and block
// records read back among its launches, and a fault due at it is uploaded among them.
inline bool graphable(const TrainingConfig& config, const DeviceRecipe& recipe, const std::vector<FaultInjection>& faults, std::int64_t step) {
  return !recipe.active() && !config.record_blocks &&
         std::none_of(faults.begin(), faults.end(), [&](const FaultInjection& f) { return f.step == step; });
}

// The optimizer on the device: per parameter, in the model's order, its buffers (the momentum or
// AdamW's first moment, AdamW's second; empty where the kind keeps none), the partials of the
// clipping norm, the count of updates and the step's settings.
class Optimizer {
 public:
  Optimizer() = default;
  Optimizer(DeviceOps& ops, const OptimizerConfig& config, std::span<const std::size_t> sizes) : config_(config) {
    const bool first = config.kind != OptimizerKind::sgd, second = config.kind == OptimizerKind::adamw;
    for (const std::size_t n : sizes) {
      first_.emplace_back(ops, first ? n : 0);
      second_.emplace_back(ops, second ? n : 0);
    }
    partials_ = Buffer<double>(ops, sizes.size() * sum_of_squares_partials);
    updates_ = Buffer<long long>(ops, 1);
    step_ = Buffer<OptimizerStep>(ops, 1);
  }

  // The buffers as the CPU keeps them: none until the first update.
  OptimizerState state(DeviceOps& ops) const {
    OptimizerState s;
    long long updates = 0;
    ops.download(&updates, updates_.data(), sizeof updates);
    s.updates = updates;
    if (updates == 0) return s;
    const auto copy_back = [&](const std::vector<Buffer<float>>& buffers, std::vector<std::vector<float>>& into) {
      if (buffers.empty() || buffers.front().size() == 0) return;
      for (const Buffer<float>& buffer : buffers) {
        into.emplace_back(buffer.size());
        ops.download(into.back().data(), buffer.data(), buffer.bytes());
      }
    };
    copy_back(first_, s.first);
    copy_back(second_, s.second);
    return s;
  }
  // Buffers the state holds are copied in; those it does not hold yet (no update so far) start at
  // zero. The caller has checked that the state fits (optimizer_state_fits).
  void restore(DeviceOps& ops, const OptimizerState& state) {
    const auto copy_in = [&](std::vector<Buffer<float>>& buffers, const std::vector<std::vector<float>>& from) {
      for (std::size_t p = 0; p < buffers.size(); ++p) {
        if (buffers[p].size() == 0) continue;
        if (p < from.size() && !from[p].empty()) ops.upload(buffers[p].data(), from[p].data(), buffers[p].bytes());
        else ops.zero(buffers[p].data(), buffers[p].bytes());
      }
    };
    copy_in(first_, state.first);
    copy_in(second_, state.second);
    const long long updates = state.updates;
    ops.upload(updates_.data(), &updates, sizeof updates);
  }

  // One update of every parameter from its scaled gradient unless *skip (device values): plain SGD
  // by sgd_update.hpp's rule, every other optimizer by optimizer_element.hpp's, the step's settings
  // (and the clipping norm) made on the device.
  void update(DeviceOps& ops, float learning_rate, std::span<float* const> parameters, std::span<const float* const> gradients,
              std::span<const std::size_t> sizes, const float* step_scale, const int* skip) {
    if (config_.plain_sgd()) {
      for (std::size_t p = 0; p < parameters.size(); ++p) ops.sgd_update(parameters[p], gradients[p], sizes[p], learning_rate, step_scale, skip);
      return;
    }
    const bool clip = config_.clip_grad_norm > 0;
    if (clip)
      for (std::size_t p = 0; p < parameters.size(); ++p) ops.sum_of_squares(gradients[p], sizes[p], step_scale, partials_.data() + p * sum_of_squares_partials);
    const OptimizerSettings settings{config_.kind,  learning_rate,     config_.momentum,     config_.beta1,
                                     config_.beta2, config_.epsilon, config_.weight_decay, config_.clip_grad_norm};
    ops.prepare_optimizer_step(settings, partials_.data(), clip ? static_cast<int>(partials_.size()) : 0, step_scale, skip, updates_.data(),
                               step_.data());
    for (std::size_t p = 0; p < parameters.size(); ++p)
      ops.optimizer_update(parameters[p], first_[p].size() == 0 ? nullptr : first_[p].data(), second_[p].size() == 0 ? nullptr : second_[p].data(),
                           gradients[p], sizes[p], step_.data(), skip);
  }

 private:
  OptimizerConfig config_;
  std::vector<Buffer<float>> first_, second_;
  Buffer<double> partials_;
  Buffer<long long> updates_;
  Buffer<OptimizerStep> step_;
};

}  // namespace fpscope::device_step
