// The CUDA MLP backend against the CPU reference, step by step, on a model whose layers all differ
// in size (a swapped or transposed tensor cannot hide behind a square one), for every precision,
// activation and rounding mode, with recorded and unrecorded steps, a batch that changes size, a
// checkpoint resumed on the other backend and injected faults.
//
// What is exact and what is not. The element-wise math is the same FPSCOPE_HD code on both sides,
// compiled without FMA contraction, and both hold matrices column-major, so the same element draws
// the same stochastic-rounding word. What differs: cuBLAS sums the GEMMs (and the bias gradients)
// in another order than Eigen, and the loss's logf is CUDA's on the device, glibc's on the host
// (the activations and exponentials are elementwise_math.hpp's on both). So:
//   exact   -- step 0's weight histograms and cast counts (the same weights, the same casts), the
//              stochastic-rounding counters, the loss scales and skips, a restored state read back;
//   stated  -- every other histogram: per-bin differences of at most `moved_allowed` elements
//              (0.5% of the tensor plus 2: values that crossed a binade boundary through summation
//              order), cast counts within the same allowance; the loss within 1e-5 relative for
//              fp32 and 2e-3 for the low precisions; the weights after the run within 1e-5 (fp32) and
//              2e-3 (low) relative in the 2-norm.
// Prints every measured difference; needs a device to run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "counterfactual_check.hpp"
#include "verdict.hpp"
#include "fpscope/core/names.hpp"
#ifdef FPSCOPE_DEVICE_TEST_ON_HOST_TWIN
#include "fpscope/gpu/device_mlp.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "fpscope/gpu/host_device_ops.hpp"
#else
#include "fpscope/gpu/cuda_mlp.hpp"
#endif
#include "fpscope/gpu/training_data.hpp"

using namespace fpscope;

namespace {

// The device trainer under test: the CUDA backend's, or -- built as device_mlp_on_host_twin, in
// every CI run -- the same device step on the host twin of its kernels (host_device_ops.hpp), so
// that this whole test, not only its kernels, runs where no GPU is.
#ifdef FPSCOPE_DEVICE_TEST_ON_HOST_TWIN
struct DeviceTrainer final : DeviceMlpTrainer {
  explicit DeviceTrainer(const TrainingConfig& config) : DeviceMlpTrainer(config, make_host_device_ops()) {}
};
bool device_answers() { return true; }
#else
using DeviceTrainer = CudaMlpTrainer;
bool device_answers() { return cuda_device_available(); }
#endif

using fpscope::test::failures;
using fpscope::test::verdict;

bool same_bits(const MlpTrainer::State& a, const MlpTrainer::State& b) {
  if (a.weights.size() != b.weights.size()) return false;
  for (std::size_t l = 0; l < a.weights.size(); ++l)
    if (a.weights[l].size() != b.weights[l].size() || a.biases[l].size() != b.biases[l].size() ||
        std::memcmp(a.weights[l].data(), b.weights[l].data(), sizeof(float) * static_cast<std::size_t>(a.weights[l].size())) != 0 ||
        std::memcmp(a.biases[l].data(), b.biases[l].data(), sizeof(float) * static_cast<std::size_t>(a.biases[l].size())) != 0)
      return false;
  return a.steps == b.steps && a.stochastic_counter == b.stochastic_counter && a.scaler == b.scaler;
}

// ||a - b|| / ||a|| over every weight and bias.
double relative_distance(const MlpTrainer::State& a, const MlpTrainer::State& b) {
  double difference = 0, norm = 0;
  for (std::size_t l = 0; l < a.weights.size(); ++l) {
    difference += (a.weights[l] - b.weights[l]).cast<double>().squaredNorm() + (a.biases[l] - b.biases[l]).cast<double>().squaredNorm();
    norm += a.weights[l].cast<double>().squaredNorm() + a.biases[l].cast<double>().squaredNorm();
  }
  return std::sqrt(difference / std::max(norm, 1e-300));
}

std::uint64_t moved_allowed(std::uint64_t total) { return 2 + total / 200; }

// The largest per-bin difference (binades, zero, inf, NaN) between two histograms.
std::uint64_t largest_bin_difference(const ExponentHistogram& a, const ExponentHistogram& b) {
  auto gap = [](std::uint64_t x, std::uint64_t y) { return x > y ? x - y : y - x; };
  std::uint64_t worst = std::max({gap(a.zero_count(), b.zero_count()), gap(a.infinity_count(), b.infinity_count()), gap(a.nan_count(), b.nan_count())});
  for (int binade = min_binade; binade <= max_binade; ++binade) worst = std::max(worst, gap(a.count(binade), b.count(binade)));
  return worst;
}

std::uint64_t largest_count_difference(const std::optional<CastCounts>& a, const std::optional<CastCounts>& b) {
  if (a.has_value() != b.has_value()) return ~std::uint64_t{0};
  if (!a) return 0;
  auto gap = [](std::uint64_t x, std::uint64_t y) { return x > y ? x - y : y - x; };
  return std::max({gap(a->flushed_to_zero, b->flushed_to_zero), gap(a->made_subnormal, b->made_subnormal), gap(a->overflowed, b->overflowed)});
}

// Worst findings over a run, so that each check prints one line.
struct Agreement {
  double loss = 0;                // largest relative loss difference
  double moved_share = 0;         // largest per-bin difference over the tensor's size
  bool histograms_within = true;  // every per-bin and count difference within moved_allowed
  bool layout_same = true;        // the same tensors, names, kinds, totals, scales, captures
  bool scale_and_skip_same = true;
  bool step0_weights_exact = true;
};

void compare_step(const StepResult& cpu, const StepResult& gpu, std::int64_t step, Agreement& agreement) {
  agreement.loss = std::max(agreement.loss, std::abs(cpu.loss - gpu.loss) / std::max(1e-12, std::abs(cpu.loss)));
  agreement.scale_and_skip_same = agreement.scale_and_skip_same && cpu.loss_scale == gpu.loss_scale && cpu.skipped == gpu.skipped;
  if (!cpu.snapshot || !gpu.snapshot) {
    agreement.layout_same = agreement.layout_same && cpu.snapshot.has_value() == gpu.snapshot.has_value();
    return;
  }
  const auto& a = cpu.snapshot->tensors;
  const auto& b = gpu.snapshot->tensors;
  agreement.layout_same = agreement.layout_same && a.size() == b.size() && cpu.snapshot->step == gpu.snapshot->step;
  for (std::size_t t = 0; t < std::min(a.size(), b.size()); ++t) {
    const std::uint64_t total = a[t].histogram.total_count();
    agreement.layout_same = agreement.layout_same && a[t].name == b[t].name && a[t].kind == b[t].kind &&
                            total == b[t].histogram.total_count() && a[t].scale == b[t].scale && a[t].captured == b[t].captured;
    const std::uint64_t bins = largest_bin_difference(a[t].histogram, b[t].histogram);
    const std::uint64_t counts = largest_count_difference(a[t].cast, b[t].cast);
    agreement.moved_share = std::max(agreement.moved_share, static_cast<double>(std::max(bins, counts)) / static_cast<double>(total));
    agreement.histograms_within = agreement.histograms_within && bins <= moved_allowed(total) && counts <= moved_allowed(total);
    if (step == 0 && a[t].kind == TensorKind::weight)
      agreement.step0_weights_exact = agreement.step0_weights_exact && bins == 0 && counts == 0;
  }
}

void report(const std::string& label, const Agreement& agreement, Precision precision) {
  const double loss_tolerance = precision == Precision::fp32 ? 1e-5 : 2e-3;
  verdict(agreement.layout_same, label + ": the same tensors (name, kind, size, scale, capture) on both");
  verdict(agreement.scale_and_skip_same, label + ": the same loss scale and skip every step");
  verdict(agreement.step0_weights_exact, label + ": step 0's weight histograms and cast counts are exact");
  verdict(agreement.histograms_within, label + ": per-bin and count differences within 0.5% + 2 (largest share)", agreement.moved_share);
  verdict(agreement.loss <= loss_tolerance, label + ": loss within " + (precision == Precision::fp32 ? "1e-5" : "2e-3") + " (largest)",
          agreement.loss);
}

TrainingConfig small_config(Precision precision, Activation activation, RoundingMode rounding) {
  TrainingConfig config;
  config.layer_sizes = {20, 48, 36, 10};
  config.activation = activation;
  config.precision = precision;
  config.rounding = rounding;
  config.learning_rate = 0.05f;
  config.seed = 11;
  config.scaler = precision == Precision::fp32 ? LossScalerConfig::none() : LossScalerConfig::pytorch();
  return config;
}

// `steps` unrecorded steps of `trainer` on batches of 32 from `data`, the last batch left in (x, y).
void take_steps(TrainerBackend& trainer, TrainingData& data, int steps, Eigen::MatrixXf& x, std::vector<int>& y) {
  for (int step = 0; step < steps; ++step) {
    data.next_batch(32, x, y);
    trainer.step(x, y, false, true);
  }
}

// The step plan of one run: batch sizes, which steps record and which read their loss.
struct Planned {
  int batch;
  bool record;
  bool read_loss;
};
const Planned plan[] = {{64, true, true},   {64, true, true},   {64, false, false}, {64, false, true}, {40, true, true},
                        {40, false, false}, {72, true, true},   {72, false, false}, {64, true, true},  {64, true, true}};

}  // namespace

int main() {
  if (!device_answers()) {
    std::printf("no CUDA device: skipping the device run (this binary compiled and linked)\n");
    return 77;
  }
  // 1. Every precision x activation, round to nearest even: the plan above, then a NaN and an inf
  //    injected into the weight gradients of two layers.
  for (const Precision precision : all_precisions)
    for (const Activation activation : all_activations) {
      const TrainingConfig config = small_config(precision, activation, RoundingMode::nearest_even);
      const std::string label = precision_name(precision) + " " + activation_name(activation);
      MlpTrainer cpu(config);
      DeviceTrainer gpu(config);
      verdict(same_bits(cpu.state(), gpu.state()), label + ": the device starts from the CPU's weights, bit for bit");
      TrainingData data("synthetic", config.layer_sizes, 1);
      Eigen::MatrixXf x;
      std::vector<int> y;
      Agreement agreement;
      std::int64_t step = 0;
      for (const Planned& p : plan) {
        data.next_batch(p.batch, x, y);
        const StepResult a = cpu.step(x, y, p.record);
        const StepResult b = gpu.step(x, y, p.record, p.read_loss);
        if (p.read_loss || p.record) compare_step(a, b, step, agreement);
        else agreement.layout_same = agreement.layout_same && !b.snapshot && std::isnan(b.loss);
        ++step;
      }
      report(label, agreement, precision);
      const MlpTrainer::State cpu_state = cpu.state(), gpu_state = gpu.state();
      const double distance = relative_distance(cpu_state, gpu_state);
      verdict(distance <= (precision == Precision::fp32 ? 1e-5 : 2e-3), label + ": weights after 10 steps (relative 2-norm)", distance);
      verdict(cpu_state.stochastic_counter == gpu_state.stochastic_counter && cpu_state.steps == gpu_state.steps && cpu_state.scaler == gpu_state.scaler,
              label + ": step count, scaler state and random-word counter equal");
      // Faults: a NaN into fc2's weight gradient, then an inf into fc3's.
      for (const auto& [value, layer] : {std::pair{FaultInjection::Value::nan, 2}, std::pair{FaultInjection::Value::infinity, 3}}) {
        const FaultInjection fault{value, layer, gpu.state().steps};
        cpu.inject(fault);
        gpu.inject(fault);
        const MlpTrainer::State before = gpu.state();
        data.next_batch(64, x, y);
        const StepResult a = cpu.step(x, y, true), b = gpu.step(x, y, true, true);
        const char* what = value == FaultInjection::Value::nan ? "NaN" : "inf";
        MlpTrainer::State after = gpu.state();
        const bool weights_kept = std::equal(before.weights.begin(), before.weights.end(), after.weights.begin(),
                                             [](const Eigen::MatrixXf& p, const Eigen::MatrixXf& q) {
                                               return std::memcmp(p.data(), q.data(), sizeof(float) * static_cast<std::size_t>(p.size())) == 0;
                                             });
        verdict(a.skipped && b.skipped && weights_kept, label + ": injected " + what + " skips the step on both, device weights bit-identical");
        verdict(a.loss_scale == b.loss_scale && cpu.scaler().state() == gpu.scaler_state(), label + ": the scale backs off alike after the " + what);
        const TensorRecord& gradient = b.snapshot->tensors[4 * static_cast<std::size_t>(layer - 1) + 3];
        const std::uint64_t found = value == FaultInjection::Value::nan ? gradient.histogram.nan_count() : gradient.histogram.infinity_count();
        verdict(found >= 1 && gradient.name == "fc" + std::to_string(layer) && gradient.kind == TensorKind::weight_gradient,
                label + ": the " + what + " is in fc" + std::to_string(layer) + "'s weight-gradient histogram", static_cast<double>(found));
      }
    }
  // 2. Every rounding mode, fp16 and bf16: stochastic rounding draws the same words on both.
  for (const Precision precision : {Precision::fp16, Precision::bf16})
    for (const RoundingMode mode : all_rounding_modes) {
      const TrainingConfig config = small_config(precision, Activation::gelu, mode);
      const std::string label = precision_name(precision) + " " + rounding_mode_name(mode);
      MlpTrainer cpu(config);
      DeviceTrainer gpu(config);
      TrainingData data("synthetic", config.layer_sizes, 2);
      Eigen::MatrixXf x;
      std::vector<int> y;
      Agreement agreement;
      for (std::int64_t step = 0; step < 6; ++step) {
        data.next_batch(48, x, y);
        compare_step(cpu.step(x, y, true), gpu.step(x, y, true, true), step, agreement);
      }
      report(label, agreement, precision);
      verdict(cpu.state().stochastic_counter == gpu.state().stochastic_counter, label + ": the same number of random words drawn");
    }
  // 3. A checkpoint taken on the CPU resumes on the device (and reads back bit for bit), and the
  //    two go on together.
  {
    const TrainingConfig config = small_config(Precision::fp16, Activation::relu, RoundingMode::stochastic);
    MlpTrainer cpu(config);
    TrainingData data("synthetic", config.layer_sizes, 3);
    Eigen::MatrixXf x;
    std::vector<int> y;
    take_steps(cpu, data, 5, x, y);
    DeviceTrainer gpu(config);
    gpu.restore(cpu.state());
    verdict(same_bits(cpu.state(), gpu.state()), "resume: a CPU checkpoint restored on the device reads back bit for bit");
    Agreement agreement;
    for (int step = 5; step < 10; ++step) {
      data.next_batch(32, x, y);
      compare_step(cpu.step(x, y, true), gpu.step(x, y, true, true), step, agreement);
    }
    report("resume fp16 stochastic", agreement, Precision::fp16);
  }
  // 4. Stochastic rounding on the device alone: the same seed gives the same bits twice, a
  //    checkpointed state resumes onto them, and another seed gives other bits.
  {
    TrainingConfig config = small_config(Precision::fp16, Activation::tanh, RoundingMode::stochastic);
    auto run = [&](std::uint64_t seed, int steps, const MlpTrainer::State* resume_from) {
      config.seed = seed;
      DeviceTrainer gpu(config);
      if (resume_from != nullptr) gpu.restore(*resume_from);
      TrainingData data("synthetic", config.layer_sizes, 1);
      Eigen::MatrixXf x;
      std::vector<int> y;
      for (std::int64_t step = 0; step < gpu.state().steps; ++step) data.next_batch(64, x, y);  // the data position
      for (int step = 0; step < steps; ++step) {
        data.next_batch(64, x, y);
        gpu.step(x, y, false, false);
      }
      return gpu.state();
    };
    const MlpTrainer::State a = run(5, 20, nullptr), b = run(5, 20, nullptr), c = run(6, 20, nullptr);
    verdict(same_bits(a, b), "stochastic fp16: the same seed gives the same weights");
    verdict(!same_bits(a, c), "stochastic fp16: another seed gives other weights");
    const MlpTrainer::State half = run(5, 10, nullptr);
    verdict(half.stochastic_counter > 0, "stochastic fp16: the random-word counter is part of the state", static_cast<double>(half.stochastic_counter));
    verdict(same_bits(a, run(5, 10, &half)), "stochastic fp16: 10 steps, restore, 10 more = 20 steps");
  }
  // 5. fp16-pure: a skipped step re-casts no weights and draws no random words, on the device as on
  //    the CPU (a re-cast after a skip would leave the counters a parameter count apart).
  {
    const TrainingConfig config = small_config(Precision::fp16_pure, Activation::relu, RoundingMode::stochastic);
    MlpTrainer cpu(config);
    DeviceTrainer gpu(config);
    TrainingData data("synthetic", config.layer_sizes, 1);
    Eigen::MatrixXf x;
    std::vector<int> y;
    for (int step = 0; step < 5; ++step) {
      data.next_batch(64, x, y);
      cpu.step(x, y, false);
      gpu.step(x, y, false, false);
    }
    const auto counters = [&] { return static_cast<double>(gpu.state().stochastic_counter) - static_cast<double>(cpu.state().stochastic_counter); };
    verdict(counters() == 0, "fp16-pure: the device drew as many random words as the CPU in 5 steps (difference)", counters());
    const FaultInjection fault{FaultInjection::Value::nan, 2, cpu.state().steps};
    cpu.inject(fault);
    gpu.inject(fault);
    data.next_batch(64, x, y);
    const StepResult a = cpu.step(x, y, false), b = gpu.step(x, y, false, true);
    verdict(a.skipped && b.skipped, "fp16-pure: the injected step is skipped on both");
    verdict(counters() == 0, "fp16-pure: after the skipped step the counters still agree (difference)", counters());
  }
  // 6. The optimizers on the device (optimizer_element.hpp's rule, the step's settings made there):
  //    momentum, AdamW with weight decay, clipping with SGD and with AdamW, in fp32 and fp16 with a
  //    NaN injected (a skipped step is neither clipped nor counted), then a CPU checkpoint with its
  //    optimizer state resumed on the device. The norm's float64 sum runs in another order on the
  //    device, so a clipped step's coefficient may differ in its last bit: weights and losses are
  //    compared with the tolerances above.
  for (const Precision precision : {Precision::fp32, Precision::fp16}) {
    OptimizerConfig momentum, adamw, sgd_clipped, adamw_clipped;
    momentum.kind = OptimizerKind::momentum;
    adamw.kind = OptimizerKind::adamw;
    adamw.weight_decay = 0.01f;
    sgd_clipped.clip_grad_norm = 0.5f;
    adamw_clipped = adamw;
    adamw_clipped.clip_grad_norm = 0.5f;
    for (const auto& [name, optimizer] : {std::pair{"momentum", momentum}, std::pair{"adamw", adamw}, std::pair{"sgd clip 0.5", sgd_clipped},
                                          std::pair{"adamw clip 0.5", adamw_clipped}}) {
      TrainingConfig config = small_config(precision, Activation::gelu, RoundingMode::nearest_even);
      config.optimizer = optimizer;
      if (optimizer.kind == OptimizerKind::adamw) config.learning_rate = 1e-3f;
      const std::string label = precision_name(precision) + " " + name;
      MlpTrainer cpu(config);
      DeviceTrainer gpu(config);
      TrainingData data("synthetic", config.layer_sizes, 4);
      Eigen::MatrixXf x;
      std::vector<int> y;
      Agreement agreement;
      for (std::int64_t step = 0; step < 8; ++step) {
        if (precision == Precision::fp16 && step == 3) {
          const FaultInjection fault{FaultInjection::Value::nan, 2, step};
          cpu.inject(fault);
          gpu.inject(fault);
        }
        data.next_batch(64, x, y);
        compare_step(cpu.step(x, y, true), gpu.step(x, y, true, true), step, agreement);
      }
      report(label, agreement, precision);
      const MlpTrainer::State cpu_state = cpu.state(), gpu_state = gpu.state();
      const double distance = relative_distance(cpu_state, gpu_state);
      verdict(distance <= (precision == Precision::fp32 ? 1e-5 : 2e-3), label + ": weights after 8 steps (relative 2-norm)", distance);
      verdict(cpu_state.optimizer.updates == gpu_state.optimizer.updates && cpu_state.optimizer.first.size() == gpu_state.optimizer.first.size() &&
                  cpu_state.optimizer.second.size() == gpu_state.optimizer.second.size(),
              label + ": the same update count and buffers on both", static_cast<double>(gpu_state.optimizer.updates));
      // Resume: the CPU's state (optimizer buffers included) on a fresh device trainer, two more steps each.
      DeviceTrainer resumed(config);
      resumed.restore(cpu_state);
      const MlpTrainer::State read_back = resumed.state();
      verdict(same_bits(cpu_state, read_back) && read_back.optimizer == cpu_state.optimizer,
              label + ": a CPU checkpoint with its optimizer state reads back from the device bit for bit");
      Agreement after_resume;
      for (std::int64_t step = 8; step < 10; ++step) {
        data.next_batch(64, x, y);
        compare_step(cpu.step(x, y, true), resumed.step(x, y, true, true), step, after_resume);
      }
      report(label + " resumed", after_resume, precision);
    }
  }
  // 7. FP8 and block-scaled recipes (their operands quantized on the device by the CPU's rules,
  //    multiplied as float32 there, FP8 products scaled by cuBLAS's alpha): each step from
  //    the CPU's state (a 4-bit operand a bit apart steps by an eighth, and such differences would
  //    grow), the same quantizations in the same order, the same random words.
  for (const GemmRecipe recipe : {GemmRecipe::fp8_delayed, GemmRecipe::fp8_current, GemmRecipe::mxfp8, GemmRecipe::mxfp4, GemmRecipe::nvfp4}) {
    TrainingConfig config = small_config(Precision::bf16, Activation::relu, recipe == GemmRecipe::mxfp4 ? RoundingMode::stochastic : RoundingMode::nearest_even);
    config.recipe.recipe = recipe;
    const std::string label = "bf16 " + gemm_recipe_name(recipe);
    MlpTrainer cpu(config);
    DeviceTrainer gpu(config);
    TrainingData data("synthetic", config.layer_sizes, 5);
    Eigen::MatrixXf x;
    std::vector<int> y;
    Agreement agreement;
    bool records_same = true, counters_same = true;
    for (std::int64_t step = 0; step < 4; ++step) {
      data.next_batch(64, x, y);
      gpu.restore(cpu.state());
      const StepResult a = cpu.step(x, y, true), b = gpu.step(x, y, true, true);
      compare_step(a, b, step, agreement);
      records_same = records_same && a.scaling.size() == b.scaling.size() && a.block_operands.size() == b.block_operands.size();
      for (std::size_t i = 0; records_same && i < a.scaling.size(); ++i)
        records_same = a.scaling[i].name == b.scaling[i].name && a.scaling[i].operand == b.scaling[i].operand && a.scaling[i].elements == b.scaling[i].elements;
      for (std::size_t i = 0; records_same && i < a.block_operands.size(); ++i)
        records_same = a.block_operands[i].name == b.block_operands[i].name && a.block_operands[i].operand == b.block_operands[i].operand &&
                       a.block_operands[i].statistics.blocks == b.block_operands[i].statistics.blocks;
      counters_same = counters_same && cpu.state().stochastic_counter == gpu.state().stochastic_counter;
    }
    report(label, agreement, Precision::bf16);
    verdict(records_same, label + ": the same quantizations (layer, operand, elements or blocks) in the same order");
    verdict(counters_same, label + ": the same random words drawn every step");
  }
  // 8. Steps replayed as graphs (StepGraphOps: per batch size and recording, the first step as it
  //    comes, the second captured, the rest replayed) against the same steps launched as they come
  //    on the same device, bit for bit: batches that change size, recorded steps among unrecorded
  //    ones, losses read on some, the scaler's rule changed after a replayed step. Replayed: steps 2,
  //    7, 8 and 11.
  for (const auto& [precision, rounding] : {std::pair{Precision::fp16, RoundingMode::nearest_even}, std::pair{Precision::bf16, RoundingMode::stochastic},
                                            std::pair{Precision::fp16_pure, RoundingMode::stochastic}}) {
    TrainingConfig config = small_config(precision, Activation::gelu, rounding);
    const std::string label = "graphs, " + precision_name(precision) + " " + rounding_mode_name(rounding);
    config.step_graphs = true;
    DeviceTrainer graphed(config);
    config.step_graphs = false;
    DeviceTrainer plain(config);
    TrainingData data("synthetic", config.layer_sizes, 7);
    Eigen::MatrixXf x;
    std::vector<int> y;
    bool same = true;
    const int batches[] = {64, 64, 64, 64, 64, 40, 40, 40, 40, 64, 64, 64, 64, 64};
    for (int step = 0; step < 14; ++step) {
      data.next_batch(batches[step], x, y);
      if (step == 3) {  // after a replayed step: a graph kept over it would step by the old rule
        graphed.reconfigure_scaler(LossScalerConfig::fixed(0x1p10));
        plain.reconfigure_scaler(LossScalerConfig::fixed(0x1p10));
      }
      const bool record = step == 4 || step == 12 || step == 13, read = step % 3 == 0;
      const StepResult a = graphed.step(x, y, record, read), b = plain.step(x, y, record, read);
      same = same && std::memcmp(&a.loss, &b.loss, sizeof a.loss) == 0 && a.skipped == b.skipped && a.snapshot.has_value() == b.snapshot.has_value() &&
             (!a.snapshot || *a.snapshot == *b.snapshot);
    }
    const MlpTrainer::State a = graphed.state(), b = plain.state();
    verdict(same && same_bits(a, b) && a.stochastic_counter == b.stochastic_counter && a.scaler == b.scaler,
            label + ": replayed steps are the steps launched as they come, bit for bit");
    verdict(graphed.graph_statistics().replayed >= 4 && plain.graph_statistics().replayed == 0, label + ": steps replayed (of 14)",
            static_cast<double>(graphed.graph_statistics().replayed));
  }
  // 9. The counterfactual step (the loss-scale preview) at four scales on the device, each against
  //    Apply's step there, in stochastic rounding (the counter must come back exactly where it was).
  for (const Precision precision : {Precision::fp16, Precision::bf16, Precision::fp16_pure}) {
    TrainingConfig config = small_config(precision, Activation::tanh, RoundingMode::stochastic);
    DeviceTrainer run(config);
    TrainingData data("synthetic", config.layer_sizes, 5);
    Eigen::MatrixXf x;
    std::vector<int> y;
    take_steps(run, data, 3, x, y);
    data.next_batch(32, x, y);
    fpscope::test::check_counterfactual_on_device("counterfactual, " + precision_name(precision), run, config.scaler,
                                                  [&] { return std::make_unique<DeviceTrainer>(config); }, x, y);
  }
  std::printf("%s\n", failures == 0 ? "all OK" : "FAILURES");
  return failures == 0 ? 0 : 1;
}
