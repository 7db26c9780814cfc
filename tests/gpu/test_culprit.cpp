// The culprit report: the step sentinel's readings name the first tensor in execution order that
// held a NaN, an infinity or a value past the format's largest -- an injected fault at its tensor,
// an overflow from too high a static scale where a hand computation says -- on both backends (the
// CPU's and the device step on its host twin); the sentinel changes no bit of a run; a skipped
// step between recorded ones gets the histograms it would have had recorded.
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "fpscope/analyzer/culprit_diagnosis.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/gpu/device_gpt.hpp"
#include "fpscope/gpu/device_mlp.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/host_device_ops.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/training_data.hpp"
#include "fpscope/gpu/training_session.hpp"
#include "fpscope/snapshot/culprit.hpp"
#include "fpscope/snapshot/run_store.hpp"
#include "trainers.hpp"

using namespace fpscope;

namespace {

using testing::MakeTrainer;
using testing::cpu;
using testing::device_twin;
using testing::same_state;

TrainingConfig mlp_config() {
  TrainingConfig c;
  c.layer_sizes = {12, 20, 16, 4};
  c.activation = Activation::tanh;
  c.precision = Precision::fp16;
  c.rounding = RoundingMode::stochastic;  // a replay must draw the same random words
  c.scaler = LossScalerConfig::pytorch();
  c.seed = 3;
  return c;
}

// At GradScaler's 2^16 this GPT's token embeddings' gradient overflows fp16 by itself (a sum over
// every token): the fault cases take a static 2^4.
TrainingConfig gpt_config() {
  TrainingConfig c = mlp_config();
  c.gpt = GptShape{2, 16, 2, 8, 32};
  c.optimizer.kind = OptimizerKind::adamw;
  c.learning_rate = 1e-3f;
  return c;
}

TrainingConfig gpt_at(double scale) {
  TrainingConfig c = gpt_config();
  c.scaler = LossScalerConfig::fixed(scale);
  return c;
}

std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}


// Steps `trainer` through `steps` unrecorded steps of its synthetic data; the last step's result.
StepResult run_steps(TrainerBackend& trainer, const TrainingConfig& config, int batch, int steps) {
  TrainingData data("synthetic", config);
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  StepResult last;
  for (int t = 0; t < steps; ++t) {
    data.next_batch(batch, inputs, labels);
    last = trainer.step(inputs, labels, false, true);
  }
  return last;
}

}  // namespace

TEST_CASE("culprit: the first reading with a fault, and what came before it") {
  const auto reading = [](const char* name, TensorKind kind, float largest) { return SentinelReading{name, kind, bits_of(std::abs(largest))}; };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<SentinelReading> readings{reading("fc1", TensorKind::weight, 0.5f), reading("fc1", TensorKind::activation, 900.0f),
                                        reading("fc2", TensorKind::activation, 3.0f), reading("fc2", TensorKind::activation_gradient, 65504.0f)};
  CHECK_FALSE(find_culprit(readings, "fp16", 65504.0));  // 65504 is fp16's largest: within it
  readings.push_back(reading("fc2", TensorKind::weight_gradient, 70000.0f));
  readings.push_back(reading("fc1", TensorKind::activation_gradient, nan));
  std::optional<Culprit> c = find_culprit(readings, "fp16", 65504.0);
  REQUIRE(c);
  CHECK(c->name == "fc2");
  CHECK(c->kind == TensorKind::weight_gradient);
  CHECK(c->fault == CulpritFault::overflow);
  CHECK(c->largest == 70000.0);
  CHECK(c->position == 4);
  CHECK(c->upstream == "fc2");
  CHECK(c->upstream_kind == TensorKind::activation_gradient);
  CHECK(c->upstream_largest == 65504.0);
  // In bf16 70000 is nothing; the NaN after it is the culprit.
  c = find_culprit(readings, "bf16", 3.3895313892515355e38);
  REQUIRE(c);
  CHECK(c->fault == CulpritFault::nan);
  CHECK(c->position == 5);
  CHECK_FALSE(c->largest);
  CHECK(c->upstream_largest == 70000.0);
  readings.insert(readings.begin(), reading("fc1", TensorKind::weight, -inf));
  c = find_culprit(readings, "bf16", 3.3895313892515355e38);
  REQUIRE(c);
  CHECK(c->fault == CulpritFault::infinity);
  CHECK(c->position == 0);
  CHECK(c->upstream.empty());
}

TEST_CASE("culprit: an injected NaN or infinity is named at its tensor, recorded step or not, on both backends") {
  struct Case {
    const char* what;
    TrainingConfig config;
    int batch;
    FaultInjection fault;
    const char* tensor;
  };
  const std::vector<Case> cases{
      {"MLP nan@fc2:3", mlp_config(), 24, FaultInjection{FaultInjection::Value::nan, 2, 3, {}}, "fc2"},
      {"MLP inf@fc1:2", mlp_config(), 24, FaultInjection{FaultInjection::Value::infinity, 1, 2, {}}, "fc1"},
      {"GPT nan@h1.mlp.fc:2", gpt_at(0x1p4), 3, FaultInjection{FaultInjection::Value::nan, 0, 2, "h1.mlp.fc"}, "h1.mlp.fc"},
      {"GPT inf@h0.attn.qkv:1", gpt_at(0x1p4), 3, FaultInjection{FaultInjection::Value::infinity, 0, 1, "h0.attn.qkv"}, "h0.attn.qkv"},
  };
  for (const Case& k : cases) {
    CAPTURE(std::string(k.what));
    std::vector<SentinelReading> cpu_readings;
    for (const bool twin : {false, true}) {
      CAPTURE(twin);
      std::unique_ptr<TrainerBackend> trainer = (twin ? device_twin : cpu)(k.config);
      trainer->inject(k.fault);
      const StepResult result = run_steps(*trainer, k.config, k.batch, static_cast<int>(k.fault.step) + 1);
      CHECK(result.skipped);
      const std::optional<Culprit> culprit = step_culprit(result, trainer->format(), nullptr);
      REQUIRE(culprit);
      CHECK(culprit->name == k.tensor);
      CHECK(culprit->kind == TensorKind::weight_gradient);
      CHECK(culprit->fault == (k.fault.value == FaultInjection::Value::nan ? CulpritFault::nan : CulpritFault::infinity));
      CHECK(culprit->format == "fp16");
      CHECK(culprit->format_largest == 65504.0);
      CHECK_FALSE(culprit->upstream.empty());
      CHECK(culprit_diagnosis(StepRecord{k.fault.step, result.loss, result.loss_scale, true, {}, *culprit}).find("not a scaling problem") !=
            std::string::npos);
      // The device step reads the same tensors in the same order (its products' bits are its own).
      if (!twin) {
        cpu_readings = result.sentinel;
        continue;
      }
      REQUIRE(result.sentinel.size() == cpu_readings.size());
      for (std::size_t i = 0; i < cpu_readings.size(); ++i) {
        CHECK(result.sentinel[i].name == cpu_readings[i].name);
        CHECK(result.sentinel[i].kind == cpu_readings[i].kind);
      }
    }
  }
}

TEST_CASE("culprit: too high a static scale names the first tensor to overflow fp16, as a hand computation says") {
  // A 2-2-2 tanh MLP, batch 1, fp16, weights of a few bits each so that the forward's casts are
  // exact, inputs large: fc1's weight gradient (dz1^T x) is the largest gradient. The chain rule in
  // double predicts each tensor's largest magnitude at scale 1; the casts of tanh's outputs and
  // of the gradients move them by under 2^-9 relative (a few fp16 roundings), so every scale below
  // leaves each prediction at least 10% from fp16's largest, and the prediction of which tensor
  // overflows first is exact.
  TrainingConfig config;
  config.layer_sizes = {2, 2, 2};
  config.activation = Activation::tanh;
  config.precision = Precision::fp16;
  const double w1[2][2] = {{0x1p-10, -0x1p-11}, {0x1p-9, 0x1p-10}};
  const double w2[2][2] = {{0.75, -0.5}, {-1.25, 1.5}};
  const double x[2] = {1000.0, -500.0};
  const int label = 1;
  // Forward.
  double z1[2], a1[2], z2[2];
  for (int i = 0; i < 2; ++i) z1[i] = w1[i][0] * x[0] + w1[i][1] * x[1];
  for (int i = 0; i < 2; ++i) a1[i] = std::tanh(z1[i]);
  for (int i = 0; i < 2; ++i) z2[i] = w2[i][0] * a1[0] + w2[i][1] * a1[1];
  const double top = std::max(z2[0], z2[1]);
  const double e0 = std::exp(z2[0] - top), e1 = std::exp(z2[1] - top);
  const double p[2] = {e0 / (e0 + e1), e1 / (e0 + e1)};
  // Backward at scale 1 (batch 1): dz2 = p - onehot, gW2 = dz2 a1^T, dz1 = (W2^T dz2) * tanh', gW1 = dz1 x^T.
  const double dz2[2] = {p[0] - (label == 0), p[1] - (label == 1)};
  double dz1[2];
  for (int j = 0; j < 2; ++j) dz1[j] = (w2[0][j] * dz2[0] + w2[1][j] * dz2[1]) * (1 - a1[j] * a1[j]);
  const auto largest = [](std::initializer_list<double> v) {
    double m = 0;
    for (const double d : v) m = std::max(m, std::abs(d));
    return m;
  };
  // The recorded tensors in the MLP's execution order, with their predicted largest magnitude.
  struct Predicted {
    const char* name;
    TensorKind kind;
    double at_scale_1;
    bool scaled;
  };
  const std::vector<Predicted> order{
      {"fc1", TensorKind::weight, largest({w1[0][0], w1[0][1], w1[1][0], w1[1][1]}), false},
      {"fc2", TensorKind::weight, largest({w2[0][0], w2[0][1], w2[1][0], w2[1][1]}), false},
      {"fc1", TensorKind::activation, largest({z1[0], z1[1]}), false},
      {"fc2", TensorKind::activation, largest({z2[0], z2[1]}), false},
      {"fc2", TensorKind::activation_gradient, largest({dz2[0], dz2[1]}), true},
      {"fc2", TensorKind::weight_gradient, largest({dz2[0] * a1[0], dz2[0] * a1[1], dz2[1] * a1[0], dz2[1] * a1[1]}), true},
      {"fc1", TensorKind::activation_gradient, largest({dz1[0], dz1[1]}), true},
      {"fc1", TensorKind::weight_gradient, largest({dz1[0] * x[0], dz1[0] * x[1], dz1[1] * x[0], dz1[1] * x[1]}), true},
  };
  // Which tensor the hand computation says overflows first at scale 2^k, if any.
  const auto predicted_culprit = [&](int k) -> const Predicted* {
    for (const Predicted& t : order) {
      const double value = t.at_scale_1 * (t.scaled ? std::ldexp(1.0, k) : 1.0);
      if (value > 65504.0) return &t;
    }
    return nullptr;
  };
  TrainerState state = MlpTrainer(config).state();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) {
      state.weights[0](i, j) = static_cast<float>(w1[i][j]);
      state.weights[1](i, j) = static_cast<float>(w2[i][j]);
    }
  state.biases[0].setZero();
  state.biases[1].setZero();
  Eigen::MatrixXf inputs(1, 2);
  inputs << static_cast<float>(x[0]), static_cast<float>(x[1]);
  int named = 0;
  const Predicted* previous = nullptr;
  // A scale that puts a prediction within 10% of fp16's largest is not one to call.
  const auto callable = [&](int k) {
    for (const Predicted& t : order)
      if (std::abs(t.at_scale_1 * (t.scaled ? std::ldexp(1.0, k) : 1.0) / 65504.0 - 1) < 0.1) return false;
    return true;
  };
  for (int k = 0; k <= 24; ++k) {
    CAPTURE(k);
    if (!callable(k)) continue;
    const Predicted* expected = predicted_culprit(k);
    for (const MakeTrainer& make : {cpu, device_twin}) {
      config.scaler = LossScalerConfig::fixed(std::ldexp(1.0, k));
      std::unique_ptr<TrainerBackend> trainer = make(config);
      trainer->restore(state);
      trainer->reconfigure_scaler(config.scaler);
      const StepResult result = trainer->step(inputs, {label}, false, true);
      CHECK(result.skipped == (expected != nullptr && expected->scaled));
      if (!result.skipped) continue;
      const std::optional<Culprit> culprit = step_culprit(result, trainer->format(), nullptr);
      REQUIRE(culprit);
      CHECK(culprit->name == expected->name);
      CHECK(culprit->kind == expected->kind);
      CHECK(culprit->fault == CulpritFault::overflow);
      // Its largest magnitude within the roundings' 2^-9 of the hand computation's.
      const double hand = expected->at_scale_1 * std::ldexp(1.0, k);
      REQUIRE(culprit->largest);
      CHECK(std::abs(*culprit->largest / hand - 1) < 0x1p-9);
      CHECK(binades_too_high(*culprit) == static_cast<int>(std::ceil(std::log2(hand / 65504.0))));
      ++named;
    }
    if (expected != nullptr && expected != previous) MESSAGE("at 2^", k, " the first to overflow is ", std::string(expected->name), " ", tensor_kind_name(expected->kind));
    previous = expected;
  }
  CHECK(named >= 4);  // the scales reach past the first overflow, and past a second tensor's
}

TEST_CASE("culprit: the sentinel changes no bit of a run, recorded steps or not") {
  for (const bool gpt : {false, true}) {
    CAPTURE(gpt);
    TrainingConfig on = gpt ? gpt_config() : mlp_config();
    on.precision = Precision::bf16;
    TrainingConfig off = on;
    off.sentinel = false;
    const int batch = gpt ? 3 : 24;
    for (const MakeTrainer& make : {cpu, device_twin}) {
      std::unique_ptr<TrainerBackend> a = make(on), b = make(off);
      TrainingData data("synthetic", on);
      Eigen::MatrixXf inputs;
      std::vector<int> labels;
      for (int t = 0; t < 5; ++t) {
        data.next_batch(batch, inputs, labels);
        const bool record = t % 2 == 0;
        const StepResult ra = a->step(inputs, labels, record, true), rb = b->step(inputs, labels, record, true);
        CHECK(bits_of(static_cast<float>(ra.loss)) == bits_of(static_cast<float>(rb.loss)));
        if (record) CHECK(*ra.snapshot == *rb.snapshot);
        CHECK(rb.sentinel.empty());
      }
      CHECK(same_state(a->state(), b->state()));
    }
  }
}

TEST_CASE("culprit: an unrecorded step's readings are a recorded step's, wherever each pass takes them") {
  // A recorded cast's reading comes from its histogram's pass, an unrecorded bf16 cast packed for
  // the products from its rounding's pass (round_f32_with_bits; in round to nearest even the
  // AVX-512 BF16 kernel's own lanes), any other from a pass of its own: the same state and batch
  // stepped recorded and unrecorded must read the same bits of every tensor, in the same order.
  // The CPU's trainers (a device step reads its readings back only for a step that skipped); the
  // weights are read only where a step skips (take_sentinel), every other tensor every step.
  for (const bool gpt : {false, true})
    for (const RoundingMode rounding : {RoundingMode::nearest_even, RoundingMode::stochastic}) {
      CAPTURE(gpt);
      CAPTURE(static_cast<int>(rounding));
      TrainingConfig config = gpt ? gpt_config() : mlp_config();
      config.precision = Precision::bf16;
      config.rounding = rounding;
      const int batch = gpt ? 3 : 24;
      std::unique_ptr<TrainerBackend> recorded = cpu(config), unrecorded = cpu(config);
      TrainingData data("synthetic", config);
      Eigen::MatrixXf inputs;
      std::vector<int> labels;
      for (int t = 0; t < 3; ++t) {
        data.next_batch(batch, inputs, labels);
        const StepResult r = recorded->step(inputs, labels, true, true), u = unrecorded->step(inputs, labels, false, true);
        REQUIRE(!r.sentinel.empty());
        CHECK(u.sentinel == r.sentinel);
        std::size_t read = 0, nonzero = 0;
        for (const SentinelReading& reading : u.sentinel)
          if (reading.kind != TensorKind::weight) ++read, nonzero += reading.largest_bits != 0;
        CHECK(read > 0);
        CHECK(nonzero == read);
      }
    }
}

TEST_CASE("culprit: a device cast takes the sentinel's reading in its own pass: amax_bits's, in place or not, recorded or not") {
  // The host twin, whose memory is the host's: the CUDA kernels are held to it (tests/cuda).
  const std::unique_ptr<DeviceOps> ops = make_host_device_ops();
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 300.0f);
  std::vector<float> values(777);
  for (float& v : values) v = normal(rng);
  values[3] = -0.0f, values[10] = 1e-41f, values[400] = -7e4f;
  for (const bool with_nan : {false, true}) {
    CAPTURE(with_nan);
    if (with_nan) values[776] = -std::numeric_limits<float>::quiet_NaN();
    const std::size_t n = values.size();
    std::uint32_t expected = 0;
    ops->amax_bits(values.data(), n, &expected);
    CHECK(expected == (with_nan ? bits_of(std::numeric_limits<float>::quiet_NaN()) : bits_of(7e4f)));
    for (const bool bf16 : {false, true})
      for (const RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::stochastic})
        for (const bool in_place : {false, true})
          for (const bool recorded : {false, true}) {
            CAPTURE(bf16);
            CAPTURE(rounding_mode_name(mode));
            CAPTURE(in_place);
            CAPTURE(recorded);
            // The cast alone, then with the reading: the reading is the input's, and changes no bit.
            std::vector<float> plain_in = values, plain_out(n), watched_in = values, watched_out(n);
            std::vector<std::uint16_t> plain_packed(n), watched_packed(n);
            std::vector<unsigned long long> plain_slots(bin_slot_count + 3), watched_slots(bin_slot_count + 3);
            const auto slots = [&](std::vector<unsigned long long>& at, std::uint32_t* largest) {
              return recorded ? RecordSlots{at.data(), at.data() + bin_slot_count, largest} : RecordSlots{nullptr, nullptr, largest};
            };
            std::uint32_t largest = 0xDEADBEEFu;  // written, not raised
            ops->cast(plain_in.data(), in_place ? plain_in.data() : plain_out.data(), plain_packed.data(), n, bf16, mode, slots(plain_slots, nullptr), {9, nullptr, 100});
            ops->cast(watched_in.data(), in_place ? watched_in.data() : watched_out.data(), watched_packed.data(), n, bf16, mode,
                      slots(watched_slots, &largest), {9, nullptr, 100});
            CHECK(largest == expected);
            CHECK(std::memcmp(plain_in.data(), watched_in.data(), n * sizeof(float)) == 0);
            CHECK(std::memcmp(plain_out.data(), watched_out.data(), n * sizeof(float)) == 0);
            CHECK(plain_packed == watched_packed);
            CHECK(plain_slots == watched_slots);
          }
    // The fp32 policy's pass: the histogram where recorded, the reading either way.
    std::vector<unsigned long long> plain(bin_slot_count), watched(bin_slot_count);
    ops->record_histogram(values.data(), values.size(), RecordSlots{plain.data()});
    std::uint32_t largest = 0xDEADBEEFu;
    ops->record_histogram(values.data(), values.size(), RecordSlots{watched.data(), nullptr, &largest});
    CHECK(largest == expected);
    CHECK(plain == watched);
    largest = 0xDEADBEEFu;
    ops->record_histogram(values.data(), values.size(), RecordSlots{nullptr, nullptr, &largest});
    CHECK(largest == expected);
  }
}

namespace {
// A session's snapshots once it has run `settings` to its end.
std::vector<Snapshot> session_snapshots(const TrainingSettings& settings, std::vector<StepRecord>& steps) {
  RunStore store;
  TrainingSession session(store);
  session.start(settings);
  REQUIRE(session.wait_for_end(std::chrono::seconds(60)));
  session.rethrow_failure();
  steps = store.update_since(0, 0).steps;
  return store.copy_since(0);
}
}  // namespace

TEST_CASE("culprit: a skip between recorded steps gets its culprit and the histograms recording it would have given") {
  for (const bool gpt : {false, true}) {
    CAPTURE(gpt);
    TrainingSettings every;
    every.config = gpt ? gpt_config() : mlp_config();
    every.batch = gpt ? 3 : 24;
    every.steps = 8;
    every.backend = "cpu";
    every.threads = 2;
    every.faults = {gpt ? FaultInjection{FaultInjection::Value::nan, 0, 5, "h0.mlp.proj"} : FaultInjection{FaultInjection::Value::nan, 2, 5, {}},
                    gpt ? FaultInjection{FaultInjection::Value::infinity, 0, 0, "h1.attn.proj"}
                        : FaultInjection{FaultInjection::Value::infinity, 3, 0, {}}};
    every.record_every = 1;
    TrainingSettings sparse = every;
    sparse.record_every = 4;  // steps 0 and 4 due: step 5 is not
    std::vector<StepRecord> every_steps, sparse_steps;
    const std::vector<Snapshot> all = session_snapshots(every, every_steps);
    const std::vector<Snapshot> some = session_snapshots(sparse, sparse_steps);
    REQUIRE(all.size() == 8);
    REQUIRE(some.size() == 3);  // 0, 4 and the skipped 5
    for (const Snapshot& s : some) {
      CAPTURE(s.step);
      const Snapshot& same = all.at(static_cast<std::size_t>(s.step));
      CHECK(s == same);  // every bin, count and the culprit
      CHECK(s.skipped == (s.step == 0 || s.step == 5));
      CHECK(s.culprit.has_value() == s.skipped);
    }
    const Snapshot& fifth = some.back();
    REQUIRE(fifth.step == 5);
    REQUIRE(fifth.culprit);
    CHECK(fifth.culprit->name == (gpt ? "h0.mlp.proj" : "fc2"));
    CHECK(fifth.culprit->fault == CulpritFault::nan);
    REQUIRE(fifth.culprit->nan_count);
    CHECK(*fifth.culprit->nan_count == 1);
    CHECK(*fifth.culprit->infinity_count == 0);
    REQUIRE(some.front().culprit);
    CHECK(some.front().culprit->name == (gpt ? "h1.attn.proj" : "fc3"));
    CHECK(some.front().culprit->fault == CulpritFault::infinity);
    CHECK(*some.front().culprit->infinity_count == 1);
    // Each step's record carries it too; the steps without faults carry none.
    for (const StepRecord& r : sparse_steps) CHECK(r.culprit.has_value() == (r.step == 0 || r.step == 5));
  }
}
