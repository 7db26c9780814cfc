// FP8 and block-scaled training recipes side by side: the same MLP, data and seed trained in fp32,
// bf16, and bf16 with its matrix products fed FP8 operands with no scale, and under delayed and
// current per-tensor scaling (as NVIDIA Transformer Engine does), MXFP8 and MXFP4 operands (OCP MX blocks of 32
// along each product's reduction axis) and NVFP4 operands (gemm_recipe.hpp says exactly how); then
// the same for a small GPT (the four linear layers of each block take the recipe's operands).
//
// The setup is sample_paper_effect's: a loss term weighted by 2^-10, a mean over 4096 samples and
// tanh layers put the gradients far below 1, where a format without a scale fits nothing: E5M2's
// smallest subnormal is 2^-16 (the fp8-unscaled row flushes all of them). The GPT's is
// sample_gpt_paper_effect's: a loss weighted by 2^-10 under AdamW (which the weight does not slow),
// its gradients as small. What each recipe makes of them is in the tables: the final loss, and per
// operand kind the share of its nonzero elements the recipe's casts flushed to zero over the whole
// run (exact counts from the engine: the FP8 casts' for the per-tensor recipes, block_quantize's for
// the block-scaled ones, the bf16 casts' for bf16, whose inputs are not recorded: "-").
#include <cstdio>
#include <string>
#include <vector>

#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/sequence_data.hpp"
#include "fpscope/gpu/synthetic_data.hpp"

using namespace fpscope;

namespace {

struct Flushes {
  std::uint64_t flushed = 0, nonzero = 0;
  void add(std::uint64_t f, std::uint64_t n) {
    flushed += f;
    nonzero += n;
  }
  std::string share() const {
    if (nonzero == 0) return "-";
    char text[32];
    std::snprintf(text, sizeof text, "%.2f%%", 100.0 * static_cast<double>(flushed) / static_cast<double>(nonzero));
    return text;
  }
};

struct Outcome {
  double final_loss = 0;
  Flushes input, weight, output_gradient;
  std::int64_t skipped = 0;
};

// What one step's recipe and casts flushed, added to the run's shares.
void count_flushes(const StepResult& result, Precision precision, Outcome& o) {
  for (const OperandScaling& s : result.scaling) {
    Flushes& f = s.operand == "input" ? o.input : s.operand == "weight" ? o.weight : o.output_gradient;
    f.add(s.flushed_to_zero, s.elements - s.zeros);
  }
  for (const BlockOperandStatistics& b : result.block_operands) {
    Flushes& f = b.operand == GemmOperand::input ? o.input : b.operand == GemmOperand::weight ? o.weight : o.output_gradient;
    f.add(b.statistics.flushed_to_zero, b.statistics.elements - b.statistics.zeros);
  }
  if (result.snapshot && precision != Precision::fp32)
    for (const TensorRecord& t : result.snapshot->tensors) {
      if (!t.cast) continue;
      if (t.kind == TensorKind::weight) o.weight.add(t.cast->flushed_to_zero, t.histogram.finite_nonzero_count());
      if (t.kind == TensorKind::activation_gradient) o.output_gradient.add(t.cast->flushed_to_zero, t.histogram.finite_nonzero_count());
    }
}

Outcome train(Precision precision, const RecipeConfig& recipe, int steps) {
  TrainingConfig config;
  config.layer_sizes = {32, 64, 64, 64, 10};
  config.activation = Activation::tanh;
  config.precision = precision;
  config.scaler = LossScalerConfig::none();
  config.loss_weight = 1.0f / 1024;
  config.learning_rate = 1024.0f;
  config.seed = 7;
  config.recipe = recipe;
  MlpTrainer trainer(config);
  SyntheticClassification data(32, 10, 7, 0.6f);
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  Outcome o;
  for (int step = 0; step < steps; ++step) {
    data.next_batch(4096, inputs, labels);
    count_flushes(trainer.step(inputs, labels, recipe.recipe == GemmRecipe::none), precision, o);
  }
  data.next_batch(8192, inputs, labels);
  o.final_loss = trainer.loss_in_double(inputs, labels);
  o.skipped = trainer.scaler().state().skipped_steps;
  return o;
}

const GptShape gpt_shape{2, 64, 4, 32, 256};

Outcome train_gpt(Precision precision, const RecipeConfig& recipe, int steps) {
  TrainingConfig config;
  config.gpt = gpt_shape;
  config.precision = precision;
  config.scaler = LossScalerConfig::none();
  config.optimizer.kind = OptimizerKind::adamw;
  config.learning_rate = 3e-3f;
  config.loss_weight = 1.0f / 1024;
  config.seed = 7;
  config.recipe = recipe;
  GptTrainer trainer(gpt_shape, config);
  SyntheticSequences data(gpt_shape.context, gpt_shape.vocab, 7);
  Eigen::MatrixXf inputs;
  std::vector<int> targets;
  Outcome o;
  for (int step = 0; step < steps; ++step) {
    data.next_batch(16, inputs, targets);
    count_flushes(trainer.step(inputs, targets, recipe.recipe == GemmRecipe::none), precision, o);
  }
  data.next_batch(64, inputs, targets);
  std::vector<Eigen::MatrixXd> weights;
  for (const Eigen::MatrixXf& p : trainer.parameters()) weights.push_back(p.cast<double>());
  o.final_loss = gpt_loss_in_double(gpt_shape, weights, inputs.cast<int>(), targets);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::stoi(argv[1]) : 150;
  const int gpt_steps = argc > 2 ? std::stoi(argv[2]) : 200;
  struct Run {
    const char* name;
    Precision precision;
    RecipeConfig recipe;
  };
  // NVIDIA's NVFP4 pretraining recipe (arXiv 2509.25149): weights in 16 x 16 tiles, output
  // gradients rounded stochastically, the weight gradient's operands through the random Hadamard
  // transform (fpscope train --weight-blocks 2d --gradient-round stochastic --hadamard).
  RecipeConfig nvidia_nvfp4{GemmRecipe::nvfp4};
  nvidia_nvfp4.square_weight_tiles = true;
  nvidia_nvfp4.gradient_rounding = RoundingMode::stochastic;
  nvidia_nvfp4.hadamard_weight_gradients = true;
  const Run runs[] = {{"fp32", Precision::fp32, {GemmRecipe::none}},
                      {"bf16", Precision::bf16, {GemmRecipe::none}},
                      {"bf16 + fp8-unscaled", Precision::bf16, {GemmRecipe::fp8_unscaled}},
                      {"bf16 + fp8-delayed", Precision::bf16, {GemmRecipe::fp8_delayed}},
                      {"bf16 + fp8-current", Precision::bf16, {GemmRecipe::fp8_current}},
                      {"bf16 + mxfp8", Precision::bf16, {GemmRecipe::mxfp8}},
                      {"bf16 + mxfp4", Precision::bf16, {GemmRecipe::mxfp4}},
                      {"bf16 + nvfp4", Precision::bf16, {GemmRecipe::nvfp4}},
                      {"bf16 + nvfp4, NVIDIA's", Precision::bf16, nvidia_nvfp4}};
  std::printf("%d steps of a 32-64-64-64-10 tanh MLP on well-separated clusters, batch 4096, loss weight 2^-10, SGD, seed 7;\n"
              "FP8: hybrid (E4M3 inputs and weights, E5M2 output gradients), delayed history 16, margin 0;\n"
              "%% flushed: of each GEMM operand kind's nonzero elements over the run\n\n",
              steps);
  const auto table = [&](Outcome (*train_run)(Precision, const RecipeConfig&, int), int run_steps, const char* prefix) {
    std::printf("%-22s %12s %12s %12s %14s\n", "run", "final loss", "inputs", "weights", "out. gradients");
    for (const Run& run : runs) {
      const Outcome o = train_run(run.precision, run.recipe, run_steps);
      std::printf("%s%-22s %12.5f %12s %12s %14s\n", prefix, run.name, o.final_loss, o.input.share().c_str(), o.weight.share().c_str(),
                  o.output_gradient.share().c_str());
      std::fflush(stdout);
    }
  };
  table(train, steps, "");
  std::printf("\n%d steps of a GPT (2 layers, 64 wide, 4 heads, context 32, vocab 256) on the synthetic sequences, batch 16,\n"
              "loss weight 2^-10, AdamW lr 3e-3, seed 7; final loss: a fresh batch of 64 in float64; rows marked gpt\n\n",
              gpt_steps);
  table(train_gpt, gpt_steps, "gpt ");
  return 0;
}
