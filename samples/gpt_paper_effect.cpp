// The paper's effect on a transformer (Micikevicius et al. 2018, on the engine's GPT): a loss term
// weighted by 2^-10 trains in fp32 as it would unweighted (AdamW divides the weight out), but in
// fp16 without loss scaling its activation gradients fall below fp16's smallest subnormal, 2^-24,
// and flush to zero: attention, LayerNorm and MLP gradients alike. Dynamic loss scaling (GradScaler's
// rule) lifts them back, and bf16's range never loses them.
//
// The same GPT, data and seed trained four ways; the table gives the loss on fresh sequences (in
// float64 from the final weights), and for the activation gradients over the whole run the share
// of nonzero values the cast flushed to zero, from the engine's exact cast counts; then, for the
// fp16 run without scaling, the tensors that flushed the most.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/sequence_data.hpp"

using namespace fpscope;

namespace {

const GptShape shape{2, 64, 4, 32, 256};

struct Outcome {
  double loss = 0;
  double flushed_share = 0;
  std::int64_t skipped = 0;
  double final_scale = 1;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> per_tensor;  // name: flushed, nonzero
};

Outcome train(Precision precision, const LossScalerConfig& scaler, int steps) {
  TrainingConfig config;
  config.gpt = shape;
  config.precision = precision;
  config.scaler = scaler;
  config.optimizer.kind = OptimizerKind::adamw;
  config.learning_rate = 3e-3f;
  config.loss_weight = 1.0f / 1024;  // a loss term weighted by 2^-10
  config.seed = 7;
  GptTrainer trainer(shape, config);
  SyntheticSequences data(shape.context, shape.vocab, 7);
  Eigen::MatrixXf inputs;
  std::vector<int> targets;
  Outcome o;
  std::uint64_t nonzero = 0, flushed = 0;
  for (int step = 0; step < steps; ++step) {
    data.next_batch(16, inputs, targets);
    const StepResult result = trainer.step(inputs, targets, true);
    for (const TensorRecord& t : result.snapshot->tensors) {
      if (t.kind != TensorKind::activation_gradient) continue;
      const std::uint64_t f = t.cast ? t.cast->flushed_to_zero : 0;
      nonzero += t.histogram.finite_nonzero_count();
      flushed += f;
      auto& [tensor_flushed, tensor_nonzero] = o.per_tensor[t.name];
      tensor_flushed += f;
      tensor_nonzero += t.histogram.finite_nonzero_count();
    }
  }
  data.next_batch(64, inputs, targets);
  std::vector<Eigen::MatrixXd> weights;
  for (const Eigen::MatrixXf& p : trainer.parameters()) weights.push_back(p.cast<double>());
  o.loss = gpt_loss_in_double(shape, weights, inputs.cast<int>(), targets);
  o.flushed_share = nonzero == 0 ? 0 : 100.0 * static_cast<double>(flushed) / static_cast<double>(nonzero);
  o.skipped = trainer.scaler_state().skipped_steps;
  o.final_scale = trainer.scaler_state().scale;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::stoi(argv[1]) : 300;
  struct Run {
    const char* name;
    Precision precision;
    LossScalerConfig scaler;
  };
  const Run runs[] = {{"fp32", Precision::fp32, LossScalerConfig::none()},
                      {"fp16, no loss scaling", Precision::fp16, LossScalerConfig::none()},
                      {"fp16, dynamic (GradScaler)", Precision::fp16, LossScalerConfig::pytorch()},
                      {"bf16, no loss scaling", Precision::bf16, LossScalerConfig::none()}};
  std::printf("%d steps of %s on the synthetic sequences, batch 16, AdamW lr 3e-3, loss weight 2^-10;\n"
              "loss: on 64 fresh sequences; %% flushed: of the nonzero activation gradients over the run\n\n",
              steps, gpt_shape_name(shape).c_str());
  std::printf("%-28s %12s %12s %10s %12s\n", "run", "loss", "% flushed", "skipped", "final scale");
  Outcome unscaled;
  for (const Run& run : runs) {
    const Outcome o = train(run.precision, run.scaler, steps);
    std::printf("%-28s %12.5f %11.2f%% %10lld %12g\n", run.name, o.loss, o.flushed_share, static_cast<long long>(o.skipped), o.final_scale);
    std::fflush(stdout);
    if (run.precision == Precision::fp16 && run.scaler.kind == LossScalerConfig::Kind::none) unscaled = o;
  }
  std::vector<std::pair<double, std::string>> worst;
  for (const auto& [name, counts] : unscaled.per_tensor)
    if (counts.second > 0) worst.emplace_back(100.0 * static_cast<double>(counts.first) / static_cast<double>(counts.second), name);
  std::sort(worst.rbegin(), worst.rend());
  std::printf("\nfp16 without loss scaling, the activation gradients that flushed the most:\n");
  for (std::size_t i = 0; i < std::min<std::size_t>(6, worst.size()); ++i) std::printf("  %-24s %6.2f%% flushed\n", worst[i].second.c_str(), worst[i].first);
  return 0;
}
