// The counterfactual step: the next step again at another loss scale, applying nothing, is bit for
// bit what Apply at that scale gives, on both backends (the CPU's and the device step on its host
// twin), and asking for it leaves the run as it would have been.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "fpscope/analyzer/scale_semantics.hpp"
#include "fpscope/gpu/device_gpt.hpp"
#include "fpscope/gpu/device_mlp.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/host_device_ops.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/training_data.hpp"
#include "fpscope/gpu/training_session.hpp"
#include "fpscope/gpu/training_settings.hpp"
#include "fpscope/snapshot/run_store.hpp"
#include "trainers.hpp"

using namespace fpscope;

namespace {

using testing::MakeTrainer;
using testing::cpu;
using testing::device_twin;
using testing::same_state;

TrainingConfig mlp_config(Precision precision) {
  TrainingConfig c;
  c.layer_sizes = {16, 24, 20, 4};
  c.activation = Activation::tanh;
  c.precision = precision;
  c.rounding = RoundingMode::stochastic;  // the counter must be exactly where it was
  c.scaler = LossScalerConfig::pytorch();
  c.learning_rate = 64.0f;
  c.loss_weight = 0x1p-10f;  // gradients near fp16's subnormals: the scale decides what flushes
  c.seed = 5;
  return c;
}

TrainingConfig gpt_config(Precision precision) {
  TrainingConfig c = mlp_config(precision);
  c.gpt = GptShape{2, 16, 2, 8, 32};
  c.optimizer.kind = OptimizerKind::adamw;
  c.learning_rate = 1e-3f;
  c.loss_weight = 1.0f;
  return c;
}



bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void check_counterfactual_is_apply(const MakeTrainer& make, const TrainingConfig& config, int batch) {
  TrainingData data(config.gpt ? "synthetic" : "synthetic", config);
  std::unique_ptr<TrainerBackend> run = make(config);
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  for (int t = 0; t < 3; ++t) {
    data.next_batch(batch, inputs, labels);
    run->step(inputs, labels, false, true);
  }
  data.next_batch(batch, inputs, labels);  // step 3's batch
  const TrainerState at_t = run->state();
  for (const double scale : {1.0, 0x1p10, 0x1p20, 0x1p40}) {
    CAPTURE(scale);
    const StepResult counterfactual = counterfactual_step(*run, config.scaler, inputs, labels, scale);
    // Apply at `scale` on the same step: the run resumed from step 3's state with static scaling.
    std::unique_ptr<TrainerBackend> applied = make(config);
    applied->restore(at_t);
    applied->reconfigure_scaler(LossScalerConfig::fixed(scale));
    const StepResult expected = applied->step(inputs, labels, true, true);
    REQUIRE(counterfactual.snapshot);
    REQUIRE(expected.snapshot);
    CHECK(*counterfactual.snapshot == *expected.snapshot);  // every bin, every cast count, the loss
    CHECK(same_bits(counterfactual.loss, expected.loss));
    CHECK(counterfactual.skipped == expected.skipped);
    CHECK(counterfactual.loss_scale == scale);
    CHECK(same_state(run->state(), at_t));  // nothing applied: weights, optimizer, scaler, counter, step
  }
}

}  // namespace

TEST_CASE("a counterfactual step at S is, bit for bit, the step that Apply at S gives, and applies nothing") {
  for (const Precision precision : {Precision::fp16, Precision::bf16, Precision::fp16_pure}) {
    CAPTURE(precision_name(precision));
    SUBCASE("MLP, CPU backend") { check_counterfactual_is_apply(cpu, mlp_config(precision), 32); }
    SUBCASE("MLP, device step on the host twin") { check_counterfactual_is_apply(device_twin, mlp_config(precision), 32); }
    SUBCASE("GPT, CPU backend") { check_counterfactual_is_apply(cpu, gpt_config(precision), 3); }
    SUBCASE("GPT, device step on the host twin") { check_counterfactual_is_apply(device_twin, gpt_config(precision), 3); }
  }
}

TEST_CASE("asking for counterfactuals leaves a run bit for bit as it would have been") {
  for (const bool gpt : {false, true}) {
    CAPTURE(gpt);
    const TrainingConfig config = gpt ? gpt_config(Precision::fp16) : mlp_config(Precision::fp16);
    const int batch = gpt ? 3 : 32;
    std::unique_ptr<TrainerBackend> asked = cpu(config), plain = cpu(config);
    TrainingData data_asked("synthetic", config), data_plain("synthetic", config);
    Eigen::MatrixXf inputs;
    std::vector<int> labels;
    for (int t = 0; t < 6; ++t) {
      data_asked.next_batch(batch, inputs, labels);
      counterfactual_step(*asked, config.scaler, inputs, labels, std::ldexp(1.0, 4 * t));
      const StepResult a = asked->step(inputs, labels, true, true);
      data_plain.next_batch(batch, inputs, labels);
      const StepResult b = plain->step(inputs, labels, true, true);
      CHECK(*a.snapshot == *b.snapshot);
    }
    CHECK(same_state(asked->state(), plain->state()));
  }
}

namespace {
TrainingStatus wait_for(const TrainingSession& session, const std::function<bool(const TrainingStatus&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    const TrainingStatus status = session.status();
    if (done(status) || std::chrono::steady_clock::now() > deadline) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
std::shared_ptr<const CounterfactualResult> wait_for_answer(const TrainingSession& session, std::uint64_t answer) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    std::shared_ptr<const CounterfactualResult> got = session.counterfactual();
    if ((got && got->answer >= answer) || std::chrono::steady_clock::now() > deadline) return got;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
}  // namespace

TEST_CASE("the session answers counterfactuals between steps, paused or finished, and its run and log stay as without them") {
  TrainingSettings settings;
  settings.config = mlp_config(Precision::fp16);
  settings.backend = "cpu";
  settings.batch = 32;
  settings.steps = 8;
  settings.start_paused = true;

  RunStore asked_store, plain_store;
  TrainingSession asked(asked_store), plain(plain_store);
  asked.start(settings);
  plain.start(settings);
  std::uint64_t answers = 0;
  for (int t = 0; t < 8; ++t) {
    // Paused before step t: what step t would be at 2^12, then step t itself.
    asked.request_counterfactual(0x1p12);
    const std::shared_ptr<const CounterfactualResult> answer = wait_for_answer(asked, ++answers);
    REQUIRE(answer);
    CHECK(answer->step == t);
    CHECK(answer->loss_scale == 0x1p12);
    REQUIRE(answer->result.snapshot);
    for (TrainingSession* s : {&asked, &plain}) {
      s->single_step();
      wait_for(*s, [t](const TrainingStatus& st) { return st.step > t; });
    }
  }
  wait_for(asked, [](const TrainingStatus& st) { return st.state == TrainingStatus::State::finished; });
  wait_for(plain, [](const TrainingStatus& st) { return st.state == TrainingStatus::State::finished; });
  // Everything the run recorded (its log), step for step.
  CHECK(asked_store.copy_since(0) == plain_store.copy_since(0));
  CHECK(asked_store.update_since(0, 0).steps.size() == 8);
  CHECK(asked_store.update_since(0, 0).steps == plain_store.update_since(0, 0).steps);
  // A finished session still answers: its next step at another scale.
  asked.request_counterfactual(0x1p3);
  const std::shared_ptr<const CounterfactualResult> after = wait_for_answer(asked, ++answers);
  REQUIRE(after);
  CHECK(after->step == 8);
  CHECK(after->loss_scale == 0x1p3);
  CHECK(asked.status().state == TrainingStatus::State::finished);
  CHECK(asked.status().step == 8);
}

TEST_CASE("a counterfactual at the scale the run is about to use is the run's own next step") {
  TrainingSettings settings;
  settings.config = mlp_config(Precision::fp16);
  settings.config.scaler = LossScalerConfig::fixed(0x1p9);
  settings.backend = "cpu";
  settings.batch = 32;
  settings.start_paused = true;
  RunStore store;
  TrainingSession session(store);
  session.start(settings);
  session.request_counterfactual(0x1p9);
  const std::shared_ptr<const CounterfactualResult> answer = wait_for_answer(session, 1);
  REQUIRE(answer);
  session.single_step();
  wait_for(session, [](const TrainingStatus& st) { return st.step >= 1; });
  const std::vector<Snapshot> recorded = store.copy_since(0);
  REQUIRE(recorded.size() == 1);
  CHECK(recorded[0] == *answer->result.snapshot);
}

namespace {
// A tensor's shares of its nonzero finite values that its cast flushed, made subnormal, kept
// normal or overflowed (exact, from the cast's counts), in percent.
struct Shares {
  double flushed = 0, subnormal = 0, normal = 0, overflow = 0;
};
Shares cast_shares(const Snapshot& snapshot, const std::string& name, TensorKind kind) {
  for (const TensorRecord& t : snapshot.tensors) {
    if (t.name != name || t.kind != kind) continue;
    REQUIRE(t.cast);
    const ExponentHistogram& h = t.histogram;
    const double nonzero = static_cast<double>(h.total_count() - h.zero_count() - h.infinity_count() - h.nan_count());
    REQUIRE(nonzero > 0);
    const double flushed = static_cast<double>(t.cast->flushed_to_zero), subnormal = static_cast<double>(t.cast->made_subnormal),
                 overflow = static_cast<double>(t.cast->overflowed);
    return {100 * flushed / nonzero, 100 * subnormal / nonzero, 100 * (nonzero - flushed - subnormal - overflow) / nonzero, 100 * overflow / nonzero};
  }
  FAIL("no record of " << name);
  return {};
}
}  // namespace

namespace {
// The app's example (its settings, on the CPU), trained until it pauses itself at step 300.
void start_example_paused_at_300(TrainingSession& session, bool shadow) {
  TrainingOptions options;
  options.backend = "cpu";
  options.steps = "0";
  options.endless = true;
  options.shadow = shadow;
  TrainingSettings settings = parse_training_options(options);
  settings.pause_at_step = 300;
  session.start(settings);
  wait_for(session, [](const TrainingStatus& st) { return st.step >= 300 && st.state == TrainingStatus::State::paused; });
}
}  // namespace

namespace {
// The app's example, or its GPT, started without --shadow and paused at `pause_at`.
void start_unshadowed(TrainingSession& session, bool gpt, std::int64_t pause_at) {
  TrainingOptions options;
  options.backend = "cpu";
  options.steps = "0";
  options.endless = true;
  if (gpt) options.model = "gpt";
  TrainingSettings settings = parse_training_options(options);
  settings.pause_at_step = pause_at;
  session.start(settings);
  wait_for(session, [pause_at](const TrainingStatus& st) { return st.step >= pause_at && st.state == TrainingStatus::State::paused; });
}
// `count` shadow samples of a paused session's next step, one step taken after each (the app asks
// for one now and then as the run goes on), each as a snapshot of its records.
std::vector<Snapshot> shadow_samples(TrainingSession& session, int count) {
  std::vector<Snapshot> samples;
  const std::uint64_t answers = session.shadow_sample() ? session.shadow_sample()->answer : 0;
  for (int i = 0; i < count; ++i) {
    const std::int64_t step = session.status().step;
    session.request_shadow_sample();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    std::shared_ptr<const ShadowSample> sample;
    while ((!(sample = session.shadow_sample()) || sample->answer < answers + static_cast<std::uint64_t>(i + 1)) &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(sample);
    CHECK(sample->step == step);  // the next step's shadow
    for (const TensorRecord& t : sample->records) CHECK(is_shadow_tensor(t.name));
    Snapshot snapshot;
    snapshot.step = sample->step;
    snapshot.tensors = sample->records;
    samples.push_back(std::move(snapshot));
    session.single_step();
    wait_for(session, [step](const TrainingStatus& st) { return st.step > step; });
  }
  return samples;
}
}  // namespace

namespace {
// Previews `scale` for the paused session's next step (the re-run), applies it and trains five
// steps: the previewed step as Apply made it is the preview bit for bit; the next within 3 points
// of the preview's shares of `name`'s `kind`, the four after it within 4: other batches (the
// example's fc1 gradients at 2^10 move by a few points from one batch to the next), and
// weights that move on differently once their gradients are no longer flushed.
Shares preview_then_apply(TrainingSession& session, RunStore& store, double scale, const std::string& name, TensorKind kind) {
  const std::int64_t step = session.status().step;
  const std::uint64_t answers = session.counterfactual() ? session.counterfactual()->answer : 0;
  session.request_counterfactual(scale);
  const std::shared_ptr<const CounterfactualResult> preview = wait_for_answer(session, answers + 1);
  REQUIRE(preview);
  REQUIRE(preview->step == step);
  const Shares predicted = cast_shares(*preview->result.snapshot, name, kind);
  session.set_static_scale(scale);
  session.resume();
  wait_for(session, [step](const TrainingStatus& st) { return st.step >= step + 6; });
  session.pause();
  const std::vector<Snapshot> after = store.copy_since(static_cast<std::size_t>(step));
  REQUIRE(after.size() >= 6);
  CHECK(after[0] == *preview->result.snapshot);  // the step previewed, as Apply made it: bit for bit
  for (std::size_t i = 1; i < 6; ++i) {
    CAPTURE(after[i].step);
    const double points = i == 1 ? 3.0 : 4.0;
    const Shares realized = cast_shares(after[i], name, kind);
    CHECK(std::abs(realized.flushed - predicted.flushed) <= points);
    CHECK(std::abs(realized.subnormal - predicted.subnormal) <= points);
    CHECK(std::abs(realized.normal - predicted.normal) <= points);
    CHECK(std::abs(realized.overflow - predicted.overflow) <= points);
  }
  MESSAGE(name << " " << tensor_kind_name(kind) << " at 2^" << std::log2(scale) << ", previewed at step " << step << ": " << predicted.flushed
               << "% flushed, " << predicted.subnormal << "% subnormal, " << predicted.normal << "% normal, " << predicted.overflow << "% overflowed");
  return predicted;
}
}  // namespace

TEST_CASE("the example: the preview at 2^10 after 300 unscaled steps is what Apply then gives, within 3 points on the next step") {
  // The app's first minute: the example trains in fp16 without loss scaling, most of fc1's
  // gradients flushed by the time a person drags the slider; then Apply.
  RunStore store;
  TrainingSession session(store);
  start_example_paused_at_300(session, false);
  // What the shift of the recorded step would have said: nothing flushed at 2^10 among the few
  // values left; the re-run sees the gradients that are no longer flushed downstream.
  const Shares recorded = cast_shares(store.copy_since(store.size() - 1).front(), "fc1", TensorKind::activation_gradient);
  CHECK(recorded.flushed > 40);
  preview_then_apply(session, store, 0x1p10, "fc1", TensorKind::activation_gradient);
}

TEST_CASE("the preview at the advised scale is what Apply then gives: the example's fc1 and the GPT's h0.attn.scores gradients") {
  for (const bool gpt : {false, true}) {
    CAPTURE(gpt);
    RunStore store;
    TrainingSession session(store);
    start_unshadowed(session, gpt, 292);
    const LossScaleAdvice advice = recommend_loss_scale(tensor_series(shadow_samples(session, 8)), formats::fp16);
    REQUIRE(advice.kind == LossScaleAdvice::Kind::scale);
    const Shares predicted = preview_then_apply(session, store, std::ldexp(1.0, advice.scale_log2), gpt ? "h0.attn.scores" : "fc1",
                                                TensorKind::activation_gradient);
    CHECK(predicted.overflow == 0);  // the advice leaves headroom
  }
}

TEST_CASE("--shadow records each recorded step again in float32 without casts, beside the run's tensors, and changes nothing of the run") {
  for (const bool gpt : {false, true}) {
    CAPTURE(gpt);
    TrainingSettings settings;
    settings.config = gpt ? gpt_config(Precision::fp16) : mlp_config(Precision::fp16);
    settings.config.scaler = LossScalerConfig::fixed(0x1p8);
    settings.backend = "cpu";
    settings.batch = gpt ? 3 : 32;
    settings.steps = 4;
    settings.record_every = 2;
    RunStore shadowed_store, plain_store;
    {
      TrainingSettings with_shadow = settings;
      with_shadow.shadow = true;
      TrainingSession shadowed(shadowed_store), plain(plain_store);
      shadowed.start(with_shadow);
      plain.start(settings);
      REQUIRE(shadowed.wait_for_end(std::chrono::seconds(60)));
      REQUIRE(plain.wait_for_end(std::chrono::seconds(60)));
    }
    const std::vector<Snapshot> with = shadowed_store.copy_since(0), without = plain_store.copy_since(0);
    REQUIRE(with.size() == 2);
    REQUIRE(without.size() == 2);
    // Step 0's weights stepped by a float32 trainer built here, at the step's scale.
    TrainingConfig fp32_config = settings.config;
    fp32_config.precision = Precision::fp32;
    fp32_config.scaler = LossScalerConfig::fixed(0x1p8);
    std::unique_ptr<TrainerBackend> fp32 = cpu(fp32_config);
    fp32->restore(cpu(settings.config)->state());
    TrainingData data("synthetic", settings.config);
    Eigen::MatrixXf inputs;
    std::vector<int> labels;
    data.next_batch(settings.batch, inputs, labels);
    std::vector<TensorRecord> expected = fp32->step(inputs, labels, true, true).snapshot->tensors;
    for (TensorRecord& t : expected) {
      t.name = shadow_tensor_name(t.name);
      t.cast.reset();
    }
    for (std::size_t s = 0; s < 2; ++s) {
      const Snapshot& a = with[s];
      const Snapshot& b = without[s];
      REQUIRE(a.tensors.size() == 2 * b.tensors.size());
      Snapshot run_part = a;
      run_part.tensors.resize(b.tensors.size());
      CHECK(run_part == b);  // the run's own tensors, loss and scale: as without the shadow
      for (std::size_t i = 0; i < b.tensors.size(); ++i) {
        const TensorRecord& shadow = a.tensors[b.tensors.size() + i];
        CHECK(shadow.name == shadow_tensor_name(b.tensors[i].name));
        CHECK(is_shadow_tensor(shadow.name));
        CHECK(shadow.kind == b.tensors[i].kind);
        CHECK(shadow.captured == Capture::before_cast);
        CHECK(shadow.scale == b.tensors[i].scale);  // gradients carry the step's scale, the rest 1
        CHECK_FALSE(shadow.cast.has_value());       // float32 casts nothing
        if (s == 0) CHECK(shadow == expected[i]);   // bit for bit the float32 step
      }
    }
  }
}

namespace {
// Applies static scale 2^scale_log2 to a session paused at step 300 and trains it to step 800:
// the steps skipped for overflow meanwhile.
std::int64_t skips_after_applying(TrainingSession& session, int scale_log2) {
  const std::int64_t skipped_before = session.status().skipped_steps;
  session.set_static_scale(std::ldexp(1.0, scale_log2));
  session.resume();
  wait_for(session, [](const TrainingStatus& st) { return st.step >= 800; });
  session.pause();
  const TrainingStatus status = session.status();
  CHECK(status.step >= 800);
  return status.skipped_steps - skipped_before;
}
}  // namespace

TEST_CASE("the example: the advice from the fp32 shadow, applied at step 300, skips no step in the next 500") {
  RunStore store;
  TrainingSession session(store);
  start_example_paused_at_300(session, true);
  const std::vector<Snapshot> window = store.copy_since(store.size() - 20);  // the app's What-if window
  const LossScaleAdvice advice = recommend_loss_scale(tensor_series(window), formats::fp16);
  REQUIRE(advice.kind == LossScaleAdvice::Kind::scale);
  CHECK(advice.from_shadow);
  const std::int64_t skipped = skips_after_applying(session, advice.scale_log2);
  CHECK(skipped == 0);
  MESSAGE("advice 2^" << advice.scale_log2 << " (set by " << advice.decided_by << "): " << skipped << " steps skipped in 500");
}

TEST_CASE("without --shadow, advice from shadow samples of the latest steps, applied, skips no step in the next 500; sampling changes nothing") {
  // The app's advice where the run records no shadows: the fp32 shadow of the next step, asked
  // for now and then while it trains (request_shadow_sample), the last 32 of them.
  for (const bool gpt : {false, true}) {
    CAPTURE(gpt);
    RunStore store, plain_store;
    TrainingSession session(store), plain(plain_store);
    start_unshadowed(session, gpt, 268);
    const std::vector<Snapshot> samples = shadow_samples(session, 32);
    // Nothing of the samples reaches the run: its log is the log of a run never sampled.
    start_unshadowed(plain, gpt, 300);
    CHECK(store.copy_since(0) == plain_store.copy_since(0));
    const LossScaleAdvice advice = recommend_loss_scale(tensor_series(samples), formats::fp16);
    REQUIRE(advice.kind == LossScaleAdvice::Kind::scale);
    CHECK(advice.from_shadow);
    // For the message: what advice from the recorded (flushed) gradients would have said.
    const LossScaleAdvice flushed = recommend_loss_scale(tensor_series(store.copy_since(store.size() - 20)), formats::fp16);
    const std::int64_t skipped = skips_after_applying(session, advice.scale_log2);
    CHECK(skipped == 0);
    MESSAGE(std::string(gpt ? "GPT" : "example") << ": advice from 32 shadow samples 2^" << advice.scale_log2 << " (set by " << advice.decided_by
                                                 << "; from the recorded gradients 2^" << flushed.scale_log2 << "): " << skipped << " steps skipped in 500");
  }
}
