// The CPU backend's GPT: its shape, every layer's gradient against float64 finite differences,
// the float32 step against the float64 gradient, recording, skipped steps, checkpoints, and its
// data (the synthetic sequences and text files).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "fpscope/core/names.hpp"
#include "fpscope/gpu/fault_injection.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/sequence_data.hpp"
#include "fpscope/gpu/sgd_update.hpp"
#include "fpscope/gpu/training_data.hpp"
#include "recorded_blocks.hpp"
#include "device_step.hpp"
#include "fpscope/gpu/host_device_ops.hpp"
#include "gpt_pass.hpp"

using namespace fpscope;

namespace {

struct TokenBatch {
  Eigen::MatrixXi tokens;
  std::vector<int> targets;
  Eigen::MatrixXf as_inputs() const { return tokens.cast<float>(); }
};

TokenBatch random_tokens(const GptShape& shape, int batch, unsigned seed) {
  std::mt19937 rng(seed);
  TokenBatch b{Eigen::MatrixXi(batch, shape.context), {}};
  for (Eigen::Index i = 0; i < b.tokens.size(); ++i) b.tokens.data()[i] = static_cast<int>(rng() % static_cast<unsigned>(shape.vocab));
  for (int i = 0; i < batch * shape.context; ++i) b.targets.push_back(static_cast<int>(rng() % static_cast<unsigned>(shape.vocab)));
  return b;
}

std::vector<Eigen::MatrixXd> as_double(const std::vector<Eigen::MatrixXf>& parameters) {
  std::vector<Eigen::MatrixXd> out;
  for (const auto& p : parameters) out.push_back(p.cast<double>());
  return out;
}

bool same_bits(const std::vector<Eigen::MatrixXf>& a, const std::vector<Eigen::MatrixXf>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t p = 0; p < a.size(); ++p) {
    if (a[p].rows() != b[p].rows() || a[p].cols() != b[p].cols()) return false;
    for (Eigen::Index i = 0; i < a[p].size(); ++i)
      if (std::bit_cast<std::uint32_t>(a[p].data()[i]) != std::bit_cast<std::uint32_t>(b[p].data()[i])) return false;
  }
  return true;
}

TrainingConfig gpt_config(const GptShape& shape, Precision precision) {
  TrainingConfig config;
  config.gpt = shape;
  config.precision = precision;
  config.scaler = precision == Precision::fp32 ? LossScalerConfig::none() : LossScalerConfig::pytorch();
  config.learning_rate = 1e-3f;
  config.optimizer.kind = OptimizerKind::adamw;
  return config;
}

const GptShape tiny{2, 8, 2, 5, 11};

}  // namespace

TEST_CASE("GPT shapes parse, name themselves and refuse what they are not") {
  CHECK(parse_gpt_shape("gpt") == GptShape{});
  const GptShape shape = parse_gpt_shape("gpt:layers=4,width=256,heads=4,context=128");
  CHECK(shape == GptShape{4, 256, 4, 128, 256});
  CHECK(gpt_shape_name(shape) == "gpt:layers=4,width=256,heads=4,context=128,vocab=256");
  CHECK(parse_gpt_shape(gpt_shape_name(tiny)) == tiny);
  CHECK(names_gpt("gpt"));
  CHECK(names_gpt("gpt:layers=1"));
  CHECK_FALSE(names_gpt("784-10"));
  CHECK_FALSE(names_gpt("gpt2"));
  for (const char* bad : {"gpt:width=10,heads=4", "gpt:layers=0", "gpt:layers=2,layers=3", "gpt:depth=2", "gpt:", "gpt:layers=2,",
                          "gpt:layers=x", "gpt:layers=2x", "gpt:context=99999999", "gpt2", "gpt:layers"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_gpt_shape(bad), std::invalid_argument);
  }
  // 12 D^2 + 13 D per block, (vocab + context) D for the embeddings, 2 D for the final LayerNorm.
  const std::int64_t D = 256;
  CHECK(gpt_parameter_count(shape) == 4 * (12 * D * D + 13 * D) + (256 + 128) * D + 2 * D);
  const auto parameters = gpt_parameters(tiny);
  REQUIRE(parameters.size() == 4 + 12 * 2);
  CHECK(parameters[2].name == "h0.ln1.weight");
  CHECK(parameters[4].name == "h0.attn.qkv.weight");
  CHECK(parameters[4].rows == 24);
  CHECK(parameters[4].recorded == "h0.attn.qkv");
  CHECK(parameters[5].recorded.empty());
  CHECK(parameters.back().name == "ln_f.bias");
}

TEST_CASE("every GPT layer's gradient matches float64 finite differences") {
  // Random parameters everywhere (gains away from 1, biases away from 0) so that every path
  // carries gradient; three sequences so that positions and tokens repeat.
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 0.5);
  std::vector<Eigen::MatrixXd> parameters = as_double(initial_gpt_parameters(tiny, 3));
  for (auto& p : parameters)
    for (Eigen::Index i = 0; i < p.size(); ++i) p.data()[i] += normal(rng);
  const TokenBatch batch = random_tokens(tiny, 3, 11);
  std::vector<Eigen::MatrixXd> gradients;
  const double loss = gpt_loss_in_double(tiny, parameters, batch.tokens, batch.targets, &gradients);
  CHECK(std::isfinite(loss));
  REQUIRE(gradients.size() == parameters.size());
  const auto layout = gpt_parameters(tiny);
  const double h = 1e-6;
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    CAPTURE(layout[p].name);
    double worst = 0;
    for (Eigen::Index i = 0; i < parameters[p].size(); ++i) {
      const double kept = parameters[p].data()[i];
      parameters[p].data()[i] = kept + h;
      const double up = gpt_loss_in_double(tiny, parameters, batch.tokens, batch.targets);
      parameters[p].data()[i] = kept - h;
      const double down = gpt_loss_in_double(tiny, parameters, batch.tokens, batch.targets);
      parameters[p].data()[i] = kept;
      const double numeric = (up - down) / (2 * h);
      // Central differences in float64 at h = 1e-6: about 1e-10 of rounding, 1e-12 of truncation.
      worst = std::max(worst, std::abs(numeric - gradients[p].data()[i]) / (1e-7 + 1e-6 * std::abs(numeric)));
    }
    CHECK(worst <= 1.0);
  }
}

TEST_CASE("the float32 GPT step follows the float64 loss and gradient") {
  TrainingConfig config = gpt_config(tiny, Precision::fp32);
  config.optimizer.kind = OptimizerKind::sgd;
  config.learning_rate = 1.0f;  // the update is then minus the gradient
  GptTrainer trainer(tiny, config);
  const std::vector<Eigen::MatrixXf> before = trainer.parameters();
  const TokenBatch batch = random_tokens(tiny, 4, 5);
  std::vector<Eigen::MatrixXd> gradients;
  const double loss = gpt_loss_in_double(tiny, as_double(before), batch.tokens, batch.targets, &gradients);
  const StepResult result = trainer.step(batch.as_inputs(), batch.targets, false);
  CHECK(result.loss == doctest::Approx(loss).epsilon(1e-6));
  const auto layout = gpt_parameters(tiny);
  for (std::size_t p = 0; p < before.size(); ++p) {
    CAPTURE(layout[p].name);
    const Eigen::MatrixXd step = (before[p] - trainer.parameters()[p]).cast<double>();
    // float32 sums and the float32 update w - g: within 1e-4 of the parameter's largest gradient.
    const double largest = gradients[p].cwiseAbs().maxCoeff();
    CHECK((step - gradients[p]).cwiseAbs().maxCoeff() <= 1e-4 * largest + 1e-7);
  }
}

TEST_CASE("a recorded fp16 GPT step names every tensor, counts all of it and carries the loss scale") {
  GptTrainer trainer(tiny, gpt_config(tiny, Precision::fp16));
  const int batch = 3;
  const TokenBatch b = random_tokens(tiny, batch, 2);
  const StepResult result = trainer.step(b.as_inputs(), b.targets, true);
  REQUIRE(result.snapshot);
  std::map<std::pair<std::string, TensorKind>, const TensorRecord*> records;
  for (const TensorRecord& t : result.snapshot->tensors) {
    CHECK(records.emplace(std::pair{t.name, t.kind}, &t).second);  // each once
    CHECK(t.cast.has_value());
    CHECK(t.scale == (t.kind == TensorKind::activation_gradient || t.kind == TensorKind::weight_gradient ? result.loss_scale : 1.0));
  }
  std::vector<std::string> activations{"embed", "ln_f", "head"};
  std::vector<std::string> weights{"embed.tokens", "embed.positions", "ln_f"};
  for (int l = 0; l < tiny.layers; ++l) {
    const std::string h = "h" + std::to_string(l) + ".";
    for (const char* name : {"ln1", "attn.qkv", "attn.scores", "attn.softmax", "attn.context", "attn.proj", "residual1", "ln2", "mlp.fc",
                             "mlp.gelu", "mlp.proj", "residual2"})
      activations.push_back(h + name);
    for (const char* name : {"ln1", "attn.qkv", "attn.proj", "ln2", "mlp.fc", "mlp.proj"}) weights.push_back(h + name);
  }
  CHECK(records.size() == 2 * activations.size() + 2 * weights.size());
  for (const std::string& name : activations) {
    CAPTURE(name);
    CHECK(records.count({name, TensorKind::activation}) == 1);
    CHECK(records.count({name, TensorKind::activation_gradient}) == 1);
  }
  for (const std::string& name : weights) {
    CAPTURE(name);
    CHECK(records.count({name, TensorKind::weight}) == 1);
    CHECK(records.count({name, TensorKind::weight_gradient}) == 1);
  }
  const std::uint64_t tokens = static_cast<std::uint64_t>(batch) * tiny.context, D = tiny.width;
  const std::uint64_t triangle = static_cast<std::uint64_t>(tiny.context) * (tiny.context + 1) / 2;
  const auto total = [&](const std::string& name, TensorKind kind) { return records.at({name, kind})->histogram.total_count(); };
  CHECK(total("h1.attn.scores", TensorKind::activation) == batch * tiny.heads * triangle);
  CHECK(total("h0.attn.softmax", TensorKind::activation_gradient) == batch * tiny.heads * triangle);
  CHECK(total("h0.attn.qkv", TensorKind::activation) == 3 * D * tokens);
  CHECK(total("h1.mlp.gelu", TensorKind::activation_gradient) == 4 * D * tokens);
  CHECK(total("head", TensorKind::activation) == static_cast<std::uint64_t>(tiny.vocab) * tokens);
  CHECK(total("embed.tokens", TensorKind::weight_gradient) == static_cast<std::uint64_t>(tiny.vocab) * D);
  CHECK(total("h0.mlp.proj", TensorKind::weight) == 4 * D * D);
  CHECK(total("ln_f", TensorKind::weight) == D);
  // Softmax outputs are probabilities: none above 1 (binade 0 holds [1, 2): only exact ones).
  const ExponentHistogram& probabilities = records.at({"h0.attn.softmax", TensorKind::activation})->histogram;
  CHECK(probabilities.highest_binade() <= 0);
}

TEST_CASE("a GPT records block statistics along each tensor's features, and along each query's keys in attention") {
  TrainingConfig config = gpt_config(tiny, Precision::fp16);
  config.record_blocks = parse_block_recording("mxfp4");
  GptTrainer trainer(tiny, config);
  const int batch = 3;
  const TokenBatch b = random_tokens(tiny, batch, 4);
  const StepResult result = trainer.step(b.as_inputs(), b.targets, true);
  REQUIRE(result.snapshot);
  const std::uint64_t tokens = static_cast<std::uint64_t>(batch) * tiny.context;
  for (const TensorRecord& t : result.snapshot->tensors) {
    CAPTURE(t.name);
    CAPTURE(static_cast<int>(t.kind));
    const bool triangle = t.name.find("attn.scores") != std::string::npos || t.name.find("attn.softmax") != std::string::npos;
    REQUIRE(t.blocks.has_value());
    // Blocks of 32 run along the features: a width of 8 makes one (short) block per token and
    // row of features, so the block count is the tensor's size over its feature count.
    const BlockStatistics& s = t.blocks->statistics;
    const std::uint64_t values = t.histogram.total_count();
    CHECK(s.elements == values);
    // A context of 5: each query's keys one short block, 15 values a head of a sequence.
    if (triangle) {
      CHECK(values == static_cast<std::uint64_t>(batch) * tiny.heads * 15);
      CHECK(s.blocks == static_cast<std::uint64_t>(batch) * tiny.heads * 5);
    }
    if (t.name == "h0.attn.qkv" && t.kind == TensorKind::activation) CHECK(s.blocks == tokens * 1);       // 24 features: one block
    if (t.name == "head" && t.kind == TensorKind::activation) CHECK(s.blocks == tokens * 1);              // 11 logits: one block
    if (t.name == "h1.mlp.fc" && t.kind == TensorKind::activation_gradient) CHECK(s.blocks == tokens * 1);  // 32 features
    if (t.name == "h0.mlp.proj" && t.kind == TensorKind::weight) CHECK(s.blocks == 8 * 1);               // 8 x 32: one block a row
  }
}

TEST_CASE("attention triangles' block statistics equal each query's keys blocked on their own") {
  // Three triangles of 37 queries (rows of 1 .. 37 keys: one to two blocks of 32, four to three of
  // 16, the last short), values over many binades with zeros, a NaN, an infinity and an outlier.
  const int context = 37;
  const std::size_t P = gpt_pass::triangle(context), triangles = 3;
  std::mt19937 random(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> packed(triangles * P);
  for (float& v : packed) v = normal(random) * std::exp(normal(random) * 4);
  for (std::size_t i = 0; i < packed.size(); i += 7) packed[i] = 0.0f;
  packed[P + triangle_start(20) + 3] = std::numeric_limits<float>::quiet_NaN();
  packed[2 * P + triangle_start(36) + 35] = std::numeric_limits<float>::infinity();
  packed[triangle_start(30) + 1] = 3.0e30f;
  for (const BlockFormat& f : {block_formats::mxfp8_e4m3, block_formats::mxfp4, block_formats::mxint8, block_formats::nvfp4}) {
    for (const ScaleRule rule : {ScaleRule::floor, ScaleRule::even}) {
      if (f.scale != BlockFormat::Scale::e8m0 && rule != ScaleRule::floor) continue;
      CAPTURE(block_format_name(f));
      CAPTURE(scale_rule_name(rule));
      const BlockRecord record = triangle_block_record(BlockRecording{f, rule}, packed, context);
      BlockStatistics expected;
      for (std::size_t t = 0; t < triangles; ++t)
        for (int j = 0; j < context; ++j) {
          const std::size_t keys = static_cast<std::size_t>(j) + 1;
          const BlockLayout layout{1, keys, BlockAxis::rows, f.block_size};
          std::vector<std::uint8_t> codes(keys), scales(layout.block_count());
          float tensor_scale = 0;
          Context ctx;
          BlockStatistics row;
          block_quantize(f, rule, layout, std::span<const float>(packed.data() + t * P + triangle_start(j), keys), codes, scales, tensor_scale, ctx,
                         &row);
          expected.merge(row);
        }
      if (f.scale == BlockFormat::Scale::e8m0) {
        CHECK(record.statistics == expected);
      } else {
        // NVFP4's scales follow the whole tensor's amax, which a row alone does not have: its
        // counts of values and blocks still are the rows'.
        CHECK(record.statistics.elements == expected.elements);
        CHECK(record.statistics.zeros == expected.zeros);
        CHECK(record.statistics.blocks == expected.blocks);
        CHECK(record.statistics.nan_blocks == expected.nan_blocks);
      }
      CHECK(record.statistics.elements == packed.size());
      // The CUDA backend's way (device_step.hpp), on the host twin of its kernels: the padding laid
      // out and taken back out on the device, or with a NaN scale the host's way; the same
      // statistics either way, with and without the NaN and the infinity.
      const std::unique_ptr<DeviceOps> ops = make_host_device_ops();
      device_step::BlockRecorder recorder(*ops);
      device_step::Buffer<float> on_device(*ops, packed.size()), padded(*ops, triangles * context * context);
      for (const bool with_nan : {true, false}) {  // (the infinity makes a NaN scale too)
        CAPTURE(with_nan);
        std::vector<float> values = packed;
        if (!with_nan) std::replace_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); }, 1.0f);
        ops->upload(on_device.data(), values.data(), values.size() * sizeof(float));
        const BlockRecord want = triangle_block_record(BlockRecording{f, rule}, values, context);
        const BlockRecord got = device_step::triangle_block_record(*ops, recorder, BlockRecording{f, rule}, on_device.data(), context, triangles, padded.data());
        CHECK(got.statistics == want.statistics);
        CHECK((want.statistics.nan_blocks != 0) == with_nan);
      }
    }
  }
}

TEST_CASE("recording changes no bit of a GPT's training, and a restored state goes on with the same bits") {
  TrainingConfig config = gpt_config(tiny, Precision::fp16);
  config.rounding = RoundingMode::stochastic;
  GptTrainer recorded(tiny, config), quiet(tiny, config);
  for (int s = 0; s < 3; ++s) {
    const TokenBatch b = random_tokens(tiny, 2, 20 + static_cast<unsigned>(s));
    recorded.step(b.as_inputs(), b.targets, true);
    quiet.step(b.as_inputs(), b.targets, false);
  }
  CHECK(same_bits(recorded.parameters(), quiet.parameters()));
  CHECK(recorded.state().stochastic_counter == quiet.state().stochastic_counter);

  const TrainerState saved = quiet.state();
  GptTrainer resumed(tiny, config);
  resumed.restore(saved);
  for (int s = 0; s < 2; ++s) {
    const TokenBatch b = random_tokens(tiny, 2, 40 + static_cast<unsigned>(s));
    quiet.step(b.as_inputs(), b.targets, false);
    resumed.step(b.as_inputs(), b.targets, false);
  }
  CHECK(same_bits(resumed.parameters(), quiet.parameters()));
  CHECK(resumed.state().optimizer == quiet.state().optimizer);

  GptTrainer other(GptShape{2, 8, 2, 6, 11}, gpt_config(GptShape{2, 8, 2, 6, 11}, Precision::fp16));
  CHECK_THROWS_AS(other.restore(saved), std::invalid_argument);
}

TEST_CASE("the parameters' cast a GPT's update makes for the next step is that step's own cast, bit for bit") {
  // Two trainers from one seed, one taking the cast its updates make (GptTrainer::next_cast_made),
  // the other asking for its parameters writable before every step, which makes each step cast
  // them itself. Recorded steps (which cast their weights themselves and make none for the next),
  // a skipped step (no update) and a parameter changed between steps come between. bf16 casts make
  // the linear weights' bits where the processor has bf16 products (a width of 64 takes oneDNN's
  // bf16 kernels, 8 the float32 products, their values made from the bits); fp16 casts make values.
  if (!gemm_has_bf16_products()) MESSAGE("no bf16 products here: the bf16 updates make rounded values, as fp16's do");
  struct Case {
    Precision precision;
    RoundingMode rounding;
    OptimizerKind optimizer;
  };
  for (const GptShape& shape : {tiny, GptShape{1, 64, 2, 8, 32}})
    for (const Case& c : {Case{Precision::bf16, RoundingMode::nearest_even, OptimizerKind::adamw}, Case{Precision::bf16, RoundingMode::nearest_even, OptimizerKind::sgd},
                          Case{Precision::bf16, RoundingMode::toward_zero, OptimizerKind::momentum}, Case{Precision::fp16, RoundingMode::nearest_even, OptimizerKind::adamw},
                          Case{Precision::fp16, RoundingMode::odd, OptimizerKind::sgd}}) {
      CAPTURE(shape.width);
      CAPTURE(precision_name(c.precision));
      CAPTURE(static_cast<int>(c.rounding));
      CAPTURE(static_cast<int>(c.optimizer));
      TrainingConfig config = gpt_config(shape, c.precision);
      config.rounding = c.rounding;
      config.optimizer.kind = c.optimizer;
      config.learning_rate = c.optimizer == OptimizerKind::adamw ? 1e-3f : 0.05f;
      GptTrainer taking(shape, config), casting(shape, config);
      const FaultInjection fault{FaultInjection::Value::nan, 0, 4, "h0.attn.qkv"};
      taking.inject(fault);
      casting.inject(fault);
      for (int step = 0; step < 9; ++step) {
        CAPTURE(step);
        const TokenBatch b = random_tokens(shape, 2, 60 + static_cast<unsigned>(step));
        const bool record = step == 2 || step == 6;
        // Made by the update of the step before, where that step was neither recorded nor skipped.
        CHECK(taking.next_cast_made() == (step > 0 && step != 3 && step != 5 && step != 7));
        if (step == 8) {  // a parameter changed between steps: the next step casts what it finds
          taking.parameters()[2](0, 0) += 0.25f;
          casting.parameters()[2](0, 0) += 0.25f;
          CHECK_FALSE(taking.next_cast_made());
        }
        casting.parameters();
        CHECK_FALSE(casting.next_cast_made());
        const StepResult a = taking.step(b.as_inputs(), b.targets, record), d = casting.step(b.as_inputs(), b.targets, record);
        CHECK(std::bit_cast<std::uint64_t>(a.loss) == std::bit_cast<std::uint64_t>(d.loss));
        CHECK(a.skipped == (step == 4));
        CHECK(a.skipped == d.skipped);
        CHECK(a.snapshot == d.snapshot);
        CHECK(same_bits(std::as_const(taking).parameters(), std::as_const(casting).parameters()));
        CHECK(taking.state().stochastic_counter == casting.state().stochastic_counter);
      }
    }
  // Stochastic rounding draws its random words by position: the step casts its parameters itself.
  TrainingConfig stochastic = gpt_config(tiny, Precision::bf16);
  stochastic.rounding = RoundingMode::stochastic;
  GptTrainer trainer(tiny, stochastic);
  const TokenBatch b = random_tokens(tiny, 2, 12);
  trainer.step(b.as_inputs(), b.targets, false);
  CHECK_FALSE(trainer.next_cast_made());
}

TEST_CASE("a GPT's stored tensors rounded in pieces as products and LayerNorms make them: the bits, records and random words of whole casts") {
  // Block statistics on recorded steps need each tensor whole before its cast, so such a step
  // rounds every stored tensor whole, after it is made; without them, the pass rounds them slice
  // by slice inside the products' and LayerNorms' own passes (gpt_pass.hpp's AfterSteps). 256
  // tokens: two slices of 128 columns per product, LayerNorm's columns in the threads' ranges.
  const GptShape shape{2, 64, 4, 32, 256};
  for (const Precision precision : {Precision::fp32, Precision::bf16, Precision::fp16}) {
    for (const RoundingMode rounding : {RoundingMode::nearest_even, RoundingMode::stochastic}) {
      CAPTURE(precision_name(precision));
      CAPTURE(static_cast<int>(rounding));
      TrainingConfig config = gpt_config(shape, precision);
      config.rounding = rounding;
      TrainingConfig with_blocks = config;
      with_blocks.record_blocks = parse_block_recording("mxfp8-e4m3");
      GptTrainer whole(shape, with_blocks), in_pieces(shape, config), quiet(shape, config);
      TrainingData sequences("synthetic", config);
      Eigen::MatrixXf inputs;
      std::vector<int> labels;
      for (int s = 0; s < 3; ++s) {
        sequences.next_batch(8, inputs, labels);
        const StepResult a = whole.step(inputs, labels, true);
        const StepResult b = in_pieces.step(inputs, labels, true);
        const StepResult c = quiet.step(inputs, labels, false);
        CHECK(std::bit_cast<std::uint64_t>(a.loss) == std::bit_cast<std::uint64_t>(b.loss));
        CHECK(std::bit_cast<std::uint64_t>(a.loss) == std::bit_cast<std::uint64_t>(c.loss));
        REQUIRE(a.snapshot);
        REQUIRE(b.snapshot);
        Snapshot without_blocks = *a.snapshot;
        for (TensorRecord& t : without_blocks.tensors) {
          CHECK(t.blocks.has_value());
          t.blocks.reset();
        }
        CHECK(without_blocks == *b.snapshot);
      }
      CHECK(same_bits(whole.parameters(), in_pieces.parameters()));
      CHECK(same_bits(whole.parameters(), quiet.parameters()));
      CHECK(whole.state().stochastic_counter == in_pieces.state().stochastic_counter);
      CHECK(whole.state().stochastic_counter == quiet.state().stochastic_counter);
    }
  }
}

namespace {
// Hooks that say they round in pieces but store nothing: an AfterSteps' other steps in slices.
struct SlicesOnly final : gpt_pass::Hooks<float> {
  void activation(int, const char*, float*, std::size_t, std::size_t) override {}
  void gradient(int, const char*, float*, std::size_t, std::size_t) override {}
  bool rounds_in_pieces() const override { return true; }
};
bool same_bits(const Eigen::MatrixXf& a, const Eigen::MatrixXf& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && std::memcmp(a.data(), b.data(), sizeof(float) * static_cast<std::size_t>(a.size())) == 0;
}
}  // namespace

TEST_CASE("a bias gradient summed over the tokens slice by slice: add_column_sum's bits, however the slices fall") {
  // 200 tokens: runs [0, 64), [64, 128), [128, 192), [192, 200). Magnitudes over 2^20 make the
  // sum's order show in its bits.
  const Eigen::Index features = 37, tokens = 200;
  std::mt19937 random(7);
  std::normal_distribution<float> normal;
  Eigen::MatrixXf values(features, tokens);
  for (Eigen::Index i = 0; i < values.size(); ++i) values.data()[i] = std::ldexp(normal(random), static_cast<int>(random() % 21));
  Eigen::MatrixXf others(features, tokens);
  for (Eigen::Index i = 0; i < others.size(); ++i) others.data()[i] = normal(random);
  // The rule itself, one float at a time: each run token by token from zero, then the runs in order.
  Eigen::MatrixXf expected = Eigen::MatrixXf::Constant(features, 1, 0.5f), expected_products = expected;
  for (Eigen::Index first = 0; first < tokens; first += 64)
    for (Eigen::Index f = 0; f < features; ++f) {
      float run = 0, products = 0;
      for (Eigen::Index n = first; n < std::min(tokens, first + 64); ++n) {
        run += values(f, n);
        const float product = values(f, n) * others(f, n);
        products += product;
      }
      expected(f, 0) += run;
      expected_products(f, 0) += products;
    }
  Eigen::MatrixXf whole = Eigen::MatrixXf::Constant(features, 1, 0.5f), whole_products = whole;
  gpt_pass::add_column_sum(values, whole);
  gpt_pass::add_column_sum_of_products(values, others, whole_products);
  CHECK(same_bits(whole, expected));
  CHECK(same_bits(whole_products, expected_products));

  // Slices that split runs (which finish() then sums from the whole tensor), hold several, or one.
  const std::vector<std::vector<Eigen::Index>> partitions = {{0, 50, 130, 200}, {0, 64, 128, 192, 200}, {0, 200}, {0, 1, 199, 200}};
  for (const std::vector<Eigen::Index>& cuts : partitions) {
    CAPTURE(cuts.size());
    gpt_pass::TokenSums<float> sums(features, tokens), products(features, tokens);
    for (std::size_t s = cuts.size() - 1; s-- > 0;) {  // the last slice first
      sums.sum_runs_within(cuts[s], cuts[s + 1] - cuts[s], values.data() + cuts[s] * features);
      products.sum_runs_within(cuts[s], cuts[s + 1] - cuts[s], values.data() + cuts[s] * features, others.data() + cuts[s] * features);
    }
    Eigen::MatrixXf into = Eigen::MatrixXf::Constant(features, 1, 0.5f), into_products = into;
    sums.finish(into, values.data());
    products.finish(into_products, values.data(), others.data());
    CHECK(same_bits(into, expected));
    CHECK(same_bits(into_products, expected_products));

    // The same as an AfterSteps' last step, after a map, slices handed in that order.
    SlicesOnly hooks;
    gpt_pass::AfterSteps<float> after(hooks, 0);
    Eigen::MatrixXf doubled, bias_gradient = Eigen::MatrixXf::Constant(features, 1, 0.5f);
    after.map(doubled, [](const float* in, float* out, std::size_t n, std::size_t) {
      for (std::size_t i = 0; i < n; ++i) out[i] = 2 * in[i];
    });
    after.sum_columns(bias_gradient);
    Eigen::MatrixXf made = values;
    after.begin(features, tokens);
    for (std::size_t s = cuts.size() - 1; s-- > 0;) after.slice(made.data() + cuts[s] * features, cuts[s], cuts[s + 1] - cuts[s]);
    after.end(made);
    Eigen::MatrixXf twice = 2 * values, expected_twice = Eigen::MatrixXf::Constant(features, 1, 0.5f);
    gpt_pass::add_column_sum(twice, expected_twice);
    CHECK(same_bits(doubled, twice));
    CHECK(same_bits(bias_gradient, expected_twice));
  }

  // Nothing may follow the sum: it would change what was summed.
  SlicesOnly hooks;
  gpt_pass::AfterSteps<float> after(hooks, 0);
  Eigen::MatrixXf bias_gradient(features, 1);
  after.sum_columns(bias_gradient);
  CHECK_THROWS_AS(after.store("x"), std::logic_error);
}

TEST_CASE("a head's operands, packed once for all their products or made in float32: gemm_block's bits on the blocks") {
  // Attention's products take a head's blocks of qkv and its causal triangles (gpt_pass.hpp's
  // HeadOperand): packed straight from the triangle where the bf16 kernels take them, unpacked
  // into float32 where they do not. A factor of 1/8 keeps bf16 values; 1/sqrt(32) does not, and
  // values that are not bf16 at all (a float32 block) go to float32 too.
  std::mt19937 rng(47);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int context = 40, head = 24, features = 3 * head;
  const auto bf16 = [](float v) { return std::bit_cast<float>(std::bit_cast<std::uint32_t>(v) & 0xFFFF0000u); };
  for (const bool bf16_values : {true, false}) {
    for (const float factor : {0.125f, 0.17677669f}) {
      CAPTURE(bf16_values);
      CAPTURE(factor);
      Eigen::MatrixXf qkv(features, context);
      for (Eigen::Index i = 0; i < qkv.size(); ++i) qkv.data()[i] = bf16_values ? bf16(normal(rng)) : normal(rng);
      std::vector<float> triangle(gpt_pass::triangle(context));
      for (float& v : triangle) v = bf16(normal(rng));
      std::vector<float> unpacked(context * context), made(context * context), scratch(context * context);
      gpt_pass::unpack_triangle(triangle.data(), context, factor, unpacked.data());
      const gpt_pass::HeadBlock<float> keys = gpt_pass::head_rows(qkv, head, 0, head, context);
      std::vector<float> expected(head * context), got(head * context), expected_t(head * context), got_t(head * context);
      gemm_block({keys.data, keys.rows, keys.cols, keys.stride}, false, {unpacked.data(), context, context, context}, false, expected.data());
      gemm_block({keys.data, keys.rows, keys.cols, keys.stride}, false, {unpacked.data(), context, context, context}, true, expected_t.data());
      gpt_pass::HeadOperand<float> k(keys, gpt_pass::head_room(0)), ds(triangle.data(), context, factor, scratch.data(), gpt_pass::head_room(1));
      gpt_pass::head_product(k, false, ds, false, got.data());
      gpt_pass::head_product(k, false, ds, true, got_t.data());  // the same operands again
      CHECK(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)) == 0);
      CHECK(std::memcmp(got_t.data(), expected_t.data(), got.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("a GPT and an MLP train the same bits on one thread and on several") {
  // bf16: products in the bf16 kernels where the processor has them, whose slices are wider on
  // fewer threads (gemm.cpp); fp16: in the float32 library, in slices of 128 columns.
  for (const Precision precision : {Precision::fp16, Precision::bf16}) {
    CAPTURE(precision_name(precision));
    TrainingConfig config = gpt_config(GptShape{2, 64, 4, 32, 256}, precision);
    config.rounding = RoundingMode::stochastic;
    TrainingConfig mlp;
    mlp.precision = precision;
    mlp.layer_sizes = {300, 600, 130, 10};
    mlp.rounding = RoundingMode::stochastic;
    mlp.optimizer.kind = OptimizerKind::adamw;
    mlp.learning_rate = 1e-3f;
    const auto train = [&](int threads) {
      set_gemm_threads(threads);
      GptTrainer gpt(*config.gpt, config);
      MlpTrainer classifier(mlp);
      TrainingData sequences("synthetic", config), clusters("synthetic", mlp);
      Eigen::MatrixXf inputs;
      std::vector<int> labels;
      std::vector<Snapshot> snapshots;
      for (int s = 0; s < 3; ++s) {
        sequences.next_batch(8, inputs, labels);
        snapshots.push_back(*gpt.step(inputs, labels, true).snapshot);
        clusters.next_batch(200, inputs, labels);
        snapshots.push_back(*classifier.step(inputs, labels, true).snapshot);
      }
      set_gemm_threads(1);
      return std::tuple{gpt.parameters(), classifier.state().weights, snapshots, gpt.state().stochastic_counter};
    };
    const auto [gpt1, mlp1, snapshots1, counter1] = train(1);
    const auto [gpt3, mlp3, snapshots3, counter3] = train(3);
    CHECK(same_bits(gpt1, gpt3));
    CHECK(same_bits(mlp1, mlp3));
    CHECK(snapshots1 == snapshots3);
    CHECK(counter1 == counter3);
  }
}

TEST_CASE("an overflowing fp16 GPT step is skipped and leaves the parameters alone") {
  TrainingConfig config = gpt_config(tiny, Precision::fp16);
  config.scaler = LossScalerConfig::fixed(std::ldexp(1.0, 40));  // every scaled gradient overflows fp16
  GptTrainer trainer(tiny, config);
  const std::vector<Eigen::MatrixXf> before = trainer.parameters();
  const TokenBatch b = random_tokens(tiny, 2, 9);
  const StepResult result = trainer.step(b.as_inputs(), b.targets, true);
  CHECK(result.skipped);
  CHECK(same_bits(before, trainer.parameters()));
  CHECK(trainer.state().optimizer.updates == 0);
  CHECK(trainer.scaler_state().skipped_steps == 1);
}

TEST_CASE("a NaN injected into a GPT weight's gradient skips the step, leaves the weights and shows in its record") {
  const std::vector<std::string> weights{"embed.tokens", "h0.attn.qkv", "ln_f"};
  const FaultInjection fault = parse_fault_injection("nan@h0.attn.qkv:1", weights);
  CHECK(fault.tensor == "h0.attn.qkv");
  CHECK(describe(fault) == "nan@h0.attn.qkv:1");
  CHECK_THROWS_AS(parse_fault_injection("nan@h9.attn.qkv:1", weights), std::invalid_argument);
  CHECK_THROWS_AS(parse_fault_injection("nan@fc1:1", weights), std::invalid_argument);
  GptTrainer trainer(tiny, gpt_config(tiny, Precision::fp16));
  CHECK_THROWS_AS(trainer.inject(FaultInjection{FaultInjection::Value::nan, 0, 1, "h0.attn.qkv.bias"}), std::invalid_argument);
  trainer.inject(fault);
  const TokenBatch b = random_tokens(tiny, 2, 3);
  CHECK_FALSE(trainer.step(b.as_inputs(), b.targets, false).skipped);
  const std::vector<Eigen::MatrixXf> before = trainer.parameters();
  const StepResult hit = trainer.step(b.as_inputs(), b.targets, true);
  CHECK(hit.skipped);
  CHECK(same_bits(before, trainer.parameters()));
  for (const TensorRecord& t : hit.snapshot->tensors)
    if (t.kind == TensorKind::weight_gradient) CHECK(t.histogram.nan_count() == (t.name == "h0.attn.qkv" ? 1u : 0u));
  CHECK_FALSE(trainer.step(b.as_inputs(), b.targets, false).skipped);
}

TEST_CASE("GPT steps refuse batches that are not the model's") {
  GptTrainer trainer(tiny, gpt_config(tiny, Precision::fp32));
  TokenBatch b = random_tokens(tiny, 2, 1);
  CHECK_THROWS_AS(trainer.step(b.as_inputs().leftCols(4), b.targets, false), std::invalid_argument);
  std::vector<int> short_targets(b.targets.begin(), b.targets.end() - 1);
  CHECK_THROWS_AS(trainer.step(b.as_inputs(), short_targets, false), std::invalid_argument);
  Eigen::MatrixXf bad = b.as_inputs();
  bad(1, 2) = static_cast<float>(tiny.vocab);
  CHECK_THROWS_AS(trainer.step(bad, b.targets, false), std::invalid_argument);
  bad(1, 2) = 1.5f;
  CHECK_THROWS_AS(trainer.step(bad, b.targets, false), std::invalid_argument);
  b.targets[3] = -1;
  CHECK_THROWS_AS(trainer.step(b.as_inputs(), b.targets, false), std::invalid_argument);
}

namespace {

// A recipe's linear products written again for the test from gemm_recipe's operations: FP8
// operands (x and W cast once in the forward and reused by the backward, the output gradient
// once for both of its products; a scale and history per layer and operand, kept across steps),
// or block-scaled operands along each product's reduction axis -- W x: W's columns, x's rows;
// dy x^T: along the tokens; W^T dy: W's rows, dy's rows. Nothing else rounded (an fp32 run).
struct RecipeHooksForTest final : gpt_pass::Hooks<float> {
  RecipeConfig recipe;
  Context ctx;
  std::map<std::pair<std::string, GemmOperand>, Fp8TensorState> states;
  std::map<std::string, std::pair<Fp8Operand, Fp8Operand>> forward;  // input, weight
  std::vector<OperandScaling> scaling;

  static std::string name_of(int block, const char* name) { return "h" + std::to_string(block) + "." + std::string(name); }
  Fp8Operand fp8(const std::string& name, GemmOperand operand, const Eigen::MatrixXf& x) {
    scaling.emplace_back();
    return quantize_fp8_operand(recipe, operand, x, states[{name, operand}], ctx, scaling.back());
  }
  Eigen::MatrixXf blocks(const Eigen::MatrixXf& x, bool along_first_axis) { return block_scaled_operand(recipe.recipe, x, along_first_axis, ctx); }
  // Weights in square tiles where the recipe says so (the same values along either axis: made
  // again here for the backward, where the trainer keeps the forward's).
  Eigen::MatrixXf weight_blocks(const Eigen::MatrixXf& w, bool along_first_axis) {
    return block_scaled_operand(recipe.recipe, w, along_first_axis, ctx, nullptr, recipe.square_weight_tiles);
  }

  void activation(int, const char*, float*, std::size_t, std::size_t) override {}
  void gradient(int, const char*, float*, std::size_t, std::size_t) override {}
  Eigen::MatrixXf linear_forward(int block, const char* name, const Eigen::MatrixXf& weight, const Eigen::MatrixXf& x) override {
    if (block_scaled(recipe.recipe)) {
      const Eigen::MatrixXf xq = blocks(x, true);
      const Eigen::MatrixXf wq = weight_blocks(weight, false);
      return gemm(wq, false, xq, false);
    }
    auto& [input, w] = forward[name_of(block, name)];
    input = fp8(name_of(block, name), GemmOperand::input, x);
    w = fp8(name_of(block, name), GemmOperand::weight, weight);
    return fp8_product(w.values, false, w.dequantize, input.values, false, input.dequantize);
  }
  Eigen::MatrixXf linear_backward(int block, const char* name, const Eigen::MatrixXf& weight, const Eigen::MatrixXf& x, const Eigen::MatrixXf& dy,
                                  Eigen::MatrixXf& weight_gradient) override {
    if (block_scaled(recipe.recipe)) {
      // The weight gradient's operands turned first where the recipe says so (signs from the seed).
      const auto turned = [&](const Eigen::MatrixXf& m) {
        return recipe.hadamard_weight_gradients ? random_hadamard(m, false, hadamard_signs(ctx.stochastic_seed)) : m;
      };
      const Eigen::MatrixXf dyq = blocks(turned(dy), false);
      const Eigen::MatrixXf xq = blocks(turned(x), false);
      weight_gradient = gemm(dyq, false, xq, true);
      const Eigen::MatrixXf dyq_down = blocks(dy, true);
      const Eigen::MatrixXf wq = weight_blocks(weight, true);
      return gemm(wq, true, dyq_down, false);
    }
    const auto& [input, w] = forward.at(name_of(block, name));
    const Fp8Operand g = fp8(name_of(block, name), GemmOperand::output_gradient, dy);
    weight_gradient = fp8_product(g.values, false, g.dequantize, input.values, true, input.dequantize);
    return fp8_product(w.values, true, w.dequantize, g.values, false, g.dequantize);
  }
};

}  // namespace

TEST_CASE("a GPT under a recipe: each linear layer's products see the recipe's operands, forward and backward") {
  // (recipe, weights in square tiles, the weight gradient's operands through the Hadamard transform)
  const std::tuple<GemmRecipe, bool, bool> recipes[] = {{GemmRecipe::fp8_delayed, false, false}, {GemmRecipe::fp8_current, false, false},
                                                        {GemmRecipe::mxfp8, false, false},       {GemmRecipe::mxfp4, false, false},
                                                        {GemmRecipe::nvfp4, false, false},       {GemmRecipe::nvfp4, true, false},
                                                        {GemmRecipe::nvfp4, true, true},         {GemmRecipe::mxfp8, false, true}};
  for (const auto& [recipe, tiles, hadamard] : recipes) {
    CAPTURE(gemm_recipe_name(recipe));
    CAPTURE(tiles);
    CAPTURE(hadamard);
    TrainingConfig config = gpt_config(tiny, Precision::fp32);
    config.optimizer.kind = OptimizerKind::sgd;
    config.learning_rate = 0.5f;
    config.recipe.recipe = recipe;
    config.recipe.square_weight_tiles = tiles;
    config.recipe.hadamard_weight_gradients = hadamard;
    config.seed = 5;
    config.recipe.amax_history = 2;
    GptTrainer trainer(tiny, config);
    std::vector<Eigen::MatrixXf> expected = trainer.parameters();
    RecipeHooksForTest hooks;
    hooks.recipe = config.recipe;
    hooks.ctx.stochastic_seed = config.seed;
    for (int s = 0; s < 3; ++s) {
      // 4 sequences of 5: 20 tokens, one whole run of 16 for the Hadamard transform and a short one.
      const TokenBatch b = random_tokens(tiny, 4, 60 + static_cast<unsigned>(s));
      const StepResult result = trainer.step(b.as_inputs(), b.targets, s == 2);
      const Eigen::MatrixXi row_major = b.tokens.transpose();  // the pass reads ids row by row
      const std::vector<int> ids(row_major.data(), row_major.data() + row_major.size());
      hooks.scaling.clear();
      std::vector<Eigen::MatrixXf> gradients;
      const float factor = 1.0f / static_cast<float>(b.targets.size());
      const double loss = gpt_pass::run<float>(tiny, expected, ids.data(), b.targets.data(), 4, factor, hooks, &gradients);
      CHECK(std::bit_cast<std::uint64_t>(result.loss) == std::bit_cast<std::uint64_t>(loss));
      for (std::size_t p = 0; p < expected.size(); ++p)
        for (Eigen::Index i = 0; i < expected[p].size(); ++i)
          expected[p].data()[i] = sgd_update_element(expected[p].data()[i], gradients[p].data()[i], sgd_step_factor(config.learning_rate, 1.0f));
      CHECK(same_bits(trainer.parameters(), expected));
      if (per_tensor_fp8(recipe)) {
        // Every block's four linear layers, three operands each, in the pass's order.
        REQUIRE(result.scaling.size() == hooks.scaling.size());
        CHECK(result.scaling.size() == 2u * 4u * 3u);
        for (std::size_t i = 0; i < hooks.scaling.size(); ++i) {
          CHECK(result.scaling[i].operand == hooks.scaling[i].operand);
          CHECK(result.scaling[i].scale == hooks.scaling[i].scale);
          CHECK(result.scaling[i].amax == hooks.scaling[i].amax);
          CHECK(result.scaling[i].flushed_to_zero == hooks.scaling[i].flushed_to_zero);
        }
        CHECK(result.scaling.front().name == "h0.attn.qkv");
        CHECK(result.scaling.back().name == "h0.attn.qkv");  // the backward ends at the first layer
        if (s == 2) CHECK(result.snapshot->scaling == result.scaling);
      } else {
        CHECK(result.block_operands.size() == 2u * 4u * 3u);
        for (const BlockOperandStatistics& o : result.block_operands) {
          // The input and the output gradient feed two products each, the weight two: every element
          // twice, but for weights in square tiles, quantized once for both.
          const bool qkv = o.name.ends_with("attn.qkv"), fc = o.name.ends_with("mlp.fc"), mlp_proj = o.name.ends_with("mlp.proj");
          const std::uint64_t in = mlp_proj ? 32 : 8, out = qkv ? 24 : fc ? 32 : 8, tokens = 20;
          const std::uint64_t elements = o.operand == GemmOperand::input ? in * tokens : o.operand == GemmOperand::weight ? in * out : out * tokens;
          CHECK(o.statistics.elements == (tiles && o.operand == GemmOperand::weight ? 1 : 2) * elements);
        }
        // A recorded step's snapshot carries them, in the recipe's format and rule.
        if (s == 2) {
          REQUIRE(result.snapshot->block_operands.size() == result.block_operands.size());
          for (std::size_t i = 0; i < result.block_operands.size(); ++i) {
            const OperandBlocks& r = result.snapshot->block_operands[i];
            CHECK(r.name == result.block_operands[i].name);
            CHECK(r.operand == gemm_operand_name(result.block_operands[i].operand));
            CHECK(r.blocks.format == block_format_of(recipe));
            CHECK(r.blocks.statistics == result.block_operands[i].statistics);
          }
        } else {
          CHECK_FALSE(result.snapshot);
        }
      }
    }
    // A plain run from the same start takes another path.
    GptTrainer plain(tiny, gpt_config(tiny, Precision::fp32));
    GptTrainer fresh(tiny, config);
    const TokenBatch b = random_tokens(tiny, 2, 60);
    CHECK(plain.step(b.as_inputs(), b.targets, false).loss != fresh.step(b.as_inputs(), b.targets, false).loss);
  }
}

TEST_CASE("a GPT's recipe gradient rounding: the same forward at the first step, other updates, and the run's own stream") {
  for (const GemmRecipe recipe : {GemmRecipe::nvfp4, GemmRecipe::fp8_delayed}) {
    CAPTURE(gemm_recipe_name(recipe));
    const auto run = [&](RoundingMode rounding, std::optional<RoundingMode> gradients) {
      TrainingConfig config = gpt_config(tiny, Precision::bf16);
      config.rounding = rounding;
      config.recipe.recipe = recipe;
      config.recipe.gradient_rounding = gradients;
      GptTrainer trainer(tiny, config);
      std::vector<double> losses;
      for (int s = 0; s < 3; ++s) {
        const TokenBatch b = random_tokens(tiny, 2, 90 + static_cast<unsigned>(s));
        losses.push_back(trainer.step(b.as_inputs(), b.targets, false).loss);
      }
      return std::make_pair(trainer.parameters(), losses);
    };
    const auto nearest = run(RoundingMode::nearest_even, std::nullopt);
    const auto stochastic = run(RoundingMode::nearest_even, RoundingMode::stochastic);
    CHECK(std::bit_cast<std::uint64_t>(nearest.second[0]) == std::bit_cast<std::uint64_t>(stochastic.second[0]));
    CHECK_FALSE(same_bits(nearest.first, stochastic.first));
    CHECK(same_bits(run(RoundingMode::nearest_even, RoundingMode::nearest_even).first, nearest.first));
    CHECK(same_bits(run(RoundingMode::stochastic, RoundingMode::stochastic).first, run(RoundingMode::stochastic, std::nullopt).first));
  }
}

TEST_CASE("a GPT's FP8 scales and histories are part of its state: a restored delayed-scaling run goes on with the same bits") {
  TrainingConfig config = gpt_config(tiny, Precision::bf16);
  config.recipe.recipe = GemmRecipe::fp8_delayed;
  config.recipe.amax_history = 3;
  config.rounding = RoundingMode::stochastic;
  GptTrainer straight(tiny, config);
  for (int s = 0; s < 3; ++s) {
    const TokenBatch b = random_tokens(tiny, 2, 80 + static_cast<unsigned>(s));
    straight.step(b.as_inputs(), b.targets, false);
  }
  const TrainerState saved = straight.state();
  CHECK(saved.fp8.size() == gpt_recipe_slots(tiny));
  CHECK(saved.fp8[gpt_recipe_slot(1, "mlp.fc", GemmOperand::output_gradient)].amax_history.size() == 3);
  GptTrainer resumed(tiny, config);
  resumed.restore(saved);
  for (int s = 0; s < 2; ++s) {
    const TokenBatch b = random_tokens(tiny, 2, 90 + static_cast<unsigned>(s));
    straight.step(b.as_inputs(), b.targets, false);
    resumed.step(b.as_inputs(), b.targets, false);
  }
  CHECK(same_bits(resumed.parameters(), straight.parameters()));
  CHECK(resumed.state().fp8 == straight.state().fp8);
  GptTrainer unscaled(tiny, gpt_config(tiny, Precision::bf16));
  CHECK_THROWS_AS(unscaled.restore(saved), std::invalid_argument);
  CHECK_THROWS_AS(gpt_recipe_slot(0, "attn.scores", GemmOperand::input), std::invalid_argument);
}

TEST_CASE("the synthetic sequences repeat a motif, shift targets by one and follow the seed") {
  SyntheticSequences a(32, 256, 5), b(32, 256, 5);
  Eigen::MatrixXf inputs, other;
  std::vector<int> targets, other_targets;
  a.next_batch(6, inputs, targets);
  b.next_batch(6, other, other_targets);
  CHECK(inputs == other);
  CHECK(targets == other_targets);
  for (int row = 0; row < 6; ++row) {
    for (int t = 0; t + 1 < 32; ++t) CHECK(targets[static_cast<std::size_t>(row * 32 + t)] == static_cast<int>(inputs(row, t + 1)));
    // Some period from 3 to 8 repeats the whole sequence.
    bool periodic = false;
    for (int period = 3; period <= 8 && !periodic; ++period) {
      periodic = true;
      for (int t = period; t < 32; ++t) periodic = periodic && inputs(row, t) == inputs(row, t - period);
    }
    CHECK(periodic);
    for (int t = 0; t < 32; ++t) CHECK(inputs(row, t) < 64);
  }
  const std::string state = a.save_state();
  a.next_batch(2, inputs, targets);
  b.restore_state(state);
  b.next_batch(2, other, other_targets);
  CHECK(inputs == other);
}

TEST_CASE("text data: windows of the file's bytes, and one sentence for a file that does not fit") {
  const auto folder = std::filesystem::temp_directory_path() / "fpscope-test-text";
  std::filesystem::create_directories(folder);
  const auto path = folder / "corpus.txt";
  { std::ofstream(path, std::ios::binary) << "the quick brown fox jumps over the lazy dog"; }
  TextSequences text(path, 8, 256, 3);
  Eigen::MatrixXf inputs;
  std::vector<int> targets;
  text.next_batch(4, inputs, targets);
  const std::string corpus = "the quick brown fox jumps over the lazy dog";
  for (int row = 0; row < 4; ++row) {
    std::string window;
    for (int t = 0; t < 8; ++t) window += static_cast<char>(inputs(row, t));
    window += static_cast<char>(targets[static_cast<std::size_t>(row * 8 + 7)]);
    CHECK(corpus.find(window) != std::string::npos);
  }
  CHECK_THROWS_AS(TextSequences(path, 100, 256, 3), std::invalid_argument);     // too short
  CHECK_THROWS_AS(TextSequences(path, 8, 100, 3), std::invalid_argument);       // 'y' is 121
  CHECK_THROWS_AS(TextSequences(folder / "missing", 8, 256, 3), std::invalid_argument);
  TrainingConfig mlp;
  CHECK_THROWS_AS(TrainingData("text:" + path.string(), mlp), std::invalid_argument);
  TrainingConfig gpt = gpt_config(GptShape{1, 8, 2, 8, 256}, Precision::fp32);
  CHECK_THROWS_AS(TrainingData("mnist:" + folder.string(), gpt), std::invalid_argument);
  TrainingData data("text:" + path.string(), gpt);
  CHECK(data.files() == std::vector<std::filesystem::path>{path});
  std::filesystem::remove_all(folder);
}

TEST_CASE("a small GPT learns the synthetic sequences in fp16 with dynamic loss scaling") {
  const GptShape shape{1, 32, 2, 16, 64};
  TrainingConfig config = gpt_config(shape, Precision::fp16);
  config.learning_rate = 3e-3f;
  GptTrainer trainer(shape, config);
  TrainingData data("synthetic", config);
  Eigen::MatrixXf inputs;
  std::vector<int> targets;
  double first = 0, last = 0;
  for (int s = 0; s < 150; ++s) {
    data.next_batch(16, inputs, targets);
    const double loss = trainer.step(inputs, targets, false).loss;
    if (s == 0) first = loss;
    last = loss;
  }
  CAPTURE(first);
  CAPTURE(last);
  CHECK(first == doctest::Approx(std::log(64.0)).epsilon(0.05));  // about uniform at the start
  CHECK(last < 0.5 * first);
}
