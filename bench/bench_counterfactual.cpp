// The counterfactual step (what the app's loss-scale preview asks for) beside the recorded step
// it re-runs, in the same run: the example (the app's first run: 32-64-64-64-10 tanh, fp16, batch
// 256) and a 4 x 256 GPT (context 128, batch 8, fp16), on the CPU backend. A counterfactual is a
// recorded step plus a copy of the trainer's state and its restore.
#include <benchmark/benchmark.h>

#include <string>

#include "fpscope/gpu/training_session.hpp"
#include "fpscope/gpu/training_settings.hpp"

namespace {

fpscope::PreparedRun prepared(const std::string& model) {
  fpscope::TrainingOptions options;  // the example's settings
  options.model = model;
  options.backend = "cpu";
  if (model.rfind("gpt", 0) == 0) options.batch = "8";
  return fpscope::prepare_training(fpscope::parse_training_options(options));
}

void recorded_steps(benchmark::State& state, const std::string& model) {
  fpscope::PreparedRun run = prepared(model);
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  run.data->next_batch(run.settings.batch, inputs, labels);
  for (auto _ : state) benchmark::DoNotOptimize(run.trainer->step(inputs, labels, true, true));
}

void counterfactuals(benchmark::State& state, const std::string& model) {
  fpscope::PreparedRun run = prepared(model);
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  run.data->next_batch(run.settings.batch, inputs, labels);
  double scale = 1;
  for (auto _ : state) {
    benchmark::DoNotOptimize(fpscope::counterfactual_step(*run.trainer, run.settings.config.scaler, inputs, labels, scale));
    scale = scale < 0x1p40 ? scale * 2 : 1;  // a drag: another scale each time
  }
}

void BM_example_recorded_step(benchmark::State& state) { recorded_steps(state, "32-64-64-64-10"); }
void BM_example_counterfactual(benchmark::State& state) { counterfactuals(state, "32-64-64-64-10"); }
void BM_gpt_4x256_recorded_step(benchmark::State& state) { recorded_steps(state, "gpt:layers=4,width=256,heads=4,context=128"); }
void BM_gpt_4x256_counterfactual(benchmark::State& state) { counterfactuals(state, "gpt:layers=4,width=256,heads=4,context=128"); }

}  // namespace

BENCHMARK(BM_example_recorded_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_example_counterfactual)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_gpt_4x256_recorded_step)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_gpt_4x256_counterfactual)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
