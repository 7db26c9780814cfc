// FP8 and block-scaled recipes (gemm_recipe.hpp) on the device backend (device_mlp.cpp,
// device_gpt.cpp), run on the host twin of its kernels, against the CPU backend's MlpTrainer and
// GptTrainer: each quantization's record (layer, operand, format, element and block counts) and
// the stochastic counter exactly; losses, amaxes, scales and counts of what the quantizations did
// within stated tolerances, because the twin's products sum in another order and a value one bit
// apart may quantize to the other side of an edge.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <memory>
#include <optional>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fpscope/core/names.hpp"
#include "fpscope/gpu/block_element.hpp"
#include "fpscope/gpu/device_gpt.hpp"
#include "fpscope/gpu/device_mlp.hpp"
#include "fpscope/gpu/fp8_element.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/host_device_ops.hpp"
#include "fpscope/gpu/training_data.hpp"

using namespace fpscope;

namespace {

double relative(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-30); }

// Of `total`, how many of a count may differ between the backends (values near an edge): 1%, or
// 8 of few (measured: the FP8 counts equal; at most 4 of 2,880 block elements flushed on one side
// only, 1 made subnormal).
bool close_count(std::uint64_t a, std::uint64_t b, std::uint64_t total) {
  const std::uint64_t difference = a > b ? a - b : b - a;
  return static_cast<double>(difference) <= std::max(8.0, 0.01 * static_cast<double>(total));
}

// The step's recipe records of the two backends: the same quantizations in the same order.
void check_recipe_records(const StepResult& got, const StepResult& want) {
  REQUIRE(got.scaling.size() == want.scaling.size());
  for (std::size_t i = 0; i < want.scaling.size(); ++i) {
    const OperandScaling& g = got.scaling[i];
    const OperandScaling& w = want.scaling[i];
    CAPTURE(i);
    CAPTURE(w.name);
    CAPTURE(w.operand);
    CHECK(g.name == w.name);
    CHECK(g.operand == w.operand);
    CHECK(g.format == w.format);
    CHECK(g.elements == w.elements);
    // amax is one element's magnitude: equal unless that element came out of a product a bit apart
    // (measured 9.5e-8 at most); the scale follows it, or a history of them.
    CHECK(relative(g.amax, w.amax) <= 1e-6);
    CHECK(relative(g.scale, w.scale) <= 1e-6);
    CHECK(close_count(g.zeros, w.zeros, w.elements));
    CHECK(close_count(g.flushed_to_zero, w.flushed_to_zero, w.elements));
    CHECK(close_count(g.saturated, w.saturated, w.elements));
  }
  REQUIRE(got.block_operands.size() == want.block_operands.size());
  for (std::size_t i = 0; i < want.block_operands.size(); ++i) {
    const BlockOperandStatistics& g = got.block_operands[i];
    const BlockOperandStatistics& w = want.block_operands[i];
    CAPTURE(w.name);
    CAPTURE(gemm_operand_name(w.operand));
    CHECK(g.name == w.name);
    CHECK(g.operand == w.operand);
    CHECK(g.statistics.blocks == w.statistics.blocks);
    CHECK(g.statistics.elements == w.statistics.elements);
    CHECK(close_count(g.statistics.zeros, w.statistics.zeros, w.statistics.elements));
    CHECK(close_count(g.statistics.flushed_to_zero, w.statistics.flushed_to_zero, w.statistics.elements));
    CHECK(close_count(g.statistics.made_subnormal, w.statistics.made_subnormal, w.statistics.elements));
    CHECK(close_count(g.statistics.saturated, w.statistics.saturated, w.statistics.elements));
  }
}

// Per-tensor FP8 states: the same histories (lengths exactly, values as amaxes above).
void check_fp8_states(const TrainerState& got, const TrainerState& want) {
  REQUIRE(got.fp8.size() == want.fp8.size());
  for (std::size_t i = 0; i < want.fp8.size(); ++i) {
    CAPTURE(i);
    CHECK(relative(got.fp8[i].scale, want.fp8[i].scale) <= 1e-6);
    REQUIRE(got.fp8[i].amax_history.size() == want.fp8[i].amax_history.size());
    for (std::size_t k = 0; k < want.fp8[i].amax_history.size(); ++k) CHECK(relative(got.fp8[i].amax_history[k], want.fp8[i].amax_history[k]) <= 1e-6);
  }
}

// One step of each backend from the CPU's state, compared: a 4-bit operand a bit apart steps by
// an eighth, and such differences would grow from step to step; one step's are what is compared.
void step_from_the_same_state(TrainerBackend& cpu, TrainerBackend& device, const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record) {
  device.restore(cpu.state());
  const StepResult want = cpu.step(inputs, labels, record, true), got = device.step(inputs, labels, record, true);
  CHECK(got.skipped == want.skipped);
  CHECK(relative(got.loss, want.loss) < 1e-5);  // measured 1.2e-7 at most
  const TrainerState got_state = device.state(), want_state = cpu.state();
  CHECK(got_state.stochastic_counter == want_state.stochastic_counter);
  check_fp8_states(got_state, want_state);
  check_recipe_records(got, want);
  // A recorded step's snapshot carries the same recipe records as the CPU's (the device's once
  // left its FP8 scaling out).
  REQUIRE(got.snapshot.has_value() == record);
  REQUIRE(want.snapshot.has_value() == record);
  if (record) {
    CHECK(got.snapshot->scaling.size() == want.snapshot->scaling.size());
    CHECK(got.snapshot->block_operands.size() == want.snapshot->block_operands.size());
    for (std::size_t i = 0; i < std::min(got.snapshot->block_operands.size(), want.snapshot->block_operands.size()); ++i) {
      CHECK(got.snapshot->block_operands[i].name == want.snapshot->block_operands[i].name);
      CHECK(got.snapshot->block_operands[i].blocks.format == want.snapshot->block_operands[i].blocks.format);
      CHECK(got.snapshot->block_operands[i].blocks.statistics.elements == want.snapshot->block_operands[i].blocks.statistics.elements);
    }
    CHECK(got.snapshot->scaling.size() == got.scaling.size());
  }
}

struct RecipeRun {
  GemmRecipe recipe;
  Precision precision;
  RoundingMode rounding;
  bool all_e4m3 = false;
  std::optional<RoundingMode> gradients;  // the recipe's gradient rounding, where its own
};

const RecipeRun runs[] = {{GemmRecipe::fp8_delayed, Precision::bf16, RoundingMode::nearest_even},
                          {GemmRecipe::fp8_current, Precision::fp32, RoundingMode::stochastic, true},
                          {GemmRecipe::fp8_unscaled, Precision::bf16, RoundingMode::nearest_even},
                          {GemmRecipe::mxfp8, Precision::bf16, RoundingMode::nearest_even},
                          {GemmRecipe::mxfp4, Precision::bf16, RoundingMode::stochastic},
                          {GemmRecipe::nvfp4, Precision::fp32, RoundingMode::nearest_even},
                          {GemmRecipe::nvfp4, Precision::bf16, RoundingMode::nearest_even, false, RoundingMode::stochastic},
                          {GemmRecipe::fp8_current, Precision::bf16, RoundingMode::nearest_even, false, RoundingMode::stochastic}};

TrainingConfig with_recipe(TrainingConfig config, const RecipeRun& run) {
  config.recipe.recipe = run.recipe;
  config.recipe.all_e4m3 = run.all_e4m3;
  config.recipe.gradient_rounding = run.gradients;
  config.recipe.amax_history = 3;
  config.precision = run.precision;
  config.rounding = run.rounding;
  config.scaler = run.precision == Precision::fp32 ? LossScalerConfig::none() : LossScalerConfig::pytorch();
  return config;
}

}  // namespace

TEST_CASE("recipes on the device MLP, on the host twin, quantize as the CPU backend does") {
  for (const RecipeRun& run : runs) {
    TrainingConfig base;
    base.layer_sizes = {20, 48, 36, 10};
    base.learning_rate = 0.05f;
    const TrainingConfig config = with_recipe(base, run);
    CAPTURE(recipe_description(config.recipe));
    CAPTURE(precision_name(config.precision));
    MlpTrainer cpu(config);
    DeviceMlpTrainer device(config, make_host_device_ops());
    TrainingData data("synthetic", config.layer_sizes, 1);
    Eigen::MatrixXf x;
    std::vector<int> y;
    for (int step = 0; step < 5; ++step) {
      CAPTURE(step);
      data.next_batch(32 + 8 * (step % 2), x, y);  // the batch changes size: the operands' room made again
      step_from_the_same_state(cpu, device, x, y, step % 2 == 0);
    }
  }
}

TEST_CASE("the device trainers refuse square weight tiles and the Hadamard transform, which they do not make, with a sentence") {
  TrainingConfig config;
  config.layer_sizes = {20, 48, 10};
  config.recipe.recipe = GemmRecipe::nvfp4;
  config.recipe.square_weight_tiles = true;
  CHECK_THROWS_WITH_AS(DeviceMlpTrainer(config, make_host_device_ops()), doctest::Contains("square tiles (--weight-blocks 2d)"), std::invalid_argument);
  const GptShape shape{1, 16, 2, 8, 32};
  CHECK_THROWS_WITH_AS(DeviceGptTrainer(shape, config, make_host_device_ops()), doctest::Contains("--backend cpu"), std::invalid_argument);
  config.recipe.square_weight_tiles = false;
  config.recipe.gradient_rounding = RoundingMode::stochastic;  // the device rounds gradients as the CPU does (the recipe tests)
  CHECK_NOTHROW(DeviceMlpTrainer(config, make_host_device_ops()));
  config.recipe.hadamard_weight_gradients = true;
  CHECK_THROWS_WITH_AS(DeviceMlpTrainer(config, make_host_device_ops()), doctest::Contains("no random Hadamard transform (--hadamard)"), std::invalid_argument);
}

TEST_CASE("recipes on the device GPT, on the host twin, quantize as the CPU backend does") {
  const GptShape shape{2, 16, 2, 8, 32};
  for (const RecipeRun& run : runs) {
    TrainingConfig base;
    base.gpt = shape;
    base.learning_rate = 3e-3f;
    base.optimizer.kind = OptimizerKind::adamw;
    base.seed = 9;
    const TrainingConfig config = with_recipe(base, run);
    CAPTURE(recipe_description(config.recipe));
    CAPTURE(precision_name(config.precision));
    GptTrainer cpu(shape, config);
    DeviceGptTrainer device(shape, config, make_host_device_ops());
    std::mt19937 rng(4);
    for (int step = 0; step < 4; ++step) {
      CAPTURE(step);
      const int sequences = 2 + step % 2;
      Eigen::MatrixXf tokens(sequences, shape.context);
      std::vector<int> targets(static_cast<std::size_t>(sequences * shape.context));
      for (Eigen::Index i = 0; i < tokens.size(); ++i) tokens.data()[i] = static_cast<float>(rng() % static_cast<unsigned>(shape.vocab));
      for (int& t : targets) t = static_cast<int>(rng() % static_cast<unsigned>(shape.vocab));
      step_from_the_same_state(cpu, device, tokens, targets, true);
    }
  }
}

TEST_CASE("a device trainer's FP8 state goes into its checkpoints and comes back, and the CPU's restores there") {
  TrainingConfig base;
  base.layer_sizes = {20, 48, 36, 10};
  const TrainingConfig config = with_recipe(base, runs[0]);
  DeviceMlpTrainer a(config, make_host_device_ops());
  TrainingData data("synthetic", config.layer_sizes, 1);
  Eigen::MatrixXf x;
  std::vector<int> y;
  for (int step = 0; step < 2; ++step) {
    data.next_batch(32, x, y);
    a.step(x, y, false, true);
  }
  const TrainerState saved = a.state();
  REQUIRE(saved.fp8.size() == 9);  // three layers, three operands
  CHECK(saved.fp8[0].amax_history.size() == 2);
  DeviceMlpTrainer b(config, make_host_device_ops());
  b.restore(saved);
  CHECK(b.state().fp8 == saved.fp8);
  data.next_batch(32, x, y);
  const StepResult sa = a.step(x, y, true, true), sb = b.step(x, y, true, true);
  CHECK(std::bit_cast<std::uint64_t>(sa.loss) == std::bit_cast<std::uint64_t>(sb.loss));
  CHECK(a.state().fp8 == b.state().fp8);
  // The CPU backend's state, FP8 histories and all; and not one of another recipe.
  MlpTrainer cpu(config);
  cpu.step(x, y, false);
  b.restore(cpu.state());
  CHECK(b.state().fp8 == cpu.state().fp8);
  CHECK_THROWS_AS(b.restore(MlpTrainer(base).state()), std::invalid_argument);
}

TEST_CASE("the device's FP8 operand (amax_bits, fp8_quantize on the host twin) is quantize_fp8_operand's, bit for bit and count for count") {
  // Values across FP8's range and beyond it once scaled: ordinary ones, zeros of both signs, values
  // that flush, ones that saturate, infinities and a NaN (the amax then a NaN, the scale kept).
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> binade(-30, 20);
  Eigen::MatrixXf x(37, 29);
  for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = std::ldexp(normal(rng), binade(rng));
  x(0, 0) = 0.0f, x(1, 0) = -0.0f, x(2, 0) = 3.0e38f, x(3, 0) = -3.0e38f, x(4, 0) = 1e-40f;
  Eigen::MatrixXf with_specials = x;
  with_specials(5, 0) = std::numeric_limits<float>::infinity(), with_specials(6, 0) = std::numeric_limits<float>::quiet_NaN();
  const std::unique_ptr<DeviceOps> twin = make_host_device_ops();
  const RoundingMode modes[] = {RoundingMode::nearest_even, RoundingMode::nearest_away, RoundingMode::toward_zero, RoundingMode::toward_positive,
                                RoundingMode::toward_negative, RoundingMode::odd, RoundingMode::stochastic};
  for (const GemmRecipe recipe : {GemmRecipe::fp8_current, GemmRecipe::fp8_unscaled, GemmRecipe::fp8_delayed})
    for (const GemmOperand operand : {GemmOperand::input, GemmOperand::output_gradient})
      for (const RoundingMode mode : modes)
        for (const Eigen::MatrixXf* values : {&x, &with_specials}) {
          CAPTURE(gemm_recipe_name(recipe));
          CAPTURE(gemm_operand_name(operand));
          CAPTURE(rounding_mode_name(mode));
          RecipeConfig config;
          config.recipe = recipe;
          config.margin = 1;
          Context ctx;
          ctx.rounding = mode;
          ctx.stochastic_seed = 77;
          ctx.stochastic_counter = 1000;
          Fp8TensorState cpu_state, device_state;
          cpu_state.amax_history = device_state.amax_history = {0.5f, 4.0f};
          OperandScaling want;
          const Fp8Operand q = quantize_fp8_operand(config, operand, *values, cpu_state, ctx, want);
          // The device's: amax from the largest magnitude's bits, the scale by the same rule, the cast there.
          const auto n = static_cast<std::size_t>(values->size());
          std::uint32_t largest = 0;
          twin->amax_bits(values->data(), n, &largest);
          const float amax = amax_of_magnitude_bits(largest);
          CHECK((std::isnan(amax) ? std::isnan(want.amax) : static_cast<double>(amax) == want.amax));
          const float scale = fp8_step_scale(config, operand, amax, device_state);
          CHECK(static_cast<double>(scale) == want.scale);
          CHECK(device_state == cpu_state);
          Context run;
          run.rounding = mode;
          std::vector<float> out(n);
          unsigned long long counts[3] = {0, 0, 0};
          twin->fp8_quantize(values->data(), out.data(), n, scale, fp8_format_of(config, operand) == formats::e5m2, mode, fp8_cast_options(run), {77, nullptr, 1000},
                             counts);
          std::size_t different = 0;
          for (std::size_t i = 0; i < n; ++i) different += std::bit_cast<std::uint32_t>(out[i]) != std::bit_cast<std::uint32_t>(q.values.data()[i]);
          CHECK(different == 0);
          CHECK(counts[0] == want.zeros);
          CHECK(counts[1] == want.flushed_to_zero);
          CHECK(counts[2] == want.saturated);
          CHECK(fp8_dequantize_factor(scale) == q.dequantize);
        }
}

// Against block_quantize (its vector kernels where they take the blocks) and block_dequantize: the
// device runs the scalar path's per-block rule, quantize_one_block. (This test found the AVX-512
// kernel's NVFP4 columns going half through a band the kernel then refused, fixed with its test
// in tests/core/test_block_scaling.cpp.)
TEST_CASE("the device's block-scaled operand (block_quantize on the host twin) is block_quantize then block_dequantize's, bit for bit and count for count") {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> binade(-40, 30);
  const std::unique_ptr<DeviceOps> twin = make_host_device_ops();
  const BlockFormat formats_tested[] = {block_formats::mxfp8_e4m3, block_formats::mxfp8_e5m2, block_formats::mxfp6_e2m3, block_formats::mxfp4,
                                        block_formats::mxint8, block_formats::nvfp4};
  for (const BlockFormat& format : formats_tested)
    for (const BlockAxis axis : {BlockAxis::rows, BlockAxis::cols})
      for (const RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::toward_zero, RoundingMode::stochastic})
        for (const bool specials : {false, true}) {
          CAPTURE(block_format_name(format));
          CAPTURE(axis == BlockAxis::rows ? "rows" : "cols");
          CAPTURE(rounding_mode_name(mode));
          CAPTURE(specials);
          // 45 x 70 row-major: blocks that end short both ways; whole zero blocks; specials in some.
          const BlockLayout layout{45, 70, axis, format.block_size};
          std::vector<float> values(layout.element_count());
          for (float& v : values) v = std::ldexp(normal(rng), binade(rng));
          for (std::size_t i = 0; i < 40; ++i) values[i] = 0.0f;
          values[100] = -0.0f, values[200] = 1e-42f, values[300] = 3e38f;
          if (specials) values[400] = std::numeric_limits<float>::infinity(), values[900] = std::numeric_limits<float>::quiet_NaN();
          Context ctx;
          ctx.rounding = mode;
          ctx.stochastic_seed = 31;
          ctx.stochastic_counter = 500;
          Context cpu_ctx = ctx;
          std::vector<std::uint8_t> codes(values.size()), scales(layout.block_count());
          std::vector<float> want(values.size());
          float tensor_scale = 1;
          BlockStatistics want_statistics;
          block_quantize(format, ScaleRule::floor, layout, values, codes, scales, tensor_scale, cpu_ctx, &want_statistics);
          block_dequantize(format, layout, codes, scales, tensor_scale, want);
          std::vector<float> got(values.size());
          std::vector<unsigned long long> counters(block_counter_count, 0);
          std::uint32_t amax = 0;
          const std::uint64_t counter = 400;  // the run's counter word (the twin's memory is the host's): words 500 on
          const RandomWords words{ctx.stochastic_seed, &counter, 100};
          twin->block_quantize(values.data(), got.data(), layout, format, ScaleRule::floor, ctx, words, counters.data(), &amax);
          std::size_t different = 0;
          for (std::size_t i = 0; i < values.size(); ++i) different += std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]);
          CHECK(different == 0);
          BlockStatistics got_statistics;
          add_block_counters(counters.data(), got_statistics);
          CHECK(got_statistics == want_statistics);
          CHECK(got_statistics.nan_blocks == (specials ? 2u : 0u));
          CHECK(cpu_ctx.stochastic_counter == 500 + values.size());
          // In place, as the recipes' products read a copy.
          std::vector<float> in_place = values;
          std::fill(counters.begin(), counters.end(), 0);
          twin->block_quantize(in_place.data(), in_place.data(), layout, format, ScaleRule::floor, ctx, words, counters.data(), &amax);
          CHECK(std::memcmp(in_place.data(), got.data(), got.size() * sizeof(float)) == 0);
        }
}
