// The training thread: same bits as a direct run, pause / single step, live scale changes.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "fpscope/gpu/backend_choice.hpp"
#include "fpscope/gpu/checkpoint.hpp"
#include "fpscope/gpu/training_settings.hpp"
#include "fpscope/gpu/device_support.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/training_data.hpp"
#include "fpscope/gpu/training_defaults.hpp"
#include "fpscope/gpu/training_session.hpp"
#include "fpscope/snapshot/run_store.hpp"

using namespace fpscope;

namespace {
TrainingSettings small_settings(std::int64_t steps) {
  TrainingSettings s;
  s.config.layer_sizes = {8, 16, 4};
  s.config.activation = Activation::tanh;
  s.config.precision = Precision::fp16;
  s.config.seed = 7;
  s.batch = 16;
  s.steps = steps;
  s.backend = "cpu";  // the direct runs these are compared with are the CPU backend's
  return s;
}
TrainingStatus wait_until(const TrainingSession& session, TrainingStatus::State state, std::int64_t min_step = 0) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    const TrainingStatus status = session.status();
    if ((status.state == state && status.step >= min_step) || std::chrono::steady_clock::now() > deadline) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}
// Waits for a paused session's third step and checks that only the second was skipped.
std::vector<Snapshot> three_steps_the_middle_one_skipped(const TrainingSession& session, const RunStore& store) {
  const TrainingStatus status = wait_until(session, TrainingStatus::State::paused, 3);
  CHECK(status.state == TrainingStatus::State::paused);
  CHECK(status.skipped_steps == 1);
  std::vector<Snapshot> snapshots = store.copy_since(0);
  REQUIRE(snapshots.size() == 3);
  CHECK_FALSE(snapshots[0].skipped);
  CHECK(snapshots[1].skipped);
  CHECK_FALSE(snapshots[2].skipped);
  return snapshots;
}
}  // namespace

TEST_CASE("a session on its thread records the same snapshots as a direct run") {
  RunStore store;
  TrainingSession session(store);
  TrainingSettings settings = small_settings(25);
  session.start(settings);
  const TrainingStatus status = wait_until(session, TrainingStatus::State::finished);
  CHECK(status.state == TrainingStatus::State::finished);
  CHECK(status.step == 25);
  CHECK(store.header().precision == "fp16");
  CHECK(store.header().source == training_source);  // whichever front end started it
  CHECK(store.header().run_id.size() == 32);

  MlpTrainer direct(settings.config);
  TrainingData data(settings.data, settings.config.layer_sizes, settings.config.seed);
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  std::vector<Snapshot> expected;
  for (int i = 0; i < 25; ++i) {
    data.next_batch(settings.batch, inputs, labels);
    expected.push_back(*direct.step(inputs, labels, true).snapshot);
  }
  CHECK(store.copy_since(0) == expected);
}

TEST_CASE("pause, single step and resume") {
  RunStore store;
  TrainingSession session(store);
  TrainingSettings settings = small_settings(0);
  settings.start_paused = true;
  session.start(settings);
  CHECK(session.status().state == TrainingStatus::State::paused);
  for (int i = 0; i < 3; ++i) session.single_step();
  const TrainingStatus stepped = wait_until(session, TrainingStatus::State::paused, 3);
  CHECK(stepped.step == 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(session.status().step == 3);  // paused means paused
  CHECK(store.size() == 3);
  session.resume();
  CHECK(wait_until(session, TrainingStatus::State::running, 10).step >= 10);
  session.pause();
  const std::int64_t at_pause = wait_until(session, TrainingStatus::State::paused).step;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(session.status().step == at_pause);
  session.stop();
  CHECK(store.size() == static_cast<std::size_t>(at_pause));
  // Stop ends the run: the app's state swatch says finished, not paused, and nothing steps on.
  CHECK(session.status().state == TrainingStatus::State::finished);
  CHECK(session.status().step == at_pause);
  session.single_step();
  session.resume();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(session.status().step == at_pause);
}

TEST_CASE("pause_at_step pauses the run exactly there, and Resume goes on") {
  RunStore store;
  TrainingSession session(store);
  TrainingSettings settings = small_settings(0);
  settings.pause_at_step = 7;
  session.start(settings);
  const TrainingStatus paused = wait_until(session, TrainingStatus::State::paused, 7);
  CHECK(paused.state == TrainingStatus::State::paused);
  CHECK(paused.step == 7);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(session.status().step == 7);
  CHECK(store.size() == 7);
  session.resume();
  CHECK(wait_until(session, TrainingStatus::State::running, 12).step >= 12);
  session.stop();
}

TEST_CASE("reset forgets the run: idle, the store empty, and a new run starts from step 0") {
  RunStore store;
  TrainingSession session(store);
  session.start(small_settings(0));
  CHECK(wait_until(session, TrainingStatus::State::running, 5).step >= 5);
  session.reset();
  CHECK(session.status().state == TrainingStatus::State::idle);
  CHECK(session.status().step == 0);
  CHECK(store.size() == 0);
  CHECK(store.step_count() == 0);
  session.start(small_settings(4));
  const TrainingStatus again = wait_until(session, TrainingStatus::State::finished);
  CHECK(again.step == 4);
  CHECK(store.size() == 4);
  CHECK(store.copy_since(0).front().step == 0);
}

TEST_CASE("the slider's static scale reaches the next steps, and dynamic scaling comes back") {
  RunStore store;
  TrainingSession session(store);
  TrainingSettings settings = small_settings(0);
  settings.start_paused = true;
  session.start(settings);
  session.single_step();
  session.set_static_scale(8.0);
  session.single_step();
  session.set_dynamic_scaling();
  session.single_step();
  wait_until(session, TrainingStatus::State::paused, 3);
  const auto snapshots = store.copy_since(0);
  REQUIRE(snapshots.size() == 3);
  CHECK(snapshots[0].loss_scale == 65536.0);
  CHECK(snapshots[1].loss_scale == 8.0);
  CHECK(snapshots[2].loss_scale == 65536.0);
  CHECK(session.status().dynamic_scaling);
}

TEST_CASE("a fault injected from the app skips exactly the next step") {
  RunStore store;
  TrainingSession session(store);
  TrainingSettings settings = small_settings(0);
  settings.start_paused = true;
  session.start(settings);
  session.single_step();
  session.inject_next_step(FaultInjection::Value::infinity, 2);
  session.single_step();
  session.single_step();
  const std::vector<Snapshot> snapshots = three_steps_the_middle_one_skipped(session, store);
  CHECK(snapshots[2].loss_scale == snapshots[1].loss_scale / 2);
}

TEST_CASE("a fault injected from the app into a GPT's weight by name skips exactly the next step; a wrong name touches nothing") {
  RunStore store;
  TrainingSession session(store);
  TrainingSettings settings = small_settings(0);
  settings.config.gpt = GptShape{2, 8, 2, 5, 11};
  settings.config.optimizer.kind = OptimizerKind::adamw;
  settings.config.learning_rate = 1e-3f;
  settings.config.scaler = LossScalerConfig::pytorch();
  settings.data = "synthetic";
  settings.batch = 2;
  settings.start_paused = true;
  session.start(settings);
  session.single_step();
  session.inject_next_step(FaultInjection::Value::nan, "h1.mlp.fc");
  session.single_step();
  session.inject_next_step(FaultInjection::Value::nan, "h7.mlp.fc");  // no such block: nothing happens
  session.inject_next_step(FaultInjection::Value::nan, 1);            // an MLP's layer: not this run's
  session.single_step();
  const std::vector<Snapshot> snapshots = three_steps_the_middle_one_skipped(session, store);
  for (const TensorRecord& t : snapshots[1].tensors)
    if (t.kind == TensorKind::weight_gradient) CHECK(t.histogram.nan_count() == (t.name == "h1.mlp.fc" ? 1u : 0u));
}

TEST_CASE("bad settings throw before anything changes") {
  RunStore store;
  TrainingSession session(store);
  session.start(small_settings(2));
  wait_until(session, TrainingStatus::State::finished);
  const auto before = store.copy_since(0);
  TrainingSettings bad = small_settings(2);
  bad.data = "imagenet";
  CHECK_THROWS_WITH_AS(session.start(bad), doctest::Contains("unknown data 'imagenet'"), std::invalid_argument);
  bad.data = "mnist:/nonexistent/folder";
  CHECK_THROWS(session.start(bad));
  bad = small_settings(2);
  bad.backend = "gpu";
  CHECK_THROWS_WITH_AS(session.start(bad), "--backend gpu: not a backend (cpu, cuda or auto)", std::invalid_argument);
  std::string why;
  if (cuda_device_count(why) == 0) {
    // Where no device answers, asking for CUDA is one sentence that says why and what to do.
    bad.backend = "cuda";
    CHECK_THROWS_WITH_AS(session.start(bad), doctest::Contains("use --backend cpu (or auto)"), std::invalid_argument);
  }
  CHECK(store.copy_since(0) == before);
}

TEST_CASE("the backend interface: the CPU backend by name, and the scaler reconfigured through it") {
  const TrainingSettings settings = small_settings(0);
  std::unique_ptr<TrainerBackend> backend = make_trainer_backend("cpu", settings.config);
  CHECK(backend->name() == "cpu");
  MlpTrainer direct(settings.config);
  TrainingData data_a("synthetic", settings.config.layer_sizes, 1), data_b("synthetic", settings.config.layer_sizes, 1);
  Eigen::MatrixXf x;
  std::vector<int> y;
  direct.inject({FaultInjection::Value::nan, 1, 1});
  backend->inject({FaultInjection::Value::nan, 1, 1});
  for (int step = 0; step < 3; ++step) {
    data_a.next_batch(16, x, y);
    const StepResult a = direct.step(x, y, true);
    data_b.next_batch(16, x, y);
    const StepResult b = backend->step(x, y, true, false);  // the CPU knows its loss either way
    CHECK(a.snapshot == b.snapshot);
    CHECK(a.loss == b.loss);
  }
  CHECK(backend->step_count() == 3);
  CHECK(backend->scaler_state().skipped_steps == 1);
  backend->reconfigure_scaler(LossScalerConfig::fixed(1024));
  CHECK(backend->scaler_state().scale == 1024);
  CHECK(backend->scaler_state().skipped_steps == 1);  // the count of skipped steps goes on
  if (std::string why; cuda_device_count(why) == 0) CHECK(make_trainer_backend("auto", settings.config)->name() == "cpu");
}

TEST_CASE("device_backend_lacks names what the CUDA backend cannot train, and auto trains those runs on the CPU") {
  TrainingConfig config = small_settings(4).config;
  CHECK(device_backend_lacks(config.recipe).empty());
  config.recipe.recipe = GemmRecipe::nvfp4;
  CHECK(device_backend_lacks(config.recipe).empty());  // recipes, optimizers and the GPT run there
  config.recipe.square_weight_tiles = true;
  CHECK(device_backend_lacks(config.recipe).find("--weight-blocks 2d") != std::string::npos);
  CHECK(make_trainer_backend("auto", config)->name() == "cpu");  // a GPU or none
  config.recipe.square_weight_tiles = false;
  config.recipe.hadamard_weight_gradients = true;
  CHECK(device_backend_lacks(config.recipe).find("--hadamard") != std::string::npos);
  CHECK(make_trainer_backend("auto", config)->name() == "cpu");
}

TEST_CASE("a session with an FP8 recipe: the header names it, and every step record carries each operand's scaling") {
  RunStore store;
  TrainingSession session(store);
  TrainingSettings settings = small_settings(12);
  settings.config.precision = Precision::bf16;
  settings.config.recipe.recipe = GemmRecipe::fp8_current;
  settings.record_every = 5;
  session.start(settings);
  CHECK(wait_until(session, TrainingStatus::State::finished).step == 12);
  CHECK(store.header().recipe == "fp8-current (hybrid, margin 0)");
  const RunStore::Update update = store.update_since(store.generation(), 0);
  REQUIRE(update.steps.size() == 12);
  const std::size_t operands = 3 * (settings.config.layer_sizes.size() - 1);
  for (const StepRecord& step : update.steps) {
    CAPTURE(step.step);
    REQUIRE(step.scaling.size() == operands);
    for (const OperandScaling& o : step.scaling) CHECK(o.scale > 0);
  }
  MlpTrainer direct(settings.config);  // the same scaling as a direct run
  TrainingData data(settings.data, settings.config.layer_sizes, settings.config.seed);
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  for (const StepRecord& step : update.steps) {
    data.next_batch(settings.batch, inputs, labels);
    CHECK(direct.step(inputs, labels, false).scaling == step.scaling);
  }
}

TEST_CASE("the settings that differ between an MLP and a GPT follow the model's kind where they are at a default") {
  using namespace fpscope::training_defaults;
  const KindSettings mlp = kind_defaults(false), gpt_settings = kind_defaults(true);
  CHECK(mlp == KindSettings{batch, learning_rate, loss_weight_log2, optimizer});
  CHECK(gpt_settings == KindSettings{gpt::batch, gpt::learning_rate, gpt::loss_weight_log2, gpt::optimizer});
  CHECK(gpt_settings.batch == 16);
  CHECK(gpt_settings.optimizer == OptimizerKind::adamw);
  CHECK(follow_model_kind(mlp, false, true) == gpt_settings);   // an MLP's defaults become a GPT's
  CHECK(follow_model_kind(gpt_settings, true, false) == mlp);   // and back
  CHECK(follow_model_kind(mlp, false, false) == mlp);           // no change of kind, no change
  // What the user set stays; the rest follows.
  KindSettings chosen = mlp;
  chosen.batch = 64;
  chosen.optimizer = OptimizerKind::momentum;
  const KindSettings followed = follow_model_kind(chosen, false, true);
  CHECK(followed.batch == 64);
  CHECK(followed.optimizer == OptimizerKind::momentum);
  CHECK(followed.learning_rate == gpt::learning_rate);
  CHECK(followed.loss_weight_log2 == gpt::loss_weight_log2);
}

namespace {
// A sink that keeps what reaches it, in order, and counts its syncs.
struct RecordingSink final : RunSink {
  bool keeps = true;
  std::vector<RunHeader> begun;
  std::vector<StepRecord> steps;
  std::vector<Snapshot> snapshots;
  int syncs = 0;
  void begin(const RunHeader& header) override { begun.push_back(header); }
  void append(Snapshot snapshot) override {
    steps.push_back(snapshot.step_record());
    snapshots.push_back(std::move(snapshot));
  }
  void append_step(const StepRecord& step) override { steps.push_back(step); }
  bool keeps_steps() const override { return keeps; }
  RunLogPosition sync() override {
    ++syncs;
    return {static_cast<std::uint64_t>(steps.size()), 0};
  }
};
}  // namespace

TEST_CASE("the session writes every step to its sink, records every Nth, and syncs before it says it finished") {
  RecordingSink sink;
  TrainingSession session(sink);
  TrainingSettings settings = small_settings(10);
  settings.record_every = 4;
  session.start(settings);
  REQUIRE(session.wait_for_end(std::chrono::seconds(30)));
  CHECK(session.status().state == TrainingStatus::State::finished);
  REQUIRE(sink.begun.size() == 1);
  CHECK(sink.begun[0].run_id.size() == 32);
  REQUIRE(sink.steps.size() == 10);
  for (std::size_t i = 0; i < sink.steps.size(); ++i) CHECK(sink.steps[i].step == static_cast<std::int64_t>(i));
  REQUIRE(sink.snapshots.size() == 3);  // steps 0, 4, 8
  CHECK(sink.snapshots[1].step == 4);
  CHECK(sink.syncs >= 1);
  session.rethrow_failure();  // nothing: it did not fail
}

TEST_CASE("a sink that keeps no steps gets none, and the run trains the same bits") {
  RecordingSink quiet;
  quiet.keeps = false;
  TrainingSession session(quiet);
  session.start(small_settings(6));
  REQUIRE(session.wait_for_end(std::chrono::seconds(30)));
  CHECK(quiet.steps.empty());
  CHECK(quiet.snapshots.empty());

  RecordingSink kept;
  TrainingSession kept_session(kept);
  kept_session.start(small_settings(6));
  REQUIRE(kept_session.wait_for_end(std::chrono::seconds(30)));
  REQUIRE(kept.steps.size() == 6);
  CHECK(session.status().loss == kept_session.status().loss);  // the last step's, bit for bit
  CHECK(session.status().loss_scale == kept_session.status().loss_scale);
}

TEST_CASE("extras: every batch is seen before it trains, and checkpoints are written after the sink synced") {
  const std::filesystem::path folder = std::filesystem::temp_directory_path() / ("fpscope-session-" + new_run_id());
  std::filesystem::create_directories(folder);
  RecordingSink sink;
  TrainingSession session(sink);
  PreparedRun run = prepare_training(small_settings(7));
  const std::string run_id = run.header.run_id;
  RunExtras extras;
  extras.checkpoints = CheckpointPlan{resolve_output(folder / "run.ckpt", "--checkpoint"), 3, "the settings"};
  std::vector<std::int64_t> seen;
  extras.on_batch = [&](std::int64_t step, const Eigen::MatrixXf& inputs, const std::vector<int>& labels) {
    CHECK(inputs.rows() == 16);
    CHECK(labels.size() == 16);
    seen.push_back(step);
  };
  session.start(std::move(run), std::move(extras));
  REQUIRE(session.wait_for_end(std::chrono::seconds(30)));
  CHECK(seen == std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6});
  const TrainingCheckpoint checkpoint = read_checkpoint(folder / "run.ckpt");
  CHECK(checkpoint.trainer.steps == 6);  // the last of steps 3 and 6
  CHECK(checkpoint.settings == "the settings");
  CHECK(checkpoint.run_id == run_id);
  CHECK(checkpoint.run_log_bytes == 6);  // where the sink said it stood when the checkpoint was taken
  std::filesystem::remove_all(folder);
}

TEST_CASE("a run that fails says so and gives back its exception") {
  RecordingSink sink;
  TrainingSession session(sink);
  RunExtras extras;
  extras.on_batch = [](std::int64_t step, const Eigen::MatrixXf&, const std::vector<int>&) {
    if (step == 2) throw std::runtime_error("the disk is full");
  };
  session.start(prepare_training(small_settings(5)), std::move(extras));
  REQUIRE(session.wait_for_end(std::chrono::seconds(30)));
  const TrainingStatus status = session.status();
  CHECK(status.state == TrainingStatus::State::failed);
  CHECK(status.error == "the disk is full");
  CHECK(sink.steps.size() == 2);
  CHECK_THROWS_WITH_AS(session.rethrow_failure(), "the disk is full", std::runtime_error);
}

TEST_CASE("one parser: the example's defaults, a GPT's own, and each option checked against the others") {
  TrainingOptions options;
  TrainingSettings example = parse_training_options(options);
  CHECK(example.config.layer_sizes == parse_layer_sizes(training_defaults::model));
  CHECK(example.config.activation == training_defaults::activation);
  CHECK(example.config.precision == training_defaults::precision);
  CHECK(example.config.scaler.kind == LossScalerConfig::Kind::none);
  CHECK(example.batch == training_defaults::batch);
  CHECK(example.config.learning_rate == training_defaults::learning_rate);
  CHECK(example.config.loss_weight == std::ldexp(1.0f, training_defaults::loss_weight_log2));
  CHECK(example.steps == training_defaults::cli_steps);

  options.model = "gpt:layers=1,width=16,heads=2,context=8";
  const TrainingSettings gpt = parse_training_options(options);
  CHECK(gpt.batch == training_defaults::gpt::batch);
  CHECK(gpt.config.learning_rate == training_defaults::gpt::learning_rate);
  CHECK(gpt.config.optimizer.kind == training_defaults::gpt::optimizer);
  CHECK(gpt.config.loss_weight == 1.0f);

  const auto refused = [](TrainingOptions o, const std::string& sentence) {
    CHECK_THROWS_WITH_AS(parse_training_options(o), sentence.c_str(), TrainingOptionError);
  };
  TrainingOptions o;
  o.lr = "";
  refused(o, "--lr '' is not a finite positive number that float32 holds");  // given empty is not the default
  o = {};
  o.steps = "0";
  refused(o, "--steps '0' is not a whole number from 1 to 1000000000000");
  o.endless = true;  // the app's: 0 runs until stopped
  CHECK(parse_training_options(o).steps == 0);
  o = {};
  o.model = "gpt";
  o.activation = "relu";
  refused(o, "--activation sets an MLP's; a GPT's blocks use GELU");
  o = {};
  o.amax_history = "8";
  refused(o, "--amax-history is the delayed recipe's: use --recipe fp8-delayed");
  o.recipe = "fp8-delayed";
  CHECK(parse_training_options(o).config.recipe.amax_history == 8);
  o = {};
  o.hadamard = true;
  refused(o, "--hadamard turns the weight gradient's operands for the block-scaled recipes: use --recipe nvfp4, mxfp8, mxfp6 or mxfp4");
  o = {};
  o.weight_decay = "0.01";
  refused(o, "--weight-decay is AdamW's decoupled decay: use --optimizer adamw");
  o = {};
  o.steps = "10";
  o.inject = {"nan@fc2:10"};
  refused(o, "--inject nan@fc2:10 is at step 10, but the run's steps are 0 to 9");
  o = {};
  o.backend = "tpu";
  refused(o, "unknown --backend 'tpu': expected auto, cpu or cuda");
  o = {};
  o.seed = "-1";
  refused(o, "--seed '-1' is not a whole number from 0 to 18446744073709551615");
  o = {};
  o.precision = "fp32";
  o.loss_scale = "dynamic";  // fp32 has nothing to flush
  CHECK(parse_training_options(o).config.scaler.kind == LossScalerConfig::Kind::none);
}
