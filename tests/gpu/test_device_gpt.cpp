// The device backend's GPT step (device_gpt.cpp) on the host twin of its kernels
// (host_device_ops.cpp) against the CPU backend's GptTrainer, where no GPU is: the same loss,
// records, random words, skips and state. The twin's products, LayerNorm sums and exponentials are
// the same math as the CPU's in another order, so values are compared within stated tolerances and
// counts of what the casts did exactly where no value changes them; what must be exact (tensor
// names and order, element counts, the stochastic counter, skipped steps) is compared exactly.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fpscope/core/names.hpp"
#include "fpscope/gpu/device_gpt.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/host_device_ops.hpp"
#include "device_block_records.hpp"
#include "gpt_pass.hpp"

using namespace fpscope;

namespace {

struct Batch {
  Eigen::MatrixXf inputs;
  std::vector<int> targets;
};

// Sequences that repeat a short pattern (something a GPT learns in a few steps), targets the next token.
Batch pattern_batch(const GptShape& shape, int sequences, unsigned seed) {
  std::mt19937 rng(seed);
  Batch b{Eigen::MatrixXf(sequences, shape.context), {}};
  std::vector<int> targets_by_row(static_cast<std::size_t>(sequences) * static_cast<std::size_t>(shape.context));
  for (int s = 0; s < sequences; ++s) {
    const int period = 2 + static_cast<int>(rng() % 3), offset = static_cast<int>(rng() % static_cast<unsigned>(shape.vocab));
    for (int t = 0; t <= shape.context; ++t) {
      const int token = (offset + (t % period) * 3) % shape.vocab;
      if (t < shape.context) b.inputs(s, t) = static_cast<float>(token);
      if (t > 0) targets_by_row[static_cast<std::size_t>(s * shape.context + t - 1)] = token;
    }
  }
  b.targets = targets_by_row;
  return b;
}

TrainingConfig config_for(const GptShape& shape, Precision precision, RoundingMode rounding = RoundingMode::nearest_even) {
  TrainingConfig config;
  config.gpt = shape;
  config.precision = precision;
  config.rounding = rounding;
  config.scaler = precision == Precision::fp32 ? LossScalerConfig::none() : LossScalerConfig::pytorch();
  config.learning_rate = 3e-3f;
  config.optimizer.kind = OptimizerKind::adamw;
  config.optimizer.weight_decay = 0.01f;
  config.seed = 5;
  return config;
}

DeviceGptTrainer twin(const GptShape& shape, const TrainingConfig& config) { return DeviceGptTrainer(shape, config, make_host_device_ops()); }

double relative(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-30); }

// The largest difference between two states' weights over the largest weight.
double weight_difference(const TrainerState& a, const TrainerState& b) {
  double difference = 0, largest = 0;
  for (std::size_t p = 0; p < a.weights.size(); ++p) {
    difference = std::max(difference, static_cast<double>((a.weights[p] - b.weights[p]).cwiseAbs().maxCoeff()));
    largest = std::max(largest, static_cast<double>(b.weights[p].cwiseAbs().maxCoeff()));
  }
  return difference / largest;
}

// Half the sum over bins of |a - b| over the elements: the share of elements whose binade differs
// (at least).
double binade_share_moved(const ExponentHistogram& a, const ExponentHistogram& b) {
  std::uint64_t moved = 0;
  for (int e = min_binade; e <= max_binade; ++e) moved += a.count(e) > b.count(e) ? a.count(e) - b.count(e) : b.count(e) - a.count(e);
  return 0.5 * static_cast<double>(moved) / static_cast<double>(std::max<std::uint64_t>(a.total_count(), 1));
}

const GptShape small{2, 16, 2, 8, 32};

}  // namespace

TEST_CASE("the device GPT step, on the host twin of its kernels, trains as the CPU backend does") {
  const std::pair<Precision, RoundingMode> runs[] = {{Precision::fp32, RoundingMode::nearest_even}, {Precision::bf16, RoundingMode::nearest_even},
                                                     {Precision::fp16, RoundingMode::nearest_even}, {Precision::bf16, RoundingMode::stochastic},
                                                     {Precision::fp16, RoundingMode::stochastic},   {Precision::fp16_pure, RoundingMode::toward_zero}};
  for (const auto& [precision, rounding] : runs) {
    CAPTURE(precision_name(precision));
    CAPTURE(rounding_mode_name(rounding));
    const TrainingConfig config = config_for(small, precision, rounding);
    GptTrainer cpu(small, config);
    DeviceGptTrainer device = twin(small, config);
    CHECK(device.name() == "host twin");
    for (int step = 0; step < 8; ++step) {
      const Batch b = pattern_batch(small, 3, 100 + static_cast<unsigned>(step));
      const StepResult want = cpu.step(b.inputs, b.targets, true);
      const StepResult got = device.step(b.inputs, b.targets, true, true);
      CAPTURE(step);
      CHECK(got.skipped == want.skipped);
      CHECK(got.loss_scale == want.loss_scale);
      // The same loss within float32's reordered sums: measured 1.5e-8 (fp32); bf16's 8 bits absorb
      // nearly every such difference (measured 0 over these steps, while one tensor's random words
      // taken one place off moves it by 1e-4); fp16's 11 bits let a value near a rounding edge go
      // the other way (measured 4e-6).
      CHECK(relative(got.loss, want.loss) < (precision == Precision::fp32 ? 1e-6 : precision == Precision::bf16 ? 1e-5 : 1e-4));
      REQUIRE(got.snapshot);
      REQUIRE(want.snapshot);
      REQUIRE(got.snapshot->tensors.size() == want.snapshot->tensors.size());
      for (std::size_t t = 0; t < want.snapshot->tensors.size(); ++t) {
        const TensorRecord& g = got.snapshot->tensors[t];
        const TensorRecord& w = want.snapshot->tensors[t];
        CAPTURE(w.name);
        CHECK(g.name == w.name);
        CHECK(g.kind == w.kind);
        CHECK(g.scale == w.scale);
        CHECK(g.captured == w.captured);
        CHECK(g.histogram.total_count() == w.histogram.total_count());
        CHECK(g.histogram.nan_count() == w.histogram.nan_count());
        CHECK(g.histogram.infinity_count() == w.histogram.infinity_count());
        CHECK(g.cast.has_value() == w.cast.has_value());
        // A value near a power of two may land in the binade beside, and a sum that cancels (the
        // attention scores) may differ in its last bits by more: at most 3% of a tensor's
        // elements, or 16 of a small one, move (measured: 7 of 1152, 4 of 216; before the
        // LayerNorm and softmax sums took a warp's order, 17 and 13).
        CHECK(binade_share_moved(g.histogram, w.histogram) * static_cast<double>(w.histogram.total_count()) <=
              std::max(16.0, 0.03 * static_cast<double>(w.histogram.total_count())));
      }
    }
    const TrainerState a = device.state(), b = cpu.state();
    CHECK(a.stochastic_counter == b.stochastic_counter);
    CHECK(a.optimizer.updates == b.optimizer.updates);
    // AdamW turns a gradient's small difference into one of up to the learning rate: measured 4e-6
    // of the largest weight in float32, 3e-3 in fp16.
    CHECK(weight_difference(a, b) < (precision == Precision::fp32 ? 1e-4 : 2e-2));
  }
}

TEST_CASE("the device GPT on the host twin: skipped steps, injected faults, fp16-pure's re-rounding and batches of changing size as the CPU backend's") {
  TrainingConfig config = config_for(small, Precision::fp16_pure, RoundingMode::stochastic);
  config.optimizer.kind = OptimizerKind::momentum;
  config.optimizer.clip_grad_norm = 0.5f;  // clipped on the unscaled gradients, skipped steps never
  GptTrainer cpu(small, config);
  DeviceGptTrainer device = twin(small, config);
  const FaultInjection fault{FaultInjection::Value::nan, 0, 1, "h0.attn.qkv"};
  CHECK_THROWS_AS(device.inject(FaultInjection{FaultInjection::Value::nan, 0, 1, "h0.attn.qkv.bias"}), std::invalid_argument);
  cpu.inject(fault);
  device.inject(fault);
  for (int step = 0; step < 4; ++step) {
    CAPTURE(step);
    const Batch b = pattern_batch(small, 2 + step % 3, 7 + static_cast<unsigned>(step));  // the batch changes size: buffers made again
    const TrainerState before = device.state();
    const StepResult want = cpu.step(b.inputs, b.targets, true);
    const StepResult got = device.step(b.inputs, b.targets, true, true);
    CHECK(got.skipped == (step == 1));
    CHECK(got.skipped == want.skipped);
    CHECK(got.loss_scale == want.loss_scale);
    CHECK(relative(got.loss, want.loss) < 1e-4);
    CHECK(device.state().stochastic_counter == cpu.state().stochastic_counter);
    CHECK(device.state().optimizer.updates == cpu.state().optimizer.updates);
    CHECK(device.scaler_state().scale == cpu.scaler_state().scale);
    CHECK(device.scaler_state().skipped_steps == cpu.scaler_state().skipped_steps);
    for (const TensorRecord& t : got.snapshot->tensors)
      if (t.kind == TensorKind::weight_gradient) CHECK(t.histogram.nan_count() == (step == 1 && t.name == "h0.attn.qkv" ? 1u : 0u));
    if (got.skipped) {  // the master weights as they were, bit for bit
      const TrainerState after = device.state();
      for (std::size_t p = 0; p < after.weights.size(); ++p) CHECK(after.weights[p].cwiseEqual(before.weights[p]).all());
    }
  }
  CHECK(weight_difference(device.state(), cpu.state()) < 2e-2);
}

TEST_CASE("the device GPT's state goes on with the same bits, unread steps change nothing, and states and batches not its own are refused") {
  const TrainingConfig config = config_for(small, Precision::bf16, RoundingMode::stochastic);
  DeviceGptTrainer a = twin(small, config), b = twin(small, config);
  const Batch first = pattern_batch(small, 2, 1), second = pattern_batch(small, 2, 2);
  a.step(first.inputs, first.targets, false, true);
  const StepResult unread = b.step(first.inputs, first.targets, false, false);  // nothing read back
  CHECK(std::isnan(unread.loss));
  CHECK(std::isnan(unread.loss_scale));
  CHECK_FALSE(unread.snapshot);
  // A third trainer restored from a's state: the next step is a's, bit for bit.
  DeviceGptTrainer c = twin(small, config);
  c.restore(a.state());
  const StepResult sa = a.step(second.inputs, second.targets, true, true), sb = b.step(second.inputs, second.targets, true, true),
                   sc = c.step(second.inputs, second.targets, true, true);
  CHECK(std::bit_cast<std::uint64_t>(sa.loss) == std::bit_cast<std::uint64_t>(sb.loss));
  CHECK(std::bit_cast<std::uint64_t>(sa.loss) == std::bit_cast<std::uint64_t>(sc.loss));
  CHECK(sa.snapshot->tensors == sc.snapshot->tensors);
  const TrainerState sa_state = a.state(), sc_state = c.state();
  CHECK(sa_state.stochastic_counter == sc_state.stochastic_counter);
  for (std::size_t p = 0; p < sa_state.weights.size(); ++p) CHECK(sa_state.weights[p].cwiseEqual(sc_state.weights[p]).all());
  CHECK(sa_state.optimizer == sc_state.optimizer);
  // The CPU backend's checkpoints restore here, and another shape's do not.
  GptTrainer cpu(small, config);
  c.restore(cpu.state());
  CHECK(c.state().weights[0].cwiseEqual(cpu.state().weights[0]).all());
  GptShape wider = small;
  wider.width = 32;
  CHECK_THROWS_AS(c.restore(GptTrainer(wider, config_for(wider, Precision::bf16)).state()), std::invalid_argument);
  // Batches that are not the model's.
  CHECK_THROWS_AS(c.step(Eigen::MatrixXf::Zero(2, small.context + 1), std::vector<int>(2 * (small.context + 1), 0), false, true),
                  std::invalid_argument);
  CHECK_THROWS_AS(c.step(Eigen::MatrixXf::Constant(1, small.context, static_cast<float>(small.vocab)), std::vector<int>(small.context, 0), false, true),
                  std::invalid_argument);
}

TEST_CASE("the device step's token sums (bias, gain and LayerNorm gradients) are the CPU pass's, bit for bit") {
  // gpt_element.hpp follows gpt_pass.hpp's order (runs of 64 tokens, then the runs in order), so
  // these gradients are exact on both backends for the same inputs.
  const std::unique_ptr<DeviceOps> ops = make_host_device_ops();
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (const int tokens : {1, 63, 64, 65, 200, 1000}) {
    CAPTURE(tokens);
    const int features = 37;
    Eigen::MatrixXf a(features, tokens), b(features, tokens), start(features, 1);
    for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = normal(rng), b.data()[i] = normal(rng);
    for (Eigen::Index i = 0; i < start.size(); ++i) start.data()[i] = normal(rng);
    Eigen::MatrixXf cpu_sum = start, cpu_products = start, twin_sum = start, twin_products = start;
    gpt_pass::add_column_sum(a, cpu_sum);
    gpt_pass::add_column_sum_of_products(a, b, cpu_products);
    ops->add_token_sums(a.data(), nullptr, features, tokens, twin_sum.data());
    ops->add_token_sums(a.data(), b.data(), features, tokens, twin_products.data());
    CHECK(std::memcmp(cpu_sum.data(), twin_sum.data(), sizeof(float) * features) == 0);
    CHECK(std::memcmp(cpu_products.data(), twin_products.data(), sizeof(float) * features) == 0);
  }
}

TEST_CASE("the device step's embedding gradients add each token's column in the batch's order, as the CPU pass does") {
  const std::unique_ptr<DeviceOps> ops = make_host_device_ops();
  const int vocab = 11, context = 5, width = 7, columns = 4 * context;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<int> tokens(columns);
  for (int& t : tokens) t = static_cast<int>(rng() % 4);  // few tokens, each many times: the order shows
  Eigen::MatrixXf dx(width, columns), token_table(vocab, width), position_table(context, width);
  for (Eigen::Index i = 0; i < dx.size(); ++i) dx.data()[i] = normal(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 40) - 20);
  for (Eigen::Index i = 0; i < token_table.size(); ++i) token_table.data()[i] = normal(rng);
  position_table.setZero();
  // The CPU pass's order (gpt_pass.hpp): token by token, each column added to its rows.
  Eigen::MatrixXf want_tokens = token_table, want_positions = position_table;
  for (int n = 0; n < columns; ++n)
    for (int d = 0; d < width; ++d) {
      want_tokens(tokens[static_cast<std::size_t>(n)], d) += dx(d, n);
      want_positions(n % context, d) += dx(d, n);
    }
  std::vector<int> grouped, starts;
  group_columns_by_token(tokens, vocab, grouped, starts);
  CHECK(starts.front() == 0);
  CHECK(starts.back() == columns);
  Eigen::MatrixXf got_tokens = token_table, got_positions = position_table;
  ops->embed_backward(grouped.data(), starts.data(), dx.data(), vocab, context, width, columns, got_tokens.data(), got_positions.data());
  CHECK(std::memcmp(got_tokens.data(), want_tokens.data(), sizeof(float) * static_cast<std::size_t>(want_tokens.size())) == 0);
  CHECK(std::memcmp(got_positions.data(), want_positions.data(), sizeof(float) * static_cast<std::size_t>(want_positions.size())) == 0);
}

TEST_CASE("the device GPT records block statistics from the values before each cast, attention triangles along their keys, as the CPU does") {
  for (const char* recording : {"mxfp8-e4m3", "nvfp4"}) {
    CAPTURE(recording);
    TrainingConfig config = config_for(small, Precision::bf16, RoundingMode::stochastic);
    config.record_blocks = parse_block_recording(recording);
    GptTrainer cpu(small, config);
    DeviceGptTrainer device = twin(small, config);
    for (int step = 0; step < 3; ++step) {
      CAPTURE(step);
      const Batch b = pattern_batch(small, 3, 40 + static_cast<unsigned>(step));
      const StepResult want = cpu.step(b.inputs, b.targets, true), got = device.step(b.inputs, b.targets, true, true);
      testing::check_block_records(got, want, step);
    }
  }
}

TEST_CASE("the device GPT on the host twin at edge shapes: one head, a context of one, heads of odd width, one layer") {
  const GptShape shapes[] = {{1, 6, 1, 5, 7}, {2, 8, 2, 1, 9}, {1, 9, 3, 6, 13}, {3, 12, 4, 3, 5}};
  for (const GptShape& shape : shapes) {
    CAPTURE(gpt_shape_name(shape));
    for (const Precision precision : {Precision::fp32, Precision::bf16}) {
      CAPTURE(precision_name(precision));
      const TrainingConfig config = config_for(shape, precision, RoundingMode::stochastic);
      GptTrainer cpu(shape, config);
      DeviceGptTrainer device = twin(shape, config);
      for (int step = 0; step < 4; ++step) {
        const Batch b = pattern_batch(shape, 1 + step % 3, 60 + static_cast<unsigned>(step));
        const StepResult want = cpu.step(b.inputs, b.targets, step % 2 == 0), got = device.step(b.inputs, b.targets, step % 2 == 0, true);
        CHECK(relative(got.loss, want.loss) < (precision == Precision::fp32 ? 1e-6 : 1e-4));
        CHECK(got.snapshot.has_value() == want.snapshot.has_value());
        if (got.snapshot) CHECK(got.snapshot->tensors.size() == want.snapshot->tensors.size());
      }
      CHECK(device.state().stochastic_counter == cpu.state().stochastic_counter);
      CHECK(weight_difference(device.state(), cpu.state()) < (precision == Precision::fp32 ? 1e-4 : 2e-2));
    }
  }
}
