// GEMM operand recipes (gemm_recipe.hpp): Transformer Engine's scale rule, FP8 operands against
// the core's element conversion one value at a time, the delayed history, products from FP8
// values, block-scaled operands along each axis against block_quantize on a transposed copy,
// and a recipe run resuming from a checkpoint to the same bits.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "fpscope/core/convert.hpp"
#include "fpscope/gpu/checkpoint.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/synthetic_data.hpp"

using namespace fpscope;

namespace {

std::uint32_t bits_of(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

Eigen::MatrixXf random_matrix(Eigen::Index rows, Eigen::Index cols, int seed, int low_exponent, int high_exponent) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(low_exponent, high_exponent);
  Eigen::MatrixXf m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = std::ldexp(normal(rng), exponent(rng));
  return m;
}

}  // namespace

TEST_CASE("the FP8 scale: (max / amax) / 2^margin in float32; zero, NaN or infinite amax keep the previous scale") {
  CHECK(bits_of(fp8_scale_from_amax(3.0f, 448.0f, 0, 1.0f)) == bits_of(448.0f / 3.0f));
  CHECK(bits_of(fp8_scale_from_amax(3.0f, 448.0f, 2, 1.0f)) == bits_of((448.0f / 3.0f) / 4.0f));
  CHECK(fp8_scale_from_amax(0.0f, 448.0f, 0, 5.0f) == 5.0f);
  CHECK(fp8_scale_from_amax(std::numeric_limits<float>::quiet_NaN(), 448.0f, 0, 5.0f) == 5.0f);
  CHECK(fp8_scale_from_amax(std::numeric_limits<float>::infinity(), 448.0f, 0, 5.0f) == 5.0f);
  CHECK(fp8_scale_from_amax(1e-45f, 57344.0f, 0, 5.0f) == std::numeric_limits<float>::max());  // 57344 / 2^-149 overflows
}

TEST_CASE("an FP8 operand is cast(fl32(x * scale)) with saturation, element by element, with exact counts") {
  for (const GemmRecipe recipe : {GemmRecipe::fp8_current, GemmRecipe::fp8_unscaled}) {
    for (const GemmOperand operand : {GemmOperand::input, GemmOperand::output_gradient}) {
      CAPTURE(gemm_recipe_name(recipe));
      CAPTURE(gemm_operand_name(operand));
      RecipeConfig config;
      config.recipe = recipe;
      Eigen::MatrixXf x = random_matrix(40, 24, 3, -30, 12);
      x(0, 0) = 0.0f;
      x(1, 0) = 1e30f;  // the amax: everything else is tiny beside it
      Fp8TensorState state;
      Context ctx;
      OperandScaling record;
      const Fp8Operand q = quantize_fp8_operand(config, operand, x, state, ctx, record);
      const Format f = operand == GemmOperand::input ? formats::e4m3 : formats::e5m2;
      CHECK(record.format == (operand == GemmOperand::input ? "e4m3" : "e5m2"));
      const float scale = recipe == GemmRecipe::fp8_unscaled ? 1.0f : fp8_scale_from_amax(1e30f, operand == GemmOperand::input ? 448.0f : 57344.0f, 0, 1.0f);
      CHECK(bits_of(state.scale) == bits_of(scale));
      CHECK(record.scale == static_cast<double>(scale));
      CHECK(record.amax == 1e30f);
      CHECK(bits_of(q.dequantize) == bits_of(1.0f / scale));
      std::uint64_t flushed = 0, saturated = 0, zeros = 0;
      Context reference;
      reference.saturate = true;
      for (Eigen::Index i = 0; i < x.size(); ++i) {
        const float scaled = x.data()[i] * scale;
        const float expected = static_cast<float>(to_double(f, from_float(f, scaled, reference), reference));
        REQUIRE(bits_of(q.values.data()[i]) == bits_of(expected));
        zeros += x.data()[i] == 0.0f;
        flushed += scaled != 0.0f && expected == 0.0f;
        saturated += std::fabs(scaled) > 0 && std::isfinite(scaled) && std::fabs(expected) == (operand == GemmOperand::input ? 448.0f : 57344.0f) &&
                     std::fabs(scaled) > (operand == GemmOperand::input ? 464.0f : 61440.0f);
      }
      CHECK(record.elements == static_cast<std::uint64_t>(x.size()));
      CHECK(record.zeros == zeros);
      CHECK(record.flushed_to_zero == flushed);
      if (recipe == GemmRecipe::fp8_unscaled) CHECK(record.saturated == saturated);
      CHECK(record.flushed_to_zero > 0);
      CHECK_FALSE(ctx.saturate);  // the run's context is left as it was
    }
  }
}

TEST_CASE("delayed scaling: scale 1 until there is a history, then from its largest amax over the window") {
  RecipeConfig config;
  config.recipe = GemmRecipe::fp8_delayed;
  config.amax_history = 3;
  Fp8TensorState state;
  Context ctx;
  OperandScaling record;
  const float amaxes[] = {2.0f, 8.0f, 1.0f, 0.5f, 0.25f, 0.125f};
  std::vector<float> scales;
  for (const float amax : amaxes) {
    Eigen::MatrixXf x = Eigen::MatrixXf::Constant(4, 4, amax / 2);
    x(0, 0) = amax;
    quantize_fp8_operand(config, GemmOperand::weight, x, state, ctx, record);
    scales.push_back(state.scale);
    CHECK(record.amax == amax);
  }
  CHECK(scales[0] == 1.0f);                     // no history yet
  CHECK(scales[1] == 448.0f / 2.0f);            // history {2}
  CHECK(scales[2] == 448.0f / 8.0f);            // {2, 8}
  CHECK(scales[3] == 448.0f / 8.0f);            // {2, 8, 1}
  CHECK(scales[4] == 448.0f / 8.0f);            // {8, 1, 0.5}
  CHECK(scales[5] == 448.0f / 1.0f);            // {1, 0.5, 0.25}: 8 left the window
  CHECK(state.amax_history == std::vector<float>{0.5f, 0.25f, 0.125f});
}

TEST_CASE("a product of FP8 operands accumulates their values in float32, then applies both dequantization factors") {
  // Small integers: every product and partial sum is exact in float32, so the order of the sum
  // does not matter and the result is known exactly.
  Eigen::MatrixXf a(3, 4), b(5, 4);
  a << 1, 2, 3, 4, -1, 0.5f, 6, 8, 0, 0, 1, 1;
  for (Eigen::Index i = 0; i < b.size(); ++i) b.data()[i] = static_cast<float>(static_cast<int>(i % 7) - 3);
  const float da = 0.125f, db = 3.0f;
  const Eigen::MatrixXf c = fp8_product(a, false, da, b, true, db);
  const Eigen::MatrixXf expected = (a * b.transpose()) * (da * db);
  for (Eigen::Index i = 0; i < c.size(); ++i) CHECK(bits_of(c.data()[i]) == bits_of(expected.data()[i]));
  const Eigen::MatrixXf ct = fp8_product(a, true, da, a, false, db);
  CHECK(ct.rows() == 4);
  CHECK(ct.cols() == 4);
}

TEST_CASE("a block-scaled operand along either axis is block_quantize then block_dequantize along that axis") {
  for (const GemmRecipe recipe : {GemmRecipe::mxfp8, GemmRecipe::mxfp6, GemmRecipe::mxfp4, GemmRecipe::nvfp4}) {
    CAPTURE(gemm_recipe_name(recipe));
    const Eigen::MatrixXf x = random_matrix(70, 45, 11, -20, 20);
    for (const bool along_rows : {false, true}) {
      CAPTURE(along_rows);
      Context ctx;
      BlockStatistics statistics;
      const Eigen::MatrixXf q = block_scaled_operand(recipe, x, along_rows, ctx, &statistics);
      // The reference: the blocked axis laid out contiguously in a row-major copy, quantized along rows.
      const BlockFormat format = block_format_of(recipe);
      const Eigen::Index outer = along_rows ? x.cols() : x.rows(), inner = along_rows ? x.rows() : x.cols();
      std::vector<float> laid(static_cast<std::size_t>(x.size()));
      for (Eigen::Index o = 0; o < outer; ++o)
        for (Eigen::Index i = 0; i < inner; ++i)
          laid[static_cast<std::size_t>(o * inner + i)] = along_rows ? x(i, o) : x(o, i);
      const BlockLayout layout{static_cast<std::size_t>(outer), static_cast<std::size_t>(inner), BlockAxis::rows, format.block_size};
      std::vector<std::uint8_t> codes(laid.size()), scales(layout.block_count());
      std::vector<float> back(laid.size());
      float tensor_scale = 1;
      Context reference;
      BlockStatistics expected_statistics;
      block_quantize(format, ScaleRule::floor, layout, laid, codes, scales, tensor_scale, reference, &expected_statistics);
      block_dequantize(format, layout, codes, scales, tensor_scale, back);
      for (Eigen::Index o = 0; o < outer; ++o)
        for (Eigen::Index i = 0; i < inner; ++i)
          REQUIRE(bits_of(along_rows ? q(i, o) : q(o, i)) == bits_of(back[static_cast<std::size_t>(o * inner + i)]));
      CHECK(statistics == expected_statistics);
      // Counts add to those the statistics already hold (a step sums an operand's two quantizations
      // into one record: block_operand_statistics), relative exponents and scale codes included.
      Context again;
      block_scaled_operand(recipe, x, !along_rows, again, &statistics);
      BlockStatistics other_axis, sum = expected_statistics;
      Context separate;
      block_scaled_operand(recipe, x, !along_rows, separate, &other_axis);
      sum.merge(other_axis);
      CHECK(statistics == sum);
      CHECK(statistics.elements == 2 * static_cast<std::uint64_t>(x.size()));
    }
  }
}

TEST_CASE("square weight tiles: the same values along either axis, block_quantize_square_tiles's, and one quantization a step") {
  for (const GemmRecipe recipe : {GemmRecipe::mxfp8, GemmRecipe::mxfp4, GemmRecipe::nvfp4}) {
    CAPTURE(gemm_recipe_name(recipe));
    const Eigen::MatrixXf x = random_matrix(70, 45, 12, -20, 20);
    Context ctx_rows, ctx_cols;
    BlockStatistics rows_statistics, cols_statistics;
    const Eigen::MatrixXf along_rows = block_scaled_operand(recipe, x, true, ctx_rows, &rows_statistics, true);
    const Eigen::MatrixXf along_cols = block_scaled_operand(recipe, x, false, ctx_cols, &cols_statistics, true);
    for (Eigen::Index i = 0; i < x.size(); ++i) REQUIRE(bits_of(along_rows.data()[i]) == bits_of(along_cols.data()[i]));
    CHECK(rows_statistics.flushed_to_zero == cols_statistics.flushed_to_zero);
    CHECK(rows_statistics.saturated == cols_statistics.saturated);
    // The blocks' own amaxes would give other values: the tiles are not the 1-D blocks.
    Context plain_ctx;
    const Eigen::MatrixXf plain = block_scaled_operand(recipe, x, false, plain_ctx);
    bool any_differs = false;
    for (Eigen::Index i = 0; i < x.size(); ++i) any_differs = any_differs || bits_of(plain.data()[i]) != bits_of(along_cols.data()[i]);
    CHECK(any_differs);
    // The core's tiles on the column-major matrix read as its row-major transpose.
    const BlockFormat format = block_format_of(recipe);
    const BlockLayout layout = recipe_block_layout(format, static_cast<std::size_t>(x.rows()), static_cast<std::size_t>(x.cols()), false);
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(x.size())), scales(layout.block_count());
    std::vector<float> back(codes.size());
    float tensor_scale = 1;
    Context reference;
    block_quantize_square_tiles(format, ScaleRule::floor, layout, std::span<const float>(x.data(), codes.size()), codes, scales, tensor_scale, reference);
    block_dequantize(format, layout, codes, scales, tensor_scale, back);
    for (Eigen::Index i = 0; i < x.size(); ++i) REQUIRE(bits_of(along_cols.data()[i]) == bits_of(back[static_cast<std::size_t>(i)]));
  }
  // A step quantizes each weight once (its record counts its elements once, where 1-D blocks
  // count them for both products), and the run is its own: the same seed, the same bits.
  for (const bool tiles : {false, true}) {
    CAPTURE(tiles);
    TrainingConfig config;
    config.layer_sizes = {12, 20, 7};
    config.precision = Precision::bf16;
    config.scaler = LossScalerConfig::none();
    config.recipe.recipe = GemmRecipe::nvfp4;
    config.recipe.square_weight_tiles = tiles;
    config.learning_rate = 0.1f;
    const auto run = [&] {
      MlpTrainer trainer(config);
      SyntheticClassification data(12, 7, 5, 0.5f);
      Eigen::MatrixXf inputs;
      std::vector<int> labels;
      StepResult result;
      for (int s = 0; s < 4; ++s) {
        data.next_batch(32, inputs, labels);
        result = trainer.step(inputs, labels, false);
      }
      return std::make_pair(trainer.state(), result);
    };
    const auto [state, result] = run();
    for (const BlockOperandStatistics& o : result.block_operands) {
      if (o.operand != GemmOperand::weight) continue;
      CAPTURE(o.name);
      const std::uint64_t weight_elements = o.name == "fc1" ? 12 * 20 : 20 * 7;
      // fc1's weight feeds no input gradient (the inputs have none): one product either way.
      CHECK(o.statistics.elements == (tiles || o.name == "fc1" ? 1 : 2) * weight_elements);
    }
    const auto again = run();
    for (std::size_t l = 0; l < state.weights.size(); ++l) CHECK(state.weights[l] == again.first.weights[l]);
  }
  CHECK(recipe_description(RecipeConfig{GemmRecipe::nvfp4, false, 16, 0, true}) == "nvfp4 (weights in 16x16 tiles)");
  // What analyze and the app read back from a run log's header: tiles or not, whatever else the
  // recipe says.
  for (const GemmRecipe recipe : {GemmRecipe::mxfp8, GemmRecipe::mxfp4, GemmRecipe::nvfp4, GemmRecipe::fp8_delayed})
    for (const bool tiles : {false, true})
      for (const bool hadamard : {false, true}) {
        RecipeConfig config{recipe, false, 16, 0, tiles};
        config.hadamard_weight_gradients = hadamard;
        config.gradient_rounding = RoundingMode::stochastic;
        CAPTURE(recipe_description(config));
        CHECK(recipe_has_weight_tiles(recipe_description(config)) == (tiles && block_scaled(recipe)));
      }
  CHECK_FALSE(recipe_has_weight_tiles(""));
  CHECK_FALSE(recipe_has_weight_tiles("mxfp4"));
}

TEST_CASE("a recipe's gradient rounding: the output gradients alone round its way, from the run's stream") {
  for (const GemmRecipe recipe : {GemmRecipe::nvfp4, GemmRecipe::mxfp4, GemmRecipe::fp8_current}) {
    CAPTURE(gemm_recipe_name(recipe));
    const auto run = [&](RoundingMode rounding, std::optional<RoundingMode> gradients, int steps) {
      TrainingConfig config;
      config.layer_sizes = {12, 20, 7};
      config.precision = Precision::bf16;
      config.scaler = LossScalerConfig::none();
      config.rounding = rounding;
      config.recipe.recipe = recipe;
      config.recipe.gradient_rounding = gradients;
      config.learning_rate = 0.1f;
      MlpTrainer trainer(config);
      SyntheticClassification data(12, 7, 5, 0.5f);
      Eigen::MatrixXf inputs;
      std::vector<int> labels;
      std::vector<StepResult> results;
      for (int s = 0; s < steps; ++s) {
        data.next_batch(32, inputs, labels);
        results.push_back(trainer.step(inputs, labels, false));
      }
      return std::make_pair(trainer.state(), results);
    };
    const auto [nearest, nearest_steps] = run(RoundingMode::nearest_even, std::nullopt, 3);
    const auto [stochastic, stochastic_steps] = run(RoundingMode::nearest_even, RoundingMode::stochastic, 3);
    // Step 0's forward is the same run; its output gradients (and so the update) are not.
    CHECK(std::bit_cast<std::uint64_t>(nearest_steps[0].loss) == std::bit_cast<std::uint64_t>(stochastic_steps[0].loss));
    if (block_scaled(recipe)) {
      REQUIRE(nearest_steps[0].block_operands.size() == stochastic_steps[0].block_operands.size());
      bool gradients_differ = false;
      for (std::size_t i = 0; i < nearest_steps[0].block_operands.size(); ++i) {
        const BlockOperandStatistics &a = nearest_steps[0].block_operands[i], &b = stochastic_steps[0].block_operands[i];
        CAPTURE(a.name);
        CAPTURE(gemm_operand_name(a.operand));
        if (a.operand == GemmOperand::output_gradient) gradients_differ = gradients_differ || !(a.statistics == b.statistics);
        else CHECK(a.statistics == b.statistics);  // inputs and weights: the same values, rounded to nearest in both
      }
      CHECK(gradients_differ);
    }
    bool moved_apart = false;
    for (std::size_t l = 0; l < nearest.weights.size(); ++l) moved_apart = moved_apart || nearest.weights[l] != stochastic.weights[l];
    CHECK(moved_apart);
    // The same mode as the run's changes nothing, and nor does stochastic gradients in a run that
    // rounds everything stochastically: the stream's positions are the run's either way.
    const auto same = [](const TrainerState& a, const TrainerState& b) {
      bool equal = a.stochastic_counter == b.stochastic_counter;
      for (std::size_t l = 0; l < a.weights.size(); ++l) equal = equal && a.weights[l] == b.weights[l] && a.biases[l] == b.biases[l];
      return equal;
    };
    CHECK(same(run(RoundingMode::nearest_even, RoundingMode::nearest_even, 3).first, nearest));
    CHECK(same(run(RoundingMode::stochastic, RoundingMode::stochastic, 3).first, run(RoundingMode::stochastic, std::nullopt, 3).first));
    CHECK(stochastic.stochastic_counter == nearest.stochastic_counter);
  }
  RecipeConfig described{GemmRecipe::nvfp4};
  described.square_weight_tiles = true;
  described.gradient_rounding = RoundingMode::stochastic;
  CHECK(recipe_description(described) == "nvfp4 (weights in 16x16 tiles, gradients rounded stochastic)");
  RecipeConfig fp8{GemmRecipe::fp8_current};
  fp8.gradient_rounding = RoundingMode::toward_zero;
  CHECK(recipe_description(fp8) == "fp8-current (hybrid, margin 0, gradients rounded rz)");
}

TEST_CASE("the random Hadamard transform: H diag(s) / 4 on runs of 16, orthogonal, along either axis, a short run left") {
  // A unit vector e_k comes out as column k of H / 4 exactly (every value +-0.25), its sign flipped by s_k.
  for (const std::uint16_t signs : {std::uint16_t{0}, std::uint16_t{0xA5C3}}) {
    for (int k = 0; k < 16; ++k) {
      Eigen::MatrixXf e = Eigen::MatrixXf::Zero(16, 1);
      e(k, 0) = 1.0f;
      const Eigen::MatrixXf t = random_hadamard(e, true, signs);
      const float sign_k = (signs >> k & 1) != 0 ? -1.0f : 1.0f;
      for (int i = 0; i < 16; ++i) CHECK(t(i, 0) == sign_k * ((std::popcount(static_cast<unsigned>(i & k)) % 2 == 0) ? 0.25f : -0.25f));
    }
  }
  const Eigen::MatrixXf x = random_matrix(37, 5, 21, -3, 3), y = random_matrix(37, 5, 22, -3, 3);
  const std::uint16_t signs = hadamard_signs(7);
  const Eigen::MatrixXf tx = random_hadamard(x, true, signs), ty = random_hadamard(y, true, signs);
  constexpr double u = 1.0 / (1 << 24);  // float32's unit roundoff
  for (Eigen::Index c = 0; c < x.cols(); ++c) {
    for (Eigen::Index first = 0; first + 16 <= x.rows(); first += 16) {
      // Against H diag(s) x / 4 in double: four stages of float32 sums each err by at most u times
      // the sum of the run's magnitudes, and the quarter is exact.
      double magnitude = 0;
      for (int j = 0; j < 16; ++j) magnitude += std::abs(static_cast<double>(x(first + j, c)));
      for (int i = 0; i < 16; ++i) {
        double exact = 0;
        for (int j = 0; j < 16; ++j)
          exact += ((std::popcount(static_cast<unsigned>(i & j)) % 2 == 0) ? 1.0 : -1.0) * ((signs >> j & 1) != 0 ? -1.0 : 1.0) * x(first + j, c);
        CHECK(std::abs(static_cast<double>(tx(first + i, c)) - exact / 4) <= u * magnitude);
      }
    }
    // The last 5 rows of 37 are a short run: left as they were.
    for (Eigen::Index r = 32; r < 37; ++r) CHECK(bits_of(tx(r, c)) == bits_of(x(r, c)));
    // Orthogonal: two operands turned alike keep their dot product (to float32's roundings: a
    // relative 1e-5 of the sum of the products' magnitudes).
    const double dot = x.col(c).cast<double>().dot(y.col(c).cast<double>());
    const double turned = tx.col(c).cast<double>().dot(ty.col(c).cast<double>());
    const double scale = x.col(c).cast<double>().cwiseAbs().dot(y.col(c).cast<double>().cwiseAbs());
    CHECK(std::abs(turned - dot) <= 1e-5 * scale);
  }
  // Along the second axis: the transpose's along the first.
  const Eigen::MatrixXf along_columns = random_hadamard(Eigen::MatrixXf(x.transpose()), false, signs);
  for (Eigen::Index i = 0; i < x.size(); ++i) CHECK(bits_of(Eigen::MatrixXf(along_columns.transpose()).data()[i]) == bits_of(tx.data()[i]));
  CHECK(hadamard_signs(7) != hadamard_signs(8));
}

TEST_CASE("recipe runs: the same seed gives the same bits, and a checkpoint resumes a delayed-scaling run exactly") {
  for (const GemmRecipe recipe : {GemmRecipe::fp8_delayed, GemmRecipe::fp8_current, GemmRecipe::mxfp4}) {
    CAPTURE(gemm_recipe_name(recipe));
    TrainingConfig config;
    config.layer_sizes = {12, 20, 7};
    config.precision = Precision::bf16;
    config.scaler = LossScalerConfig::none();
    config.recipe.recipe = recipe;
    config.recipe.amax_history = 4;
    config.learning_rate = 0.1f;
    const auto run = [&](int steps, const TrainerState* from, std::vector<TrainerState>* states) {
      MlpTrainer trainer(config);
      if (from) trainer.restore(*from);
      SyntheticClassification data(12, 7, 5, 0.5f);
      Eigen::MatrixXf inputs;
      std::vector<int> labels;
      for (int s = 0; s < steps; ++s) {
        data.next_batch(32, inputs, labels);
        if (from && s < from->steps) continue;  // the batches the checkpoint's steps used
        const StepResult result = trainer.step(inputs, labels, false);
        if (per_tensor_fp8(recipe)) CHECK(result.scaling.size() == 3 * 2);
        else CHECK(result.block_operands.size() == 3 * 2);
        if (states) states->push_back(trainer.state());
      }
      return trainer.state();
    };
    std::vector<TrainerState> states;
    const TrainerState straight = run(10, nullptr, &states);
    CHECK(per_tensor_fp8(recipe) == !straight.fp8.empty());
    TrainingCheckpoint checkpoint;
    checkpoint.settings = "test";
    checkpoint.trainer = states[4];
    const TrainingCheckpoint back = decode_checkpoint(encode_checkpoint(checkpoint), "test checkpoint");
    CHECK(back.trainer.fp8 == states[4].fp8);
    const TrainerState resumed = run(10, &back.trainer, nullptr);
    for (std::size_t l = 0; l < straight.weights.size(); ++l) {
      CHECK(straight.weights[l] == resumed.weights[l]);
      CHECK(straight.biases[l] == resumed.biases[l]);
    }
    CHECK(straight.fp8 == resumed.fp8);
  }
  TrainingConfig plain;
  plain.layer_sizes = {12, 20, 7};
  MlpTrainer other(plain);
  TrainingConfig fp8 = plain;
  fp8.recipe.recipe = GemmRecipe::fp8_current;
  CHECK_THROWS_AS(other.restore(MlpTrainer(fp8).state()), std::invalid_argument);
}
