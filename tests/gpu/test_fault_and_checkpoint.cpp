// Fault injection skips the step and leaves master weights bit-identical; checkpoints restore the same bits.
#include <doctest/doctest.h>

#include <limits>

#include <functional>

#include <cstring>

#include "fpscope/gpu/checkpoint.hpp"
#include "fpscope/gpu/training_data.hpp"

using namespace fpscope;

namespace {

TrainingConfig small_config(Precision precision, RoundingMode rounding = RoundingMode::nearest_even) {
  TrainingConfig config;
  config.layer_sizes = {8, 16, 12, 4};
  config.activation = Activation::tanh;
  config.precision = precision;
  config.rounding = rounding;
  config.seed = 5;
  if (precision == Precision::fp32) config.scaler = LossScalerConfig::none();
  return config;
}

bool same_bits(const std::vector<Eigen::MatrixXf>& a, const std::vector<Eigen::MatrixXf>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), sizeof(float) * static_cast<std::size_t>(a[i].size())) != 0)
      return false;
  return true;
}

}  // namespace

TEST_CASE("an injected nan or inf skips the step, backs the scaler off, keeps the weights, and is recorded") {
  for (const auto value : {FaultInjection::Value::nan, FaultInjection::Value::infinity}) {
    for (const Precision precision : {Precision::fp16, Precision::fp32}) {
      MlpTrainer trainer(small_config(precision));
      TrainingData data("synthetic", trainer.config().layer_sizes, 5);
      trainer.inject({value, 2, 3});
      Eigen::MatrixXf x;
      std::vector<int> y;
      for (int step = 0; step < 3; ++step) {
        data.next_batch(16, x, y);
        CHECK_FALSE(trainer.step(x, y, false).skipped);
      }
      const auto weights = trainer.weights();
      const double scale_before = trainer.scaler().scale();
      data.next_batch(16, x, y);
      const StepResult faulty = trainer.step(x, y, true);
      CHECK(faulty.skipped);
      CHECK(same_bits(trainer.weights(), weights));
      CHECK(trainer.scaler().state().skipped_steps == 1);
      if (precision == Precision::fp16) CHECK(trainer.scaler().scale() == scale_before / 2);
      REQUIRE(faulty.snapshot);
      CHECK(faulty.snapshot->skipped);
      for (const TensorRecord& t : faulty.snapshot->tensors) {
        const bool target = t.name == "fc2" && t.kind == TensorKind::weight_gradient;
        const auto specials = value == FaultInjection::Value::nan ? t.histogram.nan_count() : t.histogram.infinity_count();
        CHECK_MESSAGE(specials == (target ? 1u : 0u), t.name, " ", tensor_kind_name(t.kind));
      }
      data.next_batch(16, x, y);
      CHECK_FALSE(trainer.step(x, y, false).skipped);  // the next step goes on
    }
  }
}

TEST_CASE("fault specs are parsed strictly") {
  CHECK(parse_fault_injection("nan@fc2:100", 3) == FaultInjection{FaultInjection::Value::nan, 2, 100});
  CHECK(parse_fault_injection("inf@1:0", 3) == FaultInjection{FaultInjection::Value::infinity, 1, 0});
  for (const char* bad : {"", "nan", "nan@", "nan@fc2", "nan@fc2:", "zero@fc1:3", "nan@fc0:3", "nan@fc4:3", "nan@fcx:3", "nan@fc1:-1",
                          "nan@fc1:3x", "nan@ fc1:3", "NaN@fc1:3", "nan@fc1:99999999999999999999"})
    CHECK_THROWS_AS(parse_fault_injection(bad, 3), std::invalid_argument);
  CHECK(describe(parse_fault_injection("inf@fc3:7", 3)) == "inf@fc3:7");
}

TEST_CASE("a checkpoint restored into a new trainer goes on with the same bits") {
  for (const RoundingMode rounding : {RoundingMode::nearest_even, RoundingMode::stochastic}) {
    const TrainingConfig config = small_config(Precision::fp16, rounding);
    MlpTrainer straight(config);
    TrainingData straight_data("synthetic", config.layer_sizes, 5);
    MlpTrainer first(config);
    TrainingData first_data("synthetic", config.layer_sizes, 5);
    Eigen::MatrixXf x;
    std::vector<int> y;
    std::vector<Snapshot> expected, got;
    for (int step = 0; step < 12; ++step) {
      straight_data.next_batch(16, x, y);
      expected.push_back(*straight.step(x, y, true).snapshot);
    }
    for (int step = 0; step < 5; ++step) {
      first_data.next_batch(16, x, y);
      got.push_back(*first.step(x, y, true).snapshot);
    }
    const std::string bytes = encode_checkpoint({"settings", first.state(), first_data.save_state(), "0123abcd", 1234, 0xDEADBEEF});
    const TrainingCheckpoint back = decode_checkpoint(bytes, "test");
    CHECK(back.settings == "settings");
    CHECK(back.run_id == "0123abcd");
    CHECK(back.run_log_bytes == 1234);
    CHECK(back.run_log_crc32 == 0xDEADBEEF);
    MlpTrainer resumed(config);  // fresh: initial weights and data at step 0
    TrainingData resumed_data("synthetic", config.layer_sizes, 5);
    resumed.restore(back.trainer);
    resumed_data.restore_state(back.data_state);
    CHECK(resumed.step_count() == 5);
    for (int step = 5; step < 12; ++step) {
      resumed_data.next_batch(16, x, y);
      got.push_back(*resumed.step(x, y, true).snapshot);
    }
    CHECK(got == expected);
    CHECK(same_bits(resumed.weights(), straight.weights()));
  }
}

TEST_CASE("a damaged checkpoint is refused with one sentence") {
  MlpTrainer trainer(small_config(Precision::bf16));
  const std::string bytes = encode_checkpoint({"s", trainer.state(), "state", "id", 0, 0});
  CHECK_THROWS_WITH_AS(decode_checkpoint("hello", "c.ckpt"), doctest::Contains("c.ckpt is not an fpscope checkpoint"), CheckpointError);
  for (std::size_t cut : {bytes.size() - 1, bytes.size() / 2, std::size_t{20}})
    CHECK_THROWS_AS(decode_checkpoint(std::string_view(bytes).substr(0, cut), "c.ckpt"), CheckpointError);
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x10;
  CHECK_THROWS_WITH_AS(decode_checkpoint(flipped, "c.ckpt"), doctest::Contains("checksum"), CheckpointError);
  TrainingConfig other = small_config(Precision::bf16);
  other.layer_sizes = {8, 16, 4};
  MlpTrainer wrong(other);
  CHECK_THROWS_AS(wrong.restore(decode_checkpoint(bytes, "c.ckpt").trainer), std::invalid_argument);
  TrainingData data("synthetic", {8, 4}, 1);
  CHECK_THROWS_AS(data.restore_state("not a generator state"), std::invalid_argument);
}

TEST_CASE("a checkpoint whose checksum holds but whose state makes no sense is refused, saying what") {
  // Written whole (the checksum is right), by a crafted writer: a state no run can be in.
  MlpTrainer trainer(small_config(Precision::fp16));
  const auto crafted = [&](const std::function<void(TrainerState&)>& change) {
    TrainerState state = trainer.state();
    state.steps = 10;
    change(state);
    return encode_checkpoint({"s", state, "state", "id", 0, 0});
  };
  CHECK_NOTHROW(decode_checkpoint(crafted([](TrainerState&) {}), "c.ckpt"));
  CHECK_THROWS_WITH_AS(decode_checkpoint(crafted([](TrainerState& s) { s.scaler.scale = std::numeric_limits<double>::infinity(); }), "c.ckpt"),
                       doctest::Contains("a loss scale of inf"), CheckpointError);
  CHECK_THROWS_WITH_AS(decode_checkpoint(crafted([](TrainerState& s) { s.scaler.scale = 1e300; }), "c.ckpt"), doctest::Contains("a loss scale of 1e+300"),
                       CheckpointError);
  CHECK_THROWS_WITH_AS(decode_checkpoint(crafted([](TrainerState& s) { s.scaler.skipped_steps = -3; }), "c.ckpt"),
                       doctest::Contains("-3 skipped"), CheckpointError);
  CHECK_THROWS_WITH_AS(decode_checkpoint(crafted([](TrainerState& s) { s.scaler.skipped_steps = 11; }), "c.ckpt"),
                       doctest::Contains("11 skipped and 0 finite steps after 10 steps"), CheckpointError);
  CHECK_THROWS_WITH_AS(decode_checkpoint(crafted([](TrainerState& s) { s.steps = -1; }), "c.ckpt"), doctest::Contains("step -1"), CheckpointError);
}
