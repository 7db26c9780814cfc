// `fpscope train`: mixed-precision training of an MLP on the CPU backend, recording a run log.
#include <fmt/core.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "cuda_module.hpp"
#include "fpscope/analyzer/run_log.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/gpu/checkpoint.hpp"
#include "fpscope/gpu/fault_injection.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/training_data.hpp"

namespace fpscope::cli {

namespace {

std::atomic<bool> interrupted{false};
void on_interrupt(int) { interrupted = true; }

struct TrainOptions {
  std::string model = "784-512-512-10";
  std::string activation = "relu";
  std::string precision = "fp16";
  std::string round = "rne";
  std::string loss_scale = "dynamic";
  long long steps = 500;
  int batch = 128;
  float lr = 0.01f;
  int record_every = 1;
  std::string data = "synthetic";
  std::string backend = "auto";
  unsigned long long seed = 1;
  std::string out;
  std::vector<std::string> inject;
  long long checkpoint_every = 0;
  std::string checkpoint;
  bool resume = false;
};

LossScalerConfig parse_loss_scale(const std::string& text) {
  if (text == "none") return LossScalerConfig::none();
  if (text == "dynamic") return LossScalerConfig::pytorch();
  try {
    std::size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size() && value > 0 && std::isfinite(value)) return LossScalerConfig::fixed(value);
  } catch (const std::exception&) {
  }
  throw UsageError("--loss-scale '" + text + "' is not none, dynamic or a positive number");
}

template <typename Parse>
auto parse_or_usage(Parse parse) {
  try {
    return parse();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

// The two backends behind one face: the CPU reference (Eigen) and the CUDA module (cuBLAS + our kernels).
class Backend {
 public:
  Backend(const std::string& name, const MlpConfig& config) {
    std::string why;
    const bool use_cuda = name == "cuda" || (name == "auto" && cuda_device_count(why) > 0);
    if (use_cuda) cuda_ = make_cuda_trainer(config);
    else cpu_.emplace(config);
  }
  std::string_view name() const { return cpu_ ? "cpu" : "cuda"; }
  StepResult step(const Eigen::MatrixXf& x, const std::vector<int>& y, bool record, bool read_loss) {
    return cpu_ ? cpu_->step(x, y, record) : cuda_->step(x, y, record, read_loss);
  }
  MlpTrainer::State state() const { return cpu_ ? cpu_->state() : cuda_->state(); }
  void restore(const MlpTrainer::State& state) { cpu_ ? cpu_->restore(state) : cuda_->restore(state); }
  void inject(const FaultInjection& fault) { cpu_ ? cpu_->inject(fault) : cuda_->inject(fault); }
  LossScalerState scaler_state() const { return cpu_ ? cpu_->scaler().state() : cuda_->scaler_state(); }
  Format format() const { return cpu_ ? cpu_->format() : cuda_->format(); }

 private:
  std::optional<MlpTrainer> cpu_;
  std::unique_ptr<TrainerBackend> cuda_;
};

void run_train(const TrainOptions& o) {
  MlpConfig config;
  config.layer_sizes = parse_or_usage([&] { return parse_layer_sizes(o.model); });
  config.activation = parse_or_usage([&] { return parse_activation(o.activation); });
  config.precision = parse_or_usage([&] { return parse_precision(o.precision); });
  config.rounding = parse_rounding_mode(o.round);
  config.scaler = parse_loss_scale(o.loss_scale);
  if (config.precision == Precision::fp32 && o.loss_scale == "dynamic") config.scaler = LossScalerConfig::none();
  config.learning_rate = o.lr;
  config.seed = o.seed;
  if (o.steps < 1 || o.batch < 1 || o.record_every < 1) throw UsageError("--steps, --batch and --record-every must be positive");
  if (!(o.lr > 0)) throw UsageError("--lr must be positive");
  if (o.backend != "auto" && o.backend != "cpu" && o.backend != "cuda")
    throw UsageError("unknown --backend '" + o.backend + "': expected auto, cpu or cuda");
  std::optional<TrainingData> data;
  try {
    data.emplace(o.data, config.layer_sizes, o.seed);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--data: ") + e.what());
  }
  Backend trainer(o.backend, config);
  std::string injected;
  for (const std::string& text : o.inject) {
    const FaultInjection fault = parse_or_usage([&] { return parse_fault_injection(text, static_cast<int>(config.layer_sizes.size()) - 1); });
    trainer.inject(fault);
    injected += " " + describe(fault);
  }
  if (o.checkpoint_every < 0) throw UsageError("--checkpoint-every must not be negative");
  RunHeader header;
  header.source = "fpscope train";
  header.model = o.model + " " + activation_name(config.activation);
  header.precision = precision_name(config.precision);
  header.format = format_name(trainer.format());
  header.rounding = rounding_mode_name(config.rounding);
  header.scaler = describe(config.scaler);
  // What a checkpoint must agree with to be resumed: everything that decides the bits.
  const std::string settings = fmt::format("{}|backend {}|batch {}|lr {}|loss weight {}|record-every {}|data {}|seed {}|inject{}|log {}",
                                           run_header_line(header), trainer.name(), o.batch, o.lr, config.loss_weight, o.record_every, o.data, o.seed,
                                           injected, o.out);
  const std::string checkpoint_path =
      !o.checkpoint.empty() ? o.checkpoint : o.out.empty() ? std::string("fpscope-train.ckpt") : o.out + ".ckpt";
  long long first_step = 0;
  std::optional<RunLogAppender> log;
  if (o.resume) {
    TrainingCheckpoint checkpoint;
    try {
      checkpoint = read_checkpoint(checkpoint_path);
    } catch (const CheckpointError& e) {
      throw UsageError(std::string(e.what()) + ": cannot --resume");
    }
    if (checkpoint.settings != settings)
      throw UsageError("checkpoint " + checkpoint_path + " was written by a run with other settings: resume with the same options");
    trainer.restore(checkpoint.trainer);
    data->restore_state(checkpoint.data_state);
    if (!o.out.empty()) log.emplace(o.out, header, checkpoint.run_log_bytes);
    first_step = checkpoint.trainer.steps;
  } else if (!o.out.empty()) {
    log.emplace(o.out, header);
  }
  interrupted = false;
  const auto previous = std::signal(SIGINT, on_interrupt);
  const auto start = std::chrono::steady_clock::now();
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  StepResult last;
  long long step = first_step;
  for (; step < o.steps && !interrupted; ++step) {
    data->next_batch(o.batch, inputs, labels);
    const bool report = step % 10 == 0 || step + 1 == o.steps;
    last = trainer.step(inputs, labels, log.has_value() && step % o.record_every == 0, report);
    if (last.snapshot) log->append(*last.snapshot);
    if (o.checkpoint_every > 0 && (step + 1) % o.checkpoint_every == 0)
      write_checkpoint(checkpoint_path, {settings, trainer.state(), data->save_state(), log ? log->bytes_written() : 0});
    if (report) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      fmt::print(stderr, "\r{} step {:>7}/{}  loss {:.4f}  scale {:g}  skipped {}  {:.1f} steps/s   ", trainer.name(), step + 1, o.steps,
                 last.loss, last.loss_scale, trainer.scaler_state().skipped_steps,
                 static_cast<double>(step + 1 - first_step) / std::max(seconds, 1e-9));
    }
  }
  std::signal(SIGINT, previous);
  fmt::print(stderr, "\n");
  const LossScalerState scaler = trainer.scaler_state();
  fmt::print("{} steps, final loss {:.6f}, loss scale {:g}, skipped steps {}{}\n", step, last.loss, scaler.scale, scaler.skipped_steps,
             interrupted ? " (interrupted)" : "");
}

}  // namespace

void add_train(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train an MLP in fp32 or mixed precision (CPU or CUDA backend), recording exponent histograms");
  cmd->add_option("--model", o->model, "layer sizes, input to classes")->capture_default_str();
  cmd->add_option("--activation", o->activation, "relu, gelu or tanh")->capture_default_str();
  cmd->add_option("--precision", o->precision, "fp32, fp16, bf16 or fp16-pure")->capture_default_str();
  cmd->add_option("-r,--round", o->round, "rounding mode of every low-precision cast")->capture_default_str();
  cmd->add_option("--loss-scale", o->loss_scale, "none, dynamic (GradScaler's rule) or a number")->capture_default_str();
  cmd->add_option("--steps", o->steps, "training steps")->capture_default_str();
  cmd->add_option("--batch", o->batch, "batch size")->capture_default_str();
  cmd->add_option("--lr", o->lr, "learning rate (SGD)")->capture_default_str();
  cmd->add_option("--record-every", o->record_every, "record a snapshot every N steps")->capture_default_str();
  cmd->add_option("--data", o->data, "synthetic (embedded), or mnist:DIR with train-images-idx3-ubyte and train-labels-idx1-ubyte (.gz or not)")->capture_default_str();
  cmd->add_option("--backend", o->backend, "auto (cuda when a device answers), cpu or cuda")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed: the same seed gives the same bits")->capture_default_str();
  cmd->add_option("--out", o->out, "run log to write as training goes (JSON Lines)");
  cmd->add_option("--inject", o->inject, "put nan or inf into a layer's weight gradient at a step: nan@fc2:100 (repeatable)");
  cmd->add_option("--checkpoint-every", o->checkpoint_every, "write a checkpoint every N steps (atomically)");
  cmd->add_option("--checkpoint", o->checkpoint, "checkpoint file (default: the run log's name + .ckpt, or fpscope-train.ckpt)");
  cmd->add_flag("--resume", o->resume, "go on from the checkpoint with the same options; the run log is cut back to it");
  cmd->callback([o] { run_train(*o); });
}

}  // namespace fpscope::cli
