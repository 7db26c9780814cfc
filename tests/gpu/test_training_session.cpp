// The training thread: same bits as a direct run, pause / single step, live scale changes.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "fpscope/gpu/backend_choice.hpp"
#include "fpscope/gpu/device_support.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/training_data.hpp"
#include "fpscope/gpu/training_defaults.hpp"
#include "fpscope/gpu/training_session.hpp"

using namespace fpscope;

namespace {
TrainingSettings small_settings(std::int64_t steps) {
  TrainingSettings s;
  s.mlp.layer_sizes = {8, 16, 4};
  s.mlp.activation = Activation::tanh;
  s.mlp.precision = Precision::fp16;
  s.mlp.seed = 7;
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
  settings.source = "a test";  // the session says who trains as it is told; it knows no app
  session.start(settings);
  const TrainingStatus status = wait_until(session, TrainingStatus::State::finished);
  CHECK(status.state == TrainingStatus::State::finished);
  CHECK(status.step == 25);
  CHECK(store.header().precision == "fp16");
  CHECK(store.header().source == "a test");
  CHECK(store.header().run_id.size() == 32);

  MlpTrainer direct(settings.mlp);
  TrainingData data(settings.data, settings.mlp.layer_sizes, settings.mlp.seed);
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
  settings.mlp.gpt = GptShape{2, 8, 2, 5, 11};
  settings.mlp.optimizer.kind = OptimizerKind::adamw;
  settings.mlp.learning_rate = 1e-3f;
  settings.mlp.scaler = LossScalerConfig::pytorch();
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
  std::unique_ptr<TrainerBackend> backend = make_trainer_backend("cpu", settings.mlp);
  CHECK(backend->name() == "cpu");
  MlpTrainer direct(settings.mlp);
  TrainingData data_a("synthetic", settings.mlp.layer_sizes, 1), data_b("synthetic", settings.mlp.layer_sizes, 1);
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
  if (std::string why; cuda_device_count(why) == 0) CHECK(make_trainer_backend("auto", settings.mlp)->name() == "cpu");
}

TEST_CASE("device_backend_lacks names what the CUDA backend cannot train, and auto trains those runs on the CPU") {
  MlpConfig config = small_settings(4).mlp;
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
  settings.mlp.precision = Precision::bf16;
  settings.mlp.recipe.recipe = GemmRecipe::fp8_current;
  settings.record_every = 5;
  session.start(settings);
  CHECK(wait_until(session, TrainingStatus::State::finished).step == 12);
  CHECK(store.header().recipe == "fp8-current (hybrid, margin 0)");
  const RunStore::Update update = store.update_since(store.generation(), 0);
  REQUIRE(update.steps.size() == 12);
  const std::size_t operands = 3 * (settings.mlp.layer_sizes.size() - 1);
  for (const StepRecord& step : update.steps) {
    CAPTURE(step.step);
    REQUIRE(step.scaling.size() == operands);
    for (const OperandScaling& o : step.scaling) CHECK(o.scale > 0);
  }
  MlpTrainer direct(settings.mlp);  // the same scaling as a direct run
  TrainingData data(settings.data, settings.mlp.layer_sizes, settings.mlp.seed);
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
