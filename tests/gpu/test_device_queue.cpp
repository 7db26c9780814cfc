// A device step queues all its work before the host first waits for the device: no read-back in
// the middle of a step (fp16-pure's skip flag is read on the device, the stochastic counter moves
// on there), no memory made once the batch's buffers exist, nothing uploaded between launches. What
// a CUDA Graph of the step needs, and what keeps the host from stalling the stream every step.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "fpscope/core/names.hpp"
#include "fpscope/gpu/synthetic_data.hpp"
#include "fpscope/gpu/training_data.hpp"
#include "trainers.hpp"

using namespace fpscope;

namespace {

// The host twin, with every call that reaches the device written down in order: 'A' memory made,
// 'U' an upload, 'D' a download (the host waits), 'L' anything queued on the stream.
class QueueLog final : public DeviceOps {
 public:
  explicit QueueLog(std::string* log) : twin_(make_host_device_ops()), log_(log) {}

  std::string_view name() const override { return twin_->name(); }
  void* allocate(std::size_t bytes) override { return note('A'), twin_->allocate(bytes); }
  void release(void* device) override { twin_->release(device); }
  void upload(void* device, const void* host, std::size_t bytes) override { note('U'), twin_->upload(device, host, bytes); }
  void download(void* host, const void* device, std::size_t bytes) override { note('D'), twin_->download(host, device, bytes); }
  void zero(void* device, std::size_t bytes) override { note('L'), twin_->zero(device, bytes); }
  void copy(void* to, const void* from, std::size_t bytes) override { note('L'), twin_->copy(to, from, bytes); }
  void cast(const float* in, float* out, std::uint16_t* packed, std::size_t n, bool bf16, RoundingMode mode, RecordSlots slots,
            RandomWords random) override {
    note('L'), twin_->cast(in, out, packed, n, bf16, mode, slots, random);
  }
  void cast_unless_skipped(const float* in, float* out, std::size_t n, bool bf16, RoundingMode mode, RandomWords random, const int* skip) override {
    note('L'), twin_->cast_unless_skipped(in, out, n, bf16, mode, random, skip);
  }
  void advance_counter(std::uint64_t* counter, std::uint64_t words, std::uint64_t words_unless_skipped, const int* skip) override {
    note('L'), twin_->advance_counter(counter, words, words_unless_skipped, skip);
  }
  void record_histogram(const float* in, std::size_t n, RecordSlots slots) override { note('L'), twin_->record_histogram(in, n, slots); }
  void product(const ProductCall& call) override { note('L'), twin_->product(call); }
  void amax_bits(const float* in, std::size_t n, std::uint32_t* largest) override { note('L'), twin_->amax_bits(in, n, largest); }
  void fp8_quantize(const float* in, float* out, std::size_t n, float scale, bool e5m2, RoundingMode mode, const CastOptions& saturating,
                    RandomWords random, unsigned long long* counts) override {
    note('L'), twin_->fp8_quantize(in, out, n, scale, e5m2, mode, saturating, random, counts);
  }
  void block_quantize(const float* in, float* out, const BlockLayout& layout, const BlockFormat& format, ScaleRule rule, const Context& ctx,
                      RandomWords random, unsigned long long* counters, std::uint32_t* amax) override {
    note('L'), twin_->block_quantize(in, out, layout, format, rule, ctx, random, counters, amax);
  }
  void embed(const int* tokens, const float* token_table, const float* position_table, int vocab, int context, int width, int columns,
             float* x) override {
    note('L'), twin_->embed(tokens, token_table, position_table, vocab, context, width, columns, x);
  }
  void embed_backward(const int* token_columns, const int* token_starts, const float* dx, int vocab, int context, int width, int columns,
                      float* token_gradient, float* position_gradient) override {
    note('L'), twin_->embed_backward(token_columns, token_starts, dx, vocab, context, width, columns, token_gradient, position_gradient);
  }
  void layer_norm(const float* x, const float* gain, const float* bias, int features, int columns, float* y, float* xhat, float* rstd) override {
    note('L'), twin_->layer_norm(x, gain, bias, features, columns, y, xhat, rstd);
  }
  void layer_norm_backward(const float* dy, const float* gain, const float* xhat, const float* rstd, int features, int columns, float* dx,
                           bool add) override {
    note('L'), twin_->layer_norm_backward(dy, gain, xhat, rstd, features, columns, dx, add);
  }
  void add_token_sums(const float* a, const float* b, int features, int columns, float* into) override {
    note('L'), twin_->add_token_sums(a, b, features, columns, into);
  }
  void add_row_bias(float* y, const float* bias, int features, int columns) override { note('L'), twin_->add_row_bias(y, bias, features, columns); }
  void add_into(float* x, const float* y, std::size_t n) override { note('L'), twin_->add_into(x, y, n); }
  void activation_forward(const float* z, float* out, std::size_t n, Activation activation) override {
    note('L'), twin_->activation_forward(z, out, n, activation);
  }
  void activation_backward(const float* z, float* gradient, std::size_t n, Activation activation) override {
    note('L'), twin_->activation_backward(z, gradient, n, activation);
  }
  void pack_triangles(const float* full, int context, int triangles, float factor, float* packed) override {
    note('L'), twin_->pack_triangles(full, context, triangles, factor, packed);
  }
  void unpack_triangles(const float* packed, int context, int triangles, float factor, float* full, std::uint16_t* full16, bool bf16) override {
    note('L'), twin_->unpack_triangles(packed, context, triangles, factor, full, full16, bf16);
  }
  void causal_softmax(const float* scores, int context, int triangles, float* probabilities) override {
    note('L'), twin_->causal_softmax(scores, context, triangles, probabilities);
  }
  void softmax_backward(const float* probabilities, const float* dprobabilities, int context, int triangles, float* dscores) override {
    note('L'), twin_->softmax_backward(probabilities, dprobabilities, context, triangles, dscores);
  }
  void cross_entropy_columns(const float* logits, const int* targets, int classes, int columns, const LossScalerState* scaler, float loss_weight,
                             float* gradient, float* losses) override {
    note('L'), twin_->cross_entropy_columns(logits, targets, classes, columns, scaler, loss_weight, gradient, losses);
  }
  void loss_sum(const float* losses, int n, double* sum) override { note('L'), twin_->loss_sum(losses, n, sum); }
  void add_column_bias(float* z, const float* bias, int rows, int cols) override { note('L'), twin_->add_column_bias(z, bias, rows, cols); }
  void column_sums(const float* m, int rows, int cols, float* out) override { note('L'), twin_->column_sums(m, rows, cols, out); }
  void cross_entropy_rows(const float* logits, const int* labels, int rows, int cols, const LossScalerState* scaler, float loss_weight,
                          float* gradient, float* row_loss) override {
    note('L'), twin_->cross_entropy_rows(logits, labels, rows, cols, scaler, loss_weight, gradient, row_loss);
  }
  void ordered_sum(const float* values, int n, float* out) override { note('L'), twin_->ordered_sum(values, n, out); }
  void forward_epilogue(const ForwardEpilogue& e) override { note('L'), twin_->forward_epilogue(e); }
  void find_non_finite(const float* values, std::size_t n, int* found) override { note('L'), twin_->find_non_finite(values, n, found); }
  void update_scaler(const LossScalerConfig& config, LossScalerState* state, const int* found, int* skip, float* step_scale) override {
    note('L'), twin_->update_scaler(config, state, found, skip, step_scale);
  }
  void sgd_update(float* w, const float* g, std::size_t n, float learning_rate, const float* step_scale, const int* skip) override {
    note('L'), twin_->sgd_update(w, g, n, learning_rate, step_scale, skip);
  }
  void sum_of_squares(const float* g, std::size_t n, const float* step_scale, double* partials) override {
    note('L'), twin_->sum_of_squares(g, n, step_scale, partials);
  }
  void prepare_optimizer_step(const OptimizerSettings& settings, const double* partials, int partial_count, const float* step_scale, const int* skip,
                              long long* updates, OptimizerStep* step) override {
    note('L'), twin_->prepare_optimizer_step(settings, partials, partial_count, step_scale, skip, updates, step);
  }
  void optimizer_update(float* w, float* first, float* second, const float* g, std::size_t n, const OptimizerStep* step, const int* skip) override {
    note('L'), twin_->optimizer_update(w, first, second, g, n, step, skip);
  }

 private:
  void note(char event) { *log_ += event; }
  std::unique_ptr<DeviceOps> twin_;
  std::string* log_;
};

TrainingConfig config_for(bool gpt, Precision precision) {
  TrainingConfig c;
  c.layer_sizes = {16, 24, 20, 4};
  c.activation = Activation::tanh;
  c.precision = precision;
  c.rounding = RoundingMode::stochastic;
  c.scaler = LossScalerConfig::pytorch();
  c.scaler.initial_scale = 0x1p24;  // fp16's first steps overflow and skip, the later ones do not
  c.learning_rate = 0.05f;
  c.seed = 3;
  if (gpt) {
    c.gpt = GptShape{2, 16, 2, 8, 32};
    c.optimizer.kind = OptimizerKind::adamw;
    c.learning_rate = 1e-3f;
  }
  return c;
}

// The events of one step, from the first launch on: what comes before it (the batch's upload) is
// the host handing work over, not waiting.
std::string from_first_launch(const std::string& events) { return events.substr(std::min(events.find('L'), events.size())); }

}  // namespace

TEST_CASE("a device step queues every launch before the host first waits, and makes no memory once its batch's buffers exist") {
  for (const bool gpt : {false, true})
    for (const Precision precision : {Precision::fp32, Precision::fp16, Precision::bf16, Precision::fp16_pure}) {
      CAPTURE(gpt);
      CAPTURE(precision_name(precision));
      const TrainingConfig config = config_for(gpt, precision);
      std::string log;
      std::unique_ptr<TrainerBackend> trainer;
      if (gpt) trainer = std::make_unique<DeviceGptTrainer>(*config.gpt, config, std::make_unique<QueueLog>(&log));
      else trainer = std::make_unique<DeviceMlpTrainer>(config, std::make_unique<QueueLog>(&log));
      // The same steps, each read back whole, on the twin; and on the CPU backend.
      std::unique_ptr<TrainerBackend> reference = testing::device_twin(config), cpu = testing::cpu(config);
      TrainingData data("synthetic", config);
      Eigen::MatrixXf inputs;
      std::vector<int> labels;
      const int batch = gpt ? 3 : 32;
      int skipped = 0;
      for (int step = 0; step < 8; ++step) {
        CAPTURE(step);
        data.next_batch(batch, inputs, labels);
        // Steps 1 to 5 neither record nor read their loss, as most of a run's steps: nothing at all
        // comes back. Steps 6 and 7 record and read: all comes back at the end, after every launch.
        const bool read = step >= 6;
        log.clear();
        const StepResult result = trainer->step(inputs, labels, read, read);
        const StepResult expected = reference->step(inputs, labels, true, true);
        cpu->step(inputs, labels, false, true);
        skipped += expected.skipped ? 1 : 0;
        if (step == 0) continue;  // the first step makes the batch's buffers
        const std::string events = from_first_launch(log);
        CHECK(log.find('A') == std::string::npos);
        CHECK(events.find('U') == std::string::npos);
        if (!read) {
          CHECK(events.find('D') == std::string::npos);
        } else if (!result.skipped) {  // (a skipped step reads its weights' sentinel readings after the step)
          const std::size_t first_wait = events.find('D');
          CHECK(first_wait != std::string::npos);
          CHECK(events.find('L', first_wait) == std::string::npos);
        }
        if (read) CHECK(result.skipped == expected.skipped);
      }
      // Steps that nobody read end where steps read whole end, bit for bit; the counter, moved on
      // on the device past what each step drew (fp16-pure's re-casts only where it did not skip),
      // is where the CPU backend's is.
      CHECK(testing::same_state(trainer->state(), reference->state()));
      CHECK(trainer->state().stochastic_counter == cpu->state().stochastic_counter);
      CHECK(trainer->scaler_state().skipped_steps == cpu->scaler_state().skipped_steps);
      if (precision == Precision::fp16 || precision == Precision::fp16_pure) CHECK(skipped > 0);
    }
}
