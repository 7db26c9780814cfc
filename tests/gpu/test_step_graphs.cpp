// A device step as one graph (step_graphs.hpp). First what it needs: a step queues all its work
// before the host first waits for the device -- no read-back in the middle of a step (fp16-pure's
// skip flag is read on the device, the stochastic counter moves on there), no memory made once the
// batch's buffers exist, nothing uploaded between launches. Then that a step replayed as a graph
// is the step run as it comes, bit for bit: on the host twin, whose graphs are its launches kept as
// calls with the arguments they had when captured -- what a CUDA Graph keeps -- so that a graph
// replayed after something it depends on changed (the batch's buffers, the scaler's rule) would
// show here as a different step.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "fpscope/core/names.hpp"
#include "fpscope/gpu/training_data.hpp"
#include "fpscope/gpu/training_session.hpp"
#include "forwarding_ops.hpp"
#include "step_graphs.hpp"
#include "trainers.hpp"

using namespace fpscope;

namespace {

// The host twin, with every call that reaches the device written down in order: 'A' memory made,
// 'U' an upload, 'D' a download (the host waits), 'L' anything queued on the stream.
class QueueLog final : public ForwardingOps {
 public:
  explicit QueueLog(std::string* log) : ForwardingOps(make_host_device_ops()), log_(log) {}

 private:
  void before(Call call) override {
    if (call != Call::release) *log_ += call == Call::allocate ? 'A' : call == Call::upload ? 'U' : 'D';
  }
  void launch(std::function<void()> run) override {
    *log_ += 'L';
    run();
  }
  std::string* log_;
};

TrainingConfig config_for(bool gpt, Precision precision, bool graphs) {
  TrainingConfig c;
  c.layer_sizes = {16, 24, 20, 4};
  c.activation = Activation::tanh;
  c.precision = precision;
  c.rounding = RoundingMode::stochastic;
  c.scaler = LossScalerConfig::pytorch();
  c.scaler.initial_scale = 0x1p24;  // fp16's first steps overflow and skip, the later ones do not
  c.scaler.growth_interval = 3;     // and the scale grows again within the run
  c.learning_rate = 0.05f;
  c.seed = 11;
  c.step_graphs = graphs;
  if (gpt) {
    c.gpt = GptShape{2, 16, 2, 8, 32};
    c.optimizer.kind = OptimizerKind::adamw;
    c.learning_rate = 1e-3f;
  }
  return c;
}

std::unique_ptr<TrainerBackend> device_trainer(const TrainingConfig& c) {
  if (c.gpt) return std::make_unique<DeviceGptTrainer>(*c.gpt, c, make_host_device_ops());
  return std::make_unique<DeviceMlpTrainer>(c, make_host_device_ops());
}

StepGraphStatistics statistics_of(const TrainerBackend& trainer) {
  if (const auto* gpt = dynamic_cast<const DeviceGptTrainer*>(&trainer)) return gpt->graph_statistics();
  return dynamic_cast<const DeviceMlpTrainer&>(trainer).graph_statistics();
}

bool same_result(const StepResult& a, const StepResult& b) {
  const bool same_loss = std::memcmp(&a.loss, &b.loss, sizeof a.loss) == 0 && std::memcmp(&a.loss_scale, &b.loss_scale, sizeof a.loss_scale) == 0;
  const bool same_snapshot = a.snapshot.has_value() == b.snapshot.has_value() && (!a.snapshot || *a.snapshot == *b.snapshot);
  return same_loss && same_snapshot && a.skipped == b.skipped && a.sentinel == b.sentinel;
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
      // The calls as the step makes them: no graph.
      const TrainingConfig config = config_for(gpt, precision, false);
      std::string log;
      std::unique_ptr<TrainerBackend> trainer;
      if (gpt) trainer = std::make_unique<DeviceGptTrainer>(*config.gpt, config, std::make_unique<QueueLog>(&log));
      else trainer = std::make_unique<DeviceMlpTrainer>(config, std::make_unique<QueueLog>(&log));
      // The same steps, each read back whole, on the twin; and on the CPU backend.
      std::unique_ptr<TrainerBackend> reference = device_trainer(config), cpu = testing::cpu(config);
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

TEST_CASE("a device step replayed as a graph is, bit for bit, the step run as it comes") {
  for (const bool gpt : {false, true})
    for (const Precision precision : {Precision::fp32, Precision::fp16, Precision::bf16, Precision::fp16_pure}) {
      CAPTURE(gpt);
      CAPTURE(precision_name(precision));
      std::unique_ptr<TrainerBackend> graphed = device_trainer(config_for(gpt, precision, true));
      std::unique_ptr<TrainerBackend> plain = device_trainer(config_for(gpt, precision, false));
      const TrainingConfig config = config_for(gpt, precision, true);
      TrainingData data("synthetic", config);
      Eigen::MatrixXf inputs;
      std::vector<int> labels;
      // Batches that change size and come back (new buffers: every graph forgotten), steps that
      // record among those that do not, the loss read on some, the scaler's rule changed and a
      // counterfactual asked for in the middle of the run.
      const int unit = gpt ? 1 : 8;
      const int batches[] = {4, 4, 4, 4, 4, 4, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4};
      int skipped = 0;
      for (int step = 0; step < 16; ++step) {
        CAPTURE(step);
        data.next_batch(batches[step] * unit, inputs, labels);
        const bool record = step >= 10 && step <= 12, read = step % 3 == 0;
        if (step == 4) {
          graphed->reconfigure_scaler(LossScalerConfig::fixed(0x1p12));
          plain->reconfigure_scaler(LossScalerConfig::fixed(0x1p12));
        }
        if (step == 13) {
          const StepResult a = counterfactual_step(*graphed, LossScalerConfig::fixed(0x1p12), inputs, labels, 0x1p3);
          const StepResult b = counterfactual_step(*plain, LossScalerConfig::fixed(0x1p12), inputs, labels, 0x1p3);
          CHECK(same_result(a, b));
        }
        const StepResult a = graphed->step(inputs, labels, record, read), b = plain->step(inputs, labels, record, read);
        CHECK(same_result(a, b));
        skipped += b.skipped ? 1 : 0;
      }
      CHECK(testing::same_state(graphed->state(), plain->state()));
      // The graphs were made and replayed, and only where asked for.
      // By the rule: per key the first step as it comes, the second captured, the rest replayed;
      // a new scaler rule (step 4, and twice in 13's counterfactual, whose step records as 10 to
      // 12 do) and new buffers (steps 6 and 9) start every key over. Captured: 1, 5, 7, 11, 14;
      // replayed: 2, 3, 8, 12, 15.
      const StepGraphStatistics used = statistics_of(*graphed);
      CHECK(used.captured == 5);
      CHECK(used.replayed == 5);
      CHECK(statistics_of(*plain).replayed == 0);
      if (precision == Precision::fp16) CHECK(skipped > 0);
    }
}

TEST_CASE("a step that reads back or uploads among its launches is refused as a graph, and runs as it comes") {
  // A StepGraphOps over the twin, driven directly: a download inside a captured step throws, and
  // the step's key is forgotten, so the next step of the key starts over.
  StepGraphOps ops(make_host_device_ops(), true);
  float* word = static_cast<float*>(ops.allocate(sizeof(float)));
  float value = 0;
  const auto reads_back = [&] {
    ops.zero(word, sizeof(float));
    ops.download(&value, word, sizeof value);
  };
  ops.run(1, true, reads_back);  // the first step of the key runs as it comes
  CHECK_THROWS_AS(ops.run(1, true, reads_back), std::logic_error);
  CHECK(ops.statistics().captured == 0);
  ops.run(1, false, reads_back);  // not eligible: as it comes
  const auto uploads = [&] { ops.upload(word, &value, sizeof value); };
  ops.run(2, true, uploads);
  CHECK_THROWS_WITH_AS(ops.run(2, true, uploads), doctest::Contains("uploaded"), std::logic_error);
  ops.release(word);
}
