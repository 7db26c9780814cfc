// What the step sentinel (step_sentinel.hpp) costs: unrecorded steps of the same run with the
// sentinel on and off, alternating in one process on the same threads, per model: fpscope train's
// default MLP (32-64-64-64-10 tanh, fp16, batch 128), a 784-1024-1024-10 tanh MLP (fp16 and bf16,
// batch 256) and a 4 x 256 GPT (context 128, batch 8, fp16, bf16). Prints each median step
// time, the median of the rounds' ratios on/off (each round times the two back to back, so the
// machine's drift between rounds cancels) with their spread, and the machine's load average
// before and after.
//
//   build/bench/bench_sentinel [ROUNDS]   (default 15 rounds of 10 steps each way)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fpscope/gpu/training_session.hpp"
#include "fpscope/gpu/training_settings.hpp"

namespace {

double load_average() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

fpscope::PreparedRun prepared(const std::string& model, const char* precision, const char* batch, bool sentinel) {
  fpscope::TrainingOptions options;
  options.model = model;
  options.backend = "cpu";
  options.precision = precision;
  options.batch = batch;
  fpscope::TrainingSettings settings = fpscope::parse_training_options(options);
  settings.config.sentinel = sentinel;
  return fpscope::prepare_training(settings);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 15;
  constexpr int steps_per_round = 10;
  struct Case {
    const char* model;
    const char* precision;
    const char* batch;
  };
  const Case cases[] = {{"32-64-64-64-10", "fp16", "128"},
                        {"784-1024-1024-10", "fp16", "256"},
                        {"784-1024-1024-10", "bf16", "256"},
                        {"gpt:layers=4,width=256,heads=4,context=128", "fp16", "8"},
                        {"gpt:layers=4,width=256,heads=4,context=128", "bf16", "8"}};
  std::printf("load average before: %.2f\n", load_average());
  std::printf("%-44s %-5s %12s %12s %8s  %s\n", "model", "prec", "on (ms)", "off (ms)", "on/off", "(rounds' ratios)");
  for (const Case& c : cases) {
    fpscope::PreparedRun on = prepared(c.model, c.precision, c.batch, true), off = prepared(c.model, c.precision, c.batch, false);
    Eigen::MatrixXf inputs;
    std::vector<int> labels;
    on.data->next_batch(on.settings.batch, inputs, labels);
    // A warm-up of each; then rounds alternating which goes first.
    for (int i = 0; i < 3; ++i) on.trainer->step(inputs, labels, false, true), off.trainer->step(inputs, labels, false, true);
    std::vector<double> on_times, off_times;
    const auto time_round = [&](fpscope::TrainerBackend& trainer, std::vector<double>& into) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < steps_per_round; ++i) trainer.step(inputs, labels, false, true);
      into.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / steps_per_round);
    };
    for (int r = 0; r < rounds; ++r) {
      if (r % 2 == 0) time_round(*on.trainer, on_times), time_round(*off.trainer, off_times);
      else time_round(*off.trainer, off_times), time_round(*on.trainer, on_times);
    }
    std::vector<double> ratios;
    for (std::size_t r = 0; r < on_times.size(); ++r) ratios.push_back(on_times[r] / off_times[r]);
    std::sort(ratios.begin(), ratios.end());
    std::printf("%-44s %-5s %12.3f %12.3f %8.3f  (%.3f .. %.3f)\n", c.model, c.precision, median(on_times), median(off_times), median(ratios),
                ratios.front(), ratios.back());
  }
  std::printf("load average after: %.2f\n", load_average());
}
