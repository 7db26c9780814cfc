// One training step of the CPU backend, timed for bench_train_torch.py (which puts PyTorch's step
// for the same model beside it): the median of --steps steps after two of warm-up, for each of
// fp32, mixed fp16, mixed bf16 (and the share of its products that ran in bf16 kernels), mixed fp16
// recording every tensor every step; and mixed fp16 recording every 10th step beside the same
// unrecorded, both as means (fp16_mean). Prints one line per configuration: "NAME MILLISECONDS".
//
// Usage: bench_train_step MODEL BATCH THREADS STEPS   (MODEL: layer sizes or gpt:...)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/training_data.hpp"

using namespace fpscope;

namespace {

double median_step_ms(const std::string& model, int batch, int steps, Precision precision, int record_every) {
  MlpConfig config;
  if (names_gpt(model)) {
    config.gpt = parse_gpt_shape(model);
    config.optimizer.kind = OptimizerKind::adamw;
    config.learning_rate = 1e-3f;
  } else {
    config.layer_sizes = parse_layer_sizes(model);
    config.activation = Activation::relu;
    config.learning_rate = 0.01f;
  }
  config.precision = precision;
  config.scaler = precision == Precision::fp16 ? LossScalerConfig::pytorch() : LossScalerConfig::none();
  std::unique_ptr<TrainerBackend> trainer;
  if (config.gpt) trainer = std::make_unique<GptTrainer>(*config.gpt, config);
  else trainer = std::make_unique<MlpTrainer>(config);
  TrainingData data("synthetic", config);
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  data.next_batch(batch, inputs, labels);
  std::vector<double> times;
  for (int step = 0; step < steps + 2; ++step) {
    const auto start = std::chrono::steady_clock::now();
    const StepResult result = trainer->step(inputs, labels, record_every > 0 && (step - 2) % record_every == 0, true);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (step >= 2) times.push_back(ms);
    if (result.loss != result.loss) std::fprintf(stderr, "bench_train_step: the loss went NaN\n");
  }
  if (record_every < 0 || record_every > 1) {  // a mean: one step in record_every carries the recording
    double sum = 0;
    for (double t : times) sum += t;
    return sum / static_cast<double>(times.size());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Recording every 10th step beside not recording, both as means over the same number of steps (a
// multiple of 10), in turns, three times: the medians of the two means.
std::pair<double, double> every_tenth_and_unrecorded_ms(const std::string& model, int batch, int steps) {
  const int rounded = std::max(10, steps / 10 * 10);
  std::vector<double> tenth, none;
  for (int turn = 0; turn < 3; ++turn) {
    tenth.push_back(median_step_ms(model, batch, rounded, Precision::fp16, 10));
    none.push_back(median_step_ms(model, batch, rounded, Precision::fp16, -1));
  }
  std::sort(tenth.begin(), tenth.end());
  std::sort(none.begin(), none.end());
  return {tenth[1], none[1]};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: bench_train_step MODEL BATCH THREADS STEPS [PRECISION]\n");
    return 2;
  }
  const std::string model = argv[1];
  const int batch = std::atoi(argv[2]), threads = std::atoi(argv[3]), steps = std::atoi(argv[4]);
  set_gemm_threads(threads);
  if (argc == 6) {  // one precision's unrecorded step alone (for profiling)
    std::printf("%s %.3f\n", argv[5], median_step_ms(model, batch, steps, parse_precision(argv[5]), 0));
    return 0;
  }
  std::printf("fp32 %.3f\n", median_step_ms(model, batch, steps, Precision::fp32, 0));
  std::printf("fp16 %.3f\n", median_step_ms(model, batch, steps, Precision::fp16, 0));
  const GemmCounts before_bf16 = gemm_counts();
  std::printf("bf16 %.3f\n", median_step_ms(model, batch, steps, Precision::bf16, 0));
  const GemmCounts after_bf16 = gemm_counts();
  // How many of the bf16 run's products went to the bf16 kernels (gemm.hpp), as a share.
  const double bf16_calls = static_cast<double>(after_bf16.bf16 - before_bf16.bf16);
  std::printf("bf16_kernel_share %.3f\n", bf16_calls / std::max(1.0, bf16_calls + static_cast<double>(after_bf16.float32 - before_bf16.float32)));
  std::printf("fp16_recording %.3f\n", median_step_ms(model, batch, steps, Precision::fp16, 1));
  const auto [tenth, unrecorded] = every_tenth_and_unrecorded_ms(model, batch, steps);
  std::printf("fp16_recording_every_10 %.3f\n", tenth);
  std::printf("fp16_mean %.3f\n", unrecorded);
  return 0;
}
