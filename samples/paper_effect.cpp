// Micikevicius et al. 2018 in one command: where activation gradients are small, fp16 without
// loss scaling flushes them to zero; loss scaling brings them back.

//
// The same MLP, data and seed are trained five ways; the table reports, for the activation
// gradients, the share of nonzero values the fp16 (or bf16) cast flushed to zero and the share it
// overflowed, from the engine's exact cast counts over the whole run.
//
// Why the gradients are small here: the loss term carries a weight of 2^-10 (as one term of a
// multi-task loss often does; the learning rate is raised by 2^10 so that fp32 trains exactly as
// without it), the loss is a mean over a batch of 4096 (each sample's gradient is divided by
// 2^12), the classes are well separated so the model soon fits and the softmax errors p - y
// shrink, and every tanh layer the backward signal crosses scales it down further. Together
// they put most activation gradients below fp16's smallest subnormal, 2^-24.
#include <cstdio>
#include <string>
#include <vector>

#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/synthetic_data.hpp"

using namespace fpscope;

namespace {

struct Outcome {
  double final_loss = 0;
  double flushed_share = 0, overflow_share = 0;
  std::int64_t skipped = 0;
  double final_scale = 1;
};

Outcome train(Precision precision, const LossScalerConfig& scaler, int steps) {
  TrainingConfig config;
  config.layer_sizes = {32, 64, 64, 64, 10};
  config.activation = Activation::tanh;
  config.precision = precision;
  config.scaler = scaler;
  config.loss_weight = 1.0f / 1024;      // a loss term weighted by 2^-10 ...
  config.learning_rate = 1024.0f;         // ... with the learning rate raised to match: fp32 trains as with weight 1
  config.seed = 7;
  MlpTrainer trainer(config);
  SyntheticClassification data(32, 10, 7, 0.6f);
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  std::uint64_t nonzero = 0, flushed = 0, overflowed = 0;
  double loss = 0;
  for (int step = 0; step < steps; ++step) {
    data.next_batch(4096, inputs, labels);
    const StepResult result = trainer.step(inputs, labels, true);
    loss = result.loss;
    for (const TensorRecord& t : result.snapshot->tensors) {
      if (t.kind != TensorKind::activation_gradient) continue;
      nonzero += t.histogram.finite_nonzero_count();
      if (t.cast) {
        flushed += t.cast->flushed_to_zero;
        overflowed += t.cast->overflowed;
      }
    }
  }
  // The final loss on fresh data, in float64, so every run is measured the same way.
  data.next_batch(8192, inputs, labels);
  Outcome o;
  o.final_loss = trainer.loss_in_double(inputs, labels);
  o.flushed_share = nonzero == 0 ? 0 : 100.0 * static_cast<double>(flushed) / static_cast<double>(nonzero);
  o.overflow_share = nonzero == 0 ? 0 : 100.0 * static_cast<double>(overflowed) / static_cast<double>(nonzero);
  o.skipped = trainer.scaler().state().skipped_steps;
  o.final_scale = trainer.scaler().scale();
  (void)loss;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::stoi(argv[1]) : 150;
  struct Run {
    const char* name;
    Precision precision;
    LossScalerConfig scaler;
  };
  const Run runs[] = {{"fp32", Precision::fp32, LossScalerConfig::none()},
                      {"fp16, no loss scaling", Precision::fp16, LossScalerConfig::none()},
                      {"fp16, static 2^10", Precision::fp16, LossScalerConfig::fixed(1024)},
                      {"fp16, dynamic (GradScaler)", Precision::fp16, LossScalerConfig::pytorch()},
                      {"bf16, no loss scaling", Precision::bf16, LossScalerConfig::none()}};
  std::printf("%d steps of a 32-64-64-64-10 tanh MLP on well-separated clusters, batch 4096, loss weight 2^-10, SGD;\n"
              "%% flushed and %% overflow: of the nonzero activation gradients over the run\n\n", steps);
  std::printf("%-28s %12s %12s %12s %10s %12s\n", "run", "final loss", "% flushed", "% overflow", "skipped", "final scale");
  for (const Run& run : runs) {
    const Outcome o = train(run.precision, run.scaler, steps);
    std::printf("%-28s %12.5f %11.2f%% %11.2f%% %10lld %12g\n", run.name, o.final_loss, o.flushed_share, o.overflow_share,
                static_cast<long long>(o.skipped), o.final_scale);
    std::fflush(stdout);
  }
  return 0;
}
