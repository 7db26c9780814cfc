// The CPU backend: gradients against float64 finite differences, the step bit for bit against its
// rules written plainly, skipped steps, recording.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>
#include <random>
#include <utility>

#include "fpscope/core/convert.hpp"
#include "fpscope/gpu/activation.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/parallel.hpp"
#include "fpscope/gpu/sgd_update.hpp"
#include "fpscope/gpu/softmax_cross_entropy.hpp"

using namespace fpscope;

namespace {
struct Batch {
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
};
Batch make_batch(int rows, int features, int classes, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  Batch b{Eigen::MatrixXf(rows, features), {}};
  for (Eigen::Index i = 0; i < b.inputs.size(); ++i) b.inputs.data()[i] = normal(rng);
  for (int i = 0; i < rows; ++i) b.labels.push_back(static_cast<int>(rng() % static_cast<unsigned>(classes)));
  return b;
}
}  // namespace

TEST_CASE("fp32 forward and backward match float64 finite differences") {
  for (const Activation activation : {Activation::tanh, Activation::gelu, Activation::relu}) {
    TrainingConfig config;
    config.layer_sizes = {5, 7, 6, 3};
    config.activation = activation;
    config.precision = Precision::fp32;
    config.scaler = LossScalerConfig::none();
    config.learning_rate = 1.0f;  // the update is then exactly minus the gradient
    MlpTrainer trainer(config);
    const Batch batch = make_batch(8, 5, 3, 4);
    const std::vector<Eigen::MatrixXf> before = trainer.weights();
    trainer.step(batch.inputs, batch.labels, false);
    MlpTrainer probe(config);  // the same initial weights (same seed)
    double worst = 0;
    for (std::size_t l = 0; l < before.size(); ++l) {
      for (Eigen::Index i = 0; i < before[l].size(); ++i) {
        const double analytic = static_cast<double>(before[l].data()[i]) - trainer.weights()[l].data()[i];
        const float saved = probe.weights()[l].data()[i];
        const double h = 1e-3;
        probe.weights()[l].data()[i] = static_cast<float>(saved + h);
        const double up = probe.loss_in_double(batch.inputs, batch.labels);
        probe.weights()[l].data()[i] = static_cast<float>(saved - h);
        const double down = probe.loss_in_double(batch.inputs, batch.labels);
        probe.weights()[l].data()[i] = saved;
        const double numeric = (up - down) / ((static_cast<double>(static_cast<float>(saved + h)) - static_cast<float>(saved - h)));
        worst = std::max(worst, std::abs(analytic - numeric) / (1e-3 + std::abs(numeric)));
      }
    }
    CAPTURE(activation_name(activation));
    CHECK(worst < (activation == Activation::relu ? 2e-2 : 2e-3));  // ReLU's kink can sit inside h
  }
}

TEST_CASE("an overflowing step is skipped and leaves the master weights bit-identical") {
  TrainingConfig config;
  config.layer_sizes = {16, 32, 4};
  config.precision = Precision::fp16;
  config.scaler = LossScalerConfig::pytorch();
  config.scaler.initial_scale = std::ldexp(1.0, 40);  // scaled gradients overflow fp16 at once
  MlpTrainer trainer(config);
  const Batch batch = make_batch(32, 16, 4, 5);
  const std::vector<Eigen::MatrixXf> before = trainer.weights();
  const StepResult result = trainer.step(batch.inputs, batch.labels, true);
  CHECK(result.skipped);
  CHECK(trainer.scaler().scale() == std::ldexp(1.0, 39));
  for (std::size_t l = 0; l < before.size(); ++l)
    CHECK(std::memcmp(before[l].data(), trainer.weights()[l].data(), sizeof(float) * static_cast<std::size_t>(before[l].size())) == 0);
  REQUIRE(result.snapshot);
  CHECK(result.snapshot->skipped);
  bool overflow_recorded = false;
  for (const TensorRecord& t : result.snapshot->tensors)
    if (t.cast && t.cast->overflowed > 0) overflow_recorded = true;
  CHECK(overflow_recorded);
}

TEST_CASE("recorded histograms count every element; fp16-pure weights stay fp16 values") {
  TrainingConfig config;
  config.layer_sizes = {12, 20, 5};
  config.precision = Precision::fp16_pure;
  config.scaler = LossScalerConfig::fixed(1024);
  MlpTrainer trainer(config);
  const Batch batch = make_batch(9, 12, 5, 6);
  const StepResult result = trainer.step(batch.inputs, batch.labels, true);
  REQUIRE(result.snapshot);
  CHECK(result.snapshot->tensors.size() == 8);
  for (const TensorRecord& t : result.snapshot->tensors) {
    const std::size_t layer = t.name == "fc1" ? 0 : 1;
    const std::uint64_t out = static_cast<std::uint64_t>(config.layer_sizes[layer + 1]);
    const std::uint64_t in = static_cast<std::uint64_t>(config.layer_sizes[layer]);
    const std::uint64_t expected = t.kind == TensorKind::activation || t.kind == TensorKind::activation_gradient ? 9 * out : out * in;
    CAPTURE(t.name);
    CAPTURE(tensor_kind_name(t.kind));
    CHECK(t.histogram.total_count() == expected);
    CHECK(t.cast.has_value());
  }
  for (const auto& w : trainer.weights())
    for (Eigen::Index i = 0; i < w.size(); ++i) {
      Context ctx;
      const std::uint64_t half = convert(formats::fp32, formats::fp16, float_bits(w.data()[i]), ctx);
      REQUIRE(ctx.flags == 0);  // exactly representable
      (void)half;
    }
}

TEST_CASE("mixed fp16 training lowers the loss; names parse or fail with one sentence") {
  TrainingConfig config;
  config.layer_sizes = {10, 32, 3};
  config.precision = Precision::fp16;
  config.learning_rate = 0.1f;
  MlpTrainer trainer(config);
  const Batch batch = make_batch(64, 10, 3, 7);
  const double first = trainer.step(batch.inputs, batch.labels, false).loss;
  double last = first;
  for (int i = 0; i < 50; ++i) last = trainer.step(batch.inputs, batch.labels, false).loss;
  CHECK(last < 0.7 * first);
  CHECK(parse_layer_sizes("784-512-10") == std::vector<int>{784, 512, 10});
  CHECK_THROWS_WITH_AS(parse_layer_sizes("784-x-10"), doctest::Contains("'784-x-10'"), std::invalid_argument);
  CHECK_THROWS_AS(parse_layer_sizes("10"), std::invalid_argument);
  CHECK_THROWS_AS(parse_layer_sizes("10-0"), std::invalid_argument);
  CHECK(parse_precision("fp16-pure") == Precision::fp16_pure);
  CHECK_THROWS_AS(parse_precision("fp8"), std::invalid_argument);
  CHECK_THROWS_AS(parse_activation("swish"), std::invalid_argument);
}

TEST_CASE("softmax cross-entropy, the one function both backends call, against float64; a stride changes no bit") {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  constexpr int cols = 10, rows = 64;
  std::vector<float> row_major(rows * cols), column_major(rows * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) row_major[r * cols + c] = column_major[c * rows + r] = normal(rng);
  std::vector<float> g_row(rows * cols), g_col(rows * cols);
  double worst = 0;
  for (int r = 0; r < rows; ++r) {
    const int label = r % cols;
    const float factor = 1024.0f / rows;
    const float loss = softmax_cross_entropy_row(row_major.data() + r * cols, cols, 1, label, factor, g_row.data() + r * cols);
    const float loss_col = softmax_cross_entropy_row(column_major.data() + r, cols, rows, label, factor, g_col.data() + r);
    CHECK(std::bit_cast<std::uint32_t>(loss) == std::bit_cast<std::uint32_t>(loss_col));
    double top = -1e300, sum = 0;
    for (int c = 0; c < cols; ++c) top = std::max(top, static_cast<double>(row_major[r * cols + c]));
    for (int c = 0; c < cols; ++c) sum += std::exp(row_major[r * cols + c] - top);
    const double exact_loss = -(row_major[r * cols + label] - top - std::log(sum));
    worst = std::max(worst, std::abs(loss - exact_loss) / std::max(1e-3, exact_loss));
    for (int c = 0; c < cols; ++c) {
      const double p = std::exp(row_major[r * cols + c] - top) / sum;
      const double exact = (p - (c == label ? 1.0 : 0.0)) * factor;
      CHECK(std::abs(g_row[r * cols + c] - exact) <= 1e-5 * factor);  // float32 exp, log and division: a few ulps
      CHECK(std::bit_cast<std::uint32_t>(g_row[r * cols + c]) == std::bit_cast<std::uint32_t>(g_col[c * rows + r]));
    }
  }
  MESSAGE("softmax cross-entropy: worst relative loss error " << worst);
  CHECK(worst < 1e-5);
}

TEST_CASE("block statistics: recorded along each tensor's feature axis, and the training unchanged") {
  TrainingConfig config;
  config.layer_sizes = {40, 70, 5};  // 40 and 70: blocks of 32 with a short one at the end of each row
  config.precision = Precision::fp32;
  config.record_blocks = BlockRecording{block_formats::mxfp8_e4m3, ScaleRule::even};
  MlpTrainer trainer(config);
  const std::vector<Eigen::MatrixXf> weights_before = trainer.weights();
  const Batch batch = make_batch(9, 40, 5, 11);
  const StepResult result = trainer.step(batch.inputs, batch.labels, true);
  REQUIRE(result.snapshot);
  int weights_checked = 0;
  for (const TensorRecord& t : result.snapshot->tensors) {
    CAPTURE(t.name);
    CAPTURE(tensor_kind_name(t.kind));
    REQUIRE(t.blocks.has_value());
    CHECK(t.blocks->format == block_formats::mxfp8_e4m3);
    CHECK(t.blocks->rule == ScaleRule::even);
    CHECK(t.blocks->statistics.elements == t.histogram.total_count());
    if (t.kind != TensorKind::weight) continue;
    // The weight out x in, written out row by row (each output's inputs together) and blocked along
    // those rows: the forward GEMM's reduction axis.
    const Eigen::MatrixXf& w = weights_before[t.name == "fc1" ? 0 : 1];
    std::vector<float> by_output;
    for (Eigen::Index o = 0; o < w.rows(); ++o)
      for (Eigen::Index i = 0; i < w.cols(); ++i) by_output.push_back(w(o, i));
    const BlockLayout layout{static_cast<std::size_t>(w.rows()), static_cast<std::size_t>(w.cols()), BlockAxis::rows, 32};
    std::vector<std::uint8_t> codes(by_output.size()), scales(layout.block_count());
    BlockStatistics expected;
    float tensor_scale = 0;
    Context ctx;
    block_quantize(block_formats::mxfp8_e4m3, ScaleRule::even, layout, by_output, codes, scales, tensor_scale, ctx, &expected);
    CHECK(t.blocks->statistics == expected);
    CHECK(expected.blocks == static_cast<std::uint64_t>(w.rows()) * ((static_cast<std::uint64_t>(w.cols()) + 31) / 32));
    ++weights_checked;
  }
  CHECK(weights_checked == 2);

  // Recording block statistics changes nothing in the run, stochastic rounding's stream included.
  TrainingConfig plain = config;
  plain.precision = Precision::fp16;
  plain.rounding = RoundingMode::stochastic;
  TrainingConfig with_blocks = plain;
  plain.record_blocks.reset();
  MlpTrainer a(plain), b(with_blocks);
  for (int step = 0; step < 4; ++step) {
    a.step(batch.inputs, batch.labels, true);
    b.step(batch.inputs, batch.labels, true);
  }
  for (std::size_t l = 0; l < a.weights().size(); ++l) CHECK(a.weights()[l] == b.weights()[l]);
  CHECK(a.state().stochastic_counter == b.state().stochastic_counter);
}

namespace {
// An MLP's step written plainly from its rules, one element and one tensor at a time, for the
// trainer to be held to bit for bit: every value cast by the core's scalar conversion; products by
// gemm on the cast values (whose bits the trainer's fused, packed products promise); the bias
// added, then z cast; the activation, then its cast; softmax_cross_entropy_row on each sample with
// the factor scale * loss weight / batch; top down, the output gradient cast, the weight
// gradient's product cast, the bias gradient as each column's Eigen sum cast, the input gradient's
// product cast, then times the activation's derivative at the cast z; SGD by sgd_update.hpp's rule.
struct PlainMlp {
  TrainingConfig config;
  std::vector<Eigen::MatrixXf> weights;  // out x in
  std::vector<Eigen::VectorXf> biases;

  float cast(float x) const {
    if (config.precision == Precision::fp32) return x;
    Context ctx;
    ctx.rounding = config.rounding;
    const Format f = precision_format(config.precision);
    return to_float(f, from_float(f, x, ctx), ctx);
  }
  template <typename M>
  M cast_all(M m) const {
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = cast(m.data()[i]);
    return m;
  }
  // The step at loss scale `scale`: the mean loss, and whether a gradient was not finite (the
  // update is then left out).
  std::pair<double, bool> step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, float scale) {
    const std::size_t layers = weights.size();
    const Eigen::Index batch = inputs.rows();
    std::vector<Eigen::MatrixXf> w(layers), a(layers), z(layers);
    std::vector<Eigen::VectorXf> b(layers);
    for (std::size_t l = 0; l < layers; ++l) w[l] = cast_all(weights[l]), b[l] = cast_all(biases[l]);
    a[0] = cast_all(inputs);
    for (std::size_t l = 0; l < layers; ++l) {
      z[l] = gemm(a[l], false, w[l], true);
      for (Eigen::Index o = 0; o < z[l].cols(); ++o)
        for (Eigen::Index s = 0; s < batch; ++s) z[l](s, o) = cast(z[l](s, o) + b[l](o));
      if (l + 1 < layers) {
        a[l + 1].resize(batch, z[l].cols());
        for (Eigen::Index i = 0; i < z[l].size(); ++i) a[l + 1].data()[i] = cast(activate(config.activation, z[l].data()[i]));
      }
    }
    const Eigen::Index classes = z.back().cols();
    const float factor = scale * config.loss_weight / static_cast<float>(batch);
    Eigen::MatrixXf dz(batch, classes);
    double loss = 0;
    for (Eigen::Index s = 0; s < batch; ++s)
      loss += softmax_cross_entropy_row(z.back().data() + s, static_cast<int>(classes), static_cast<int>(batch), labels[static_cast<std::size_t>(s)],
                                        factor, dz.data() + s);
    loss /= static_cast<double>(batch);
    std::vector<Eigen::MatrixXf> grad_w(layers);
    std::vector<Eigen::VectorXf> grad_b(layers);
    bool non_finite = false;
    for (std::size_t l = layers; l-- > 0;) {
      dz = cast_all(dz);
      grad_w[l] = cast_all(gemm(dz, true, a[l], false));
      grad_b[l].resize(dz.cols());
      for (Eigen::Index o = 0; o < dz.cols(); ++o) grad_b[l](o) = cast(dz.col(o).sum());
      non_finite = non_finite || !grad_w[l].allFinite() || !grad_b[l].allFinite();
      if (l == 0) break;
      const Eigen::MatrixXf da = cast_all(gemm(dz, false, w[l], false));
      dz.resize(da.rows(), da.cols());
      for (Eigen::Index i = 0; i < da.size(); ++i) dz.data()[i] = da.data()[i] * activation_derivative(config.activation, z[l - 1].data()[i]);
    }
    if (non_finite) return {loss, true};
    const float step_factor = sgd_step_factor(config.learning_rate, scale);
    for (std::size_t l = 0; l < layers; ++l) {
      for (Eigen::Index i = 0; i < weights[l].size(); ++i)
        weights[l].data()[i] = sgd_update_element(weights[l].data()[i], grad_w[l].data()[i], step_factor);
      for (Eigen::Index i = 0; i < biases[l].size(); ++i) biases[l](i) = sgd_update_element(biases[l](i), grad_b[l](i), step_factor);
    }
    return {loss, false};
  }
};

bool same_bits(const float* a, const float* b, Eigen::Index n) { return std::memcmp(a, b, sizeof(float) * static_cast<std::size_t>(n)) == 0; }
}  // namespace

TEST_CASE("the CPU MLP's step is its rules composed plainly, bit for bit: casts, products, bias, activation, loss, gradients, update") {
  // Small layers (float32 products) and wide ones (the bf16 kernels, where the processor has them);
  // bf16 and fp16 in two rounding modes and fp32; each activation; a fixed loss scale and a loss
  // weight, which the loss's gradient factor carries; steps recorded and not, and steps after
  // which the update made the next step's weight cast; on one thread and on three (whose products'
  // and casts' slices differ).
  struct Case {
    std::vector<int> sizes;
    Precision precision;
    RoundingMode rounding;
    Activation activation;
  };
  for (const Case& c : {Case{{6, 9, 7, 3}, Precision::bf16, RoundingMode::nearest_even, Activation::relu},
                        Case{{6, 9, 7, 3}, Precision::fp16, RoundingMode::toward_zero, Activation::tanh},
                        Case{{6, 9, 7, 3}, Precision::fp32, RoundingMode::nearest_even, Activation::gelu},
                        Case{{96, 256, 160, 10}, Precision::bf16, RoundingMode::nearest_even, Activation::tanh},
                        Case{{96, 256, 160, 10}, Precision::bf16, RoundingMode::toward_zero, Activation::gelu},
                        Case{{96, 256, 160, 10}, Precision::fp16, RoundingMode::nearest_even, Activation::relu}})
    for (const int threads : {1, 3}) {
      const int threads_before = parallel_threads();
      set_parallel_threads(threads);
      CAPTURE(threads);
      CAPTURE(c.sizes[1]);
      CAPTURE(precision_name(c.precision));
      CAPTURE(static_cast<int>(c.rounding));
      CAPTURE(activation_name(c.activation));
      TrainingConfig config;
      config.layer_sizes = c.sizes;
      config.precision = c.precision;
      config.rounding = c.rounding;
      config.activation = c.activation;
      config.scaler = c.precision == Precision::fp16 ? LossScalerConfig::fixed(256.0) : LossScalerConfig::none();
      config.loss_weight = 0.75f;
      config.learning_rate = 0.05f;
      MlpTrainer trainer(config);
      PlainMlp plain{config, std::as_const(trainer).weights(), trainer.biases()};
      const Batch b = make_batch(24, c.sizes.front(), c.sizes.back(), 21);
      for (int step = 0; step < 5; ++step) {
        CAPTURE(step);
        const StepResult result = trainer.step(b.inputs, b.labels, step == 1 || step == 4);
        const auto [loss, skipped] = plain.step(b.inputs, b.labels, static_cast<float>(result.loss_scale));
        CHECK(std::bit_cast<std::uint64_t>(result.loss) == std::bit_cast<std::uint64_t>(loss));
        CHECK_FALSE(skipped);
        CHECK(result.skipped == skipped);
        for (std::size_t l = 0; l < plain.weights.size(); ++l) {
          CAPTURE(l);
          CHECK(same_bits(std::as_const(trainer).weights()[l].data(), plain.weights[l].data(), plain.weights[l].size()));
          CHECK(same_bits(trainer.biases()[l].data(), plain.biases[l].data(), plain.biases[l].size()));
        }
      }
      set_parallel_threads(threads_before);
    }
}

TEST_CASE("the weights' cast an update makes for the next step is that step's own cast, bit for bit") {
  // Two trainers from one seed, one taking the cast its updates make (MlpTrainer::
  // next_weight_cast_made), the other asking for its weights writable before every step, which
  // makes each step cast them itself. Recorded steps (which cast their weights themselves and make
  // none for the next), a skipped step (no update) and a weight changed between steps come between. bf16 casts make
  // their bits where the processor has bf16 products: small layers take the float32 products
  // (their values made from the bits), wide ones oneDNN's bf16 kernels. fp16 casts make values.
  if (!gemm_has_bf16_products()) MESSAGE("no bf16 products here: the bf16 updates make rounded values, as fp16's do");
  struct Case {
    Precision precision;
    RoundingMode rounding;
    OptimizerKind optimizer;
  };
  for (const std::vector<int>& sizes : {std::vector<int>{6, 9, 7, 3}, std::vector<int>{96, 256, 160, 10}})
    for (const Case& c : {Case{Precision::bf16, RoundingMode::nearest_even, OptimizerKind::sgd}, Case{Precision::bf16, RoundingMode::nearest_even, OptimizerKind::momentum},
                          Case{Precision::bf16, RoundingMode::nearest_even, OptimizerKind::adamw}, Case{Precision::bf16, RoundingMode::toward_zero, OptimizerKind::sgd},
                          Case{Precision::fp16, RoundingMode::nearest_even, OptimizerKind::sgd}, Case{Precision::fp16, RoundingMode::odd, OptimizerKind::adamw}}) {
      CAPTURE(sizes[1]);
      CAPTURE(precision_name(c.precision));
      CAPTURE(static_cast<int>(c.rounding));
      CAPTURE(static_cast<int>(c.optimizer));
      TrainingConfig config;
      config.layer_sizes = sizes;
      config.precision = c.precision;
      config.rounding = c.rounding;
      config.scaler = LossScalerConfig::pytorch();  // a skipped step backs off
      config.optimizer.kind = c.optimizer;
      config.learning_rate = c.optimizer == OptimizerKind::adamw ? 1e-3f : 0.05f;
      MlpTrainer taking(config), casting(config);
      const FaultInjection fault{FaultInjection::Value::nan, 2, 4, ""};
      taking.inject(fault);
      casting.inject(fault);
      const Batch b = make_batch(32, sizes.front(), sizes.back(), 11);
      for (int step = 0; step < 9; ++step) {
        CAPTURE(step);
        const bool record = step == 2 || step == 6;
        // Made by the update of the step before, where that step was neither recorded nor skipped.
        CHECK(taking.next_weight_cast_made() == (step > 0 && step != 3 && step != 5 && step != 7));
        if (step == 8) {  // a weight changed between steps: the next step casts what it finds
          taking.weights()[0](0, 0) += 0.25f;
          casting.weights()[0](0, 0) += 0.25f;
          CHECK_FALSE(taking.next_weight_cast_made());
        }
        casting.weights();
        CHECK_FALSE(casting.next_weight_cast_made());
        const StepResult a = taking.step(b.inputs, b.labels, record), d = casting.step(b.inputs, b.labels, record);
        CHECK(std::bit_cast<std::uint64_t>(a.loss) == std::bit_cast<std::uint64_t>(d.loss));
        CHECK(a.skipped == (step == 4));
        CHECK(a.skipped == d.skipped);
        CHECK(a.snapshot == d.snapshot);
        const auto& wa = std::as_const(taking).weights();
        const auto& wd = std::as_const(casting).weights();
        for (std::size_t l = 0; l < wa.size(); ++l)
          CHECK(std::memcmp(wa[l].data(), wd[l].data(), sizeof(float) * static_cast<std::size_t>(wa[l].size())) == 0);
        CHECK(taking.state().stochastic_counter == casting.state().stochastic_counter);
      }
    }
  // Stochastic rounding draws its random words by position: the step casts its weights itself.
  TrainingConfig stochastic;
  stochastic.layer_sizes = {6, 9, 3};
  stochastic.precision = Precision::bf16;
  stochastic.rounding = RoundingMode::stochastic;
  MlpTrainer trainer(stochastic);
  const Batch b = make_batch(8, 6, 3, 12);
  trainer.step(b.inputs, b.labels, false);
  CHECK_FALSE(trainer.next_weight_cast_made());
}
