// A DeviceOps that hands every call on to another (`inner`), each through one of two hooks that see
// what kind of call it is: memory calls and transfers through before(), which may throw; everything
// queued on the stream through launch(), which may run it now, keep it for later or drop it. The one
// place the ~40 calls are spelled out for whoever watches or reorders them: StepGraphOps (a step's
// launches as one graph), the tests' logs of what a step asks of the device.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <utility>

#include "fpscope/gpu/device_ops.hpp"

namespace fpscope {

class ForwardingOps : public DeviceOps {
 public:
  enum class Call : std::uint8_t { allocate, release, upload, download };

  explicit ForwardingOps(std::unique_ptr<DeviceOps> inner) : inner_(std::move(inner)) {
    if (!inner_) throw std::invalid_argument("ForwardingOps: no device operations to forward to");
  }
  DeviceOps& inner() const { return *inner_; }

  std::string_view name() const override { return inner_->name(); }

  void* allocate(std::size_t bytes) override { return before(Call::allocate), inner_->allocate(bytes); }
  void release(void* device) override { before(Call::release), inner_->release(device); }
  void upload(void* device, const void* host, std::size_t bytes) override { before(Call::upload), inner_->upload(device, host, bytes); }
  void download(void* host, const void* device, std::size_t bytes) override { before(Call::download), inner_->download(host, device, bytes); }

  // Every launch's arguments are copied into its call (as a graph's nodes keep theirs).
  void zero(void* device, std::size_t bytes) override {
    launch([=, this] { inner_->zero(device, bytes); });
  }
  void copy(void* to, const void* from, std::size_t bytes) override {
    launch([=, this] { inner_->copy(to, from, bytes); });
  }
  void cast(const float* in, float* out, std::uint16_t* packed, std::size_t n, bool bf16, RoundingMode mode, RecordSlots slots,
            RandomWords random) override {
    launch([=, this] { inner_->cast(in, out, packed, n, bf16, mode, slots, random); });
  }
  void cast_unless_skipped(const float* in, float* out, std::size_t n, bool bf16, RoundingMode mode, RandomWords random, const int* skip) override {
    launch([=, this] { inner_->cast_unless_skipped(in, out, n, bf16, mode, random, skip); });
  }
  void advance_counter(std::uint64_t* counter, std::uint64_t words, std::uint64_t words_unless_skipped, const int* skip) override {
    launch([=, this] { inner_->advance_counter(counter, words, words_unless_skipped, skip); });
  }
  void record_histogram(const float* in, std::size_t n, RecordSlots slots) override {
    launch([=, this] { inner_->record_histogram(in, n, slots); });
  }
  void product(const ProductCall& call) override {
    launch([=, this] { inner_->product(call); });
  }
  void amax_bits(const float* in, std::size_t n, std::uint32_t* largest) override {
    launch([=, this] { inner_->amax_bits(in, n, largest); });
  }
  void fp8_quantize(const float* in, float* out, std::size_t n, float scale, bool e5m2, RoundingMode mode, const CastOptions& saturating,
                    RandomWords random, unsigned long long* counts) override {
    launch([=, this] { inner_->fp8_quantize(in, out, n, scale, e5m2, mode, saturating, random, counts); });
  }
  void block_quantize(const float* in, float* out, const BlockLayout& layout, const BlockFormat& format, ScaleRule rule, const Context& ctx,
                      RandomWords random, unsigned long long* counters, std::uint32_t* amax) override {
    launch([=, this] { inner_->block_quantize(in, out, layout, format, rule, ctx, random, counters, amax); });
  }
  void embed(const int* tokens, const float* token_table, const float* position_table, int vocab, int context, int width, int columns,
             float* x) override {
    launch([=, this] { inner_->embed(tokens, token_table, position_table, vocab, context, width, columns, x); });
  }
  void embed_backward(const int* token_columns, const int* token_starts, const float* dx, int vocab, int context, int width, int columns,
                      float* token_gradient, float* position_gradient) override {
    launch([=, this] { inner_->embed_backward(token_columns, token_starts, dx, vocab, context, width, columns, token_gradient, position_gradient); });
  }
  void layer_norm(const float* x, const float* gain, const float* bias, int features, int columns, float* y, float* xhat, float* rstd) override {
    launch([=, this] { inner_->layer_norm(x, gain, bias, features, columns, y, xhat, rstd); });
  }
  void layer_norm_backward(const float* dy, const float* gain, const float* xhat, const float* rstd, int features, int columns, float* dx,
                           bool add) override {
    launch([=, this] { inner_->layer_norm_backward(dy, gain, xhat, rstd, features, columns, dx, add); });
  }
  void add_token_sums(const float* a, const float* b, int features, int columns, float* into) override {
    launch([=, this] { inner_->add_token_sums(a, b, features, columns, into); });
  }
  void add_row_bias(float* y, const float* bias, int features, int columns) override {
    launch([=, this] { inner_->add_row_bias(y, bias, features, columns); });
  }
  void add_into(float* x, const float* y, std::size_t n) override {
    launch([=, this] { inner_->add_into(x, y, n); });
  }
  void activation_forward(const float* z, float* out, std::size_t n, Activation activation) override {
    launch([=, this] { inner_->activation_forward(z, out, n, activation); });
  }
  void activation_backward(const float* z, float* gradient, std::size_t n, Activation activation) override {
    launch([=, this] { inner_->activation_backward(z, gradient, n, activation); });
  }
  void pack_triangles(const float* full, int context, int triangles, float factor, float* packed) override {
    launch([=, this] { inner_->pack_triangles(full, context, triangles, factor, packed); });
  }
  void unpack_triangles(const float* packed, int context, int triangles, float factor, float* full, std::uint16_t* full16, bool bf16) override {
    launch([=, this] { inner_->unpack_triangles(packed, context, triangles, factor, full, full16, bf16); });
  }
  void causal_softmax(const float* scores, int context, int triangles, float* probabilities) override {
    launch([=, this] { inner_->causal_softmax(scores, context, triangles, probabilities); });
  }
  void softmax_backward(const float* probabilities, const float* dprobabilities, int context, int triangles, float* dscores) override {
    launch([=, this] { inner_->softmax_backward(probabilities, dprobabilities, context, triangles, dscores); });
  }
  void cross_entropy_columns(const float* logits, const int* targets, int classes, int columns, const LossScalerState* scaler, float loss_weight,
                             float* gradient, float* losses) override {
    launch([=, this] { inner_->cross_entropy_columns(logits, targets, classes, columns, scaler, loss_weight, gradient, losses); });
  }
  void loss_sum(const float* losses, int n, double* sum) override {
    launch([=, this] { inner_->loss_sum(losses, n, sum); });
  }
  void add_column_bias(float* z, const float* bias, int rows, int cols) override {
    launch([=, this] { inner_->add_column_bias(z, bias, rows, cols); });
  }
  void column_sums(const float* m, int rows, int cols, float* out) override {
    launch([=, this] { inner_->column_sums(m, rows, cols, out); });
  }
  void cross_entropy_rows(const float* logits, const int* labels, int rows, int cols, const LossScalerState* scaler, float loss_weight,
                          float* gradient, float* row_loss) override {
    launch([=, this] { inner_->cross_entropy_rows(logits, labels, rows, cols, scaler, loss_weight, gradient, row_loss); });
  }
  void ordered_sum(const float* values, int n, float* out) override {
    launch([=, this] { inner_->ordered_sum(values, n, out); });
  }
  void forward_epilogue(const ForwardEpilogue& e) override {
    launch([=, this] { inner_->forward_epilogue(e); });
  }
  void find_non_finite(const float* values, std::size_t n, int* found) override {
    launch([=, this] { inner_->find_non_finite(values, n, found); });
  }
  void update_scaler(const LossScalerConfig& config, LossScalerState* state, const int* found, int* skip, float* step_scale) override {
    launch([=, this] { inner_->update_scaler(config, state, found, skip, step_scale); });
  }
  void sgd_update(float* w, const float* g, std::size_t n, float learning_rate, const float* step_scale, const int* skip) override {
    launch([=, this] { inner_->sgd_update(w, g, n, learning_rate, step_scale, skip); });
  }
  void sum_of_squares(const float* g, std::size_t n, const float* step_scale, double* partials) override {
    launch([=, this] { inner_->sum_of_squares(g, n, step_scale, partials); });
  }
  void prepare_optimizer_step(const OptimizerSettings& settings, const double* partials, int partial_count, const float* step_scale, const int* skip,
                              long long* updates, OptimizerStep* step) override {
    launch([=, this] { inner_->prepare_optimizer_step(settings, partials, partial_count, step_scale, skip, updates, step); });
  }
  void optimizer_update(float* w, float* first, float* second, const float* g, std::size_t n, const OptimizerStep* step, const int* skip) override {
    launch([=, this] { inner_->optimizer_update(w, first, second, g, n, step, skip); });
  }

  // Graphs are the inner ops' own.
  bool begin_capture() override { return inner_->begin_capture(); }
  void end_capture(std::uint64_t key) override { inner_->end_capture(key); }
  void abandon_capture() override { inner_->abandon_capture(); }
  void replay(std::uint64_t key) override { inner_->replay(key); }
  void forget_graphs() override { inner_->forget_graphs(); }

 protected:
  // Before a memory call or a transfer reaches the inner ops.
  virtual void before(Call) {}
  // A call queued on the stream: run now by default.
  virtual void launch(std::function<void()> run) { run(); }

 private:
  std::unique_ptr<DeviceOps> inner_;
};

}  // namespace fpscope
