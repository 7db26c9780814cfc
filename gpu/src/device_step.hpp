// What every device step (device_mlp.cpp, device_gpt.cpp) shares, written once: device memory that
// gives itself back, the optimizer's device state and its update (the CPU's rules: sgd_update.hpp,
// optimizer_element.hpp), and the read-back's layout of recorded tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cpu/cast_tensor.hpp"
#include "fpscope/core/bulk.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/gpu/device_ops.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "fpscope/gpu/loss_scaler.hpp"
#include "fpscope/gpu/optimizer.hpp"
#include "fpscope/gpu/recording.hpp"

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

// What `blocks` would do to a device tensor's values, read back (rows x cols, column-major, blocked
// along `features`): the CPU backend's block_record of the same values. The host waits for the
// device: a recorded step with block statistics reads back each recorded tensor.
inline BlockRecord device_block_record(DeviceOps& ops, const BlockRecording& blocks, const float* values, std::size_t rows, std::size_t cols,
                                       FeatureAxis features) {
  std::vector<float> host(rows * cols);
  ops.download(host.data(), values, host.size() * sizeof(float));
  const Eigen::Map<const Eigen::MatrixXf> m(host.data(), static_cast<Eigen::Index>(rows), static_cast<Eigen::Index>(cols));
  return block_record(blocks, m, features);
}

// A GEMM recipe's operands on a device (gemm_recipe.hpp), quantized on the host: each operand read
// back and quantized by the CPU backend's own functions -- the same bits, the same random words at
// the same places in the run's stream, the same statistics -- and its float32 values uploaded for a
// float32 product (FP8 values times the dequantization factors as the product's alpha). Correct
// rather than fast: every quantized operand crosses to the host and back, and the host waits for
// the device each time; no device kernel quantizes yet.
class HostRecipe {
 public:
  HostRecipe() = default;
  HostRecipe(const MlpConfig& config, std::size_t fp8_slots) : config_(config.recipe), fp8_(fp8_slots) {
    ctx_.rounding = config.rounding;
    ctx_.stochastic_seed = config.seed;
  }
  GemmRecipe recipe() const { return config_.recipe; }
  bool active() const { return config_.recipe != GemmRecipe::none; }
  // The per-tensor FP8 states (TrainerState::fp8's order), which checkpoints hold.
  const std::vector<Fp8TensorState>& fp8() const { return fp8_; }
  void restore_fp8(const std::vector<Fp8TensorState>& states) { fp8_ = states; }

  // A device tensor (rows x cols, column-major) as the products read it: its float32 values, or
  // where `p16` is given its 16-bit patterns (bf16 where `bf16`, else fp16) widened exactly.
  static Eigen::MatrixXf read(DeviceOps& ops, const float* f32, const std::uint16_t* p16, bool bf16, int rows, int cols) {
    Eigen::MatrixXf m(rows, cols);
    const auto n = static_cast<std::size_t>(m.size());
    if (p16 == nullptr) {
      ops.download(m.data(), f32, n * sizeof(float));
      return m;
    }
    std::vector<std::uint16_t> bits(n);
    ops.download(bits.data(), p16, n * sizeof(std::uint16_t));
    Context exact;
    bits_to_f32(bf16 ? formats::bf16 : formats::fp16, bits, std::span<float>(m.data(), n), exact);
    return m;
  }

  // C (rows x cols) = alpha op(A) op(B) of two quantized operands' float32 values, column-major.
  static void product(DeviceOps& ops, bool transpose_a, bool transpose_b, int rows, int cols, int k, const float* a, int lda, const float* b, int ldb,
                      float* c, int ldc, float alpha) {
    ProductCall call;
    call.transpose_a = transpose_a, call.transpose_b = transpose_b, call.m = rows, call.n = cols, call.k = k;
    call.a = {a, nullptr, lda, 0}, call.b = {b, nullptr, ldb, 0}, call.c = c, call.ldc = ldc, call.alpha = alpha;
    ops.product(call);
  }

  // x quantized and dequantized along its rows or columns (block_scaled_operand), drawing from the
  // run's stream at `counter` (moved on by what it drew), counted into `statistics`, uploaded to
  // `device` (x's size).
  void block_operand(DeviceOps& ops, const Eigen::MatrixXf& x, bool along_rows, BlockStatistics& statistics, std::uint64_t& counter, float* device) {
    ctx_.stochastic_counter = counter;
    const Eigen::MatrixXf q = block_scaled_operand(config_.recipe, x, along_rows, ctx_, &statistics);
    counter = ctx_.stochastic_counter;
    ops.upload(device, q.data(), static_cast<std::size_t>(q.size()) * sizeof(float));
  }
  // x cast for a per-tensor FP8 product (quantize_fp8_operand, FP8 state `slot`), recorded into
  // `record`, uploaded to `device`; returns its dequantization factor.
  float fp8_operand(DeviceOps& ops, GemmOperand operand, const Eigen::MatrixXf& x, std::size_t slot, OperandScaling& record, std::uint64_t& counter,
                    float* device) {
    ctx_.stochastic_counter = counter;
    const Fp8Operand q = quantize_fp8_operand(config_, operand, x, fp8_.at(slot), ctx_, record);
    counter = ctx_.stochastic_counter;
    ops.upload(device, q.values.data(), static_cast<std::size_t>(q.values.size()) * sizeof(float));
    return q.dequantize;
  }

 private:
  RecipeConfig config_;
  std::vector<Fp8TensorState> fp8_;
  Context ctx_;
};

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
