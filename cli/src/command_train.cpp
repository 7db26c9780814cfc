// `fpscope train`: mixed-precision training of an MLP or a GPT on the CPU or CUDA backend, recording a run log.
#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "fpscope/gpu/backend_choice.hpp"
#include "fpscope/analyzer/run_log.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/gpu/checkpoint.hpp"
#include "fpscope/gpu/fault_injection.hpp"
#include "fpscope/gpu/loss_scaler.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/analyzer/npy.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/training_defaults.hpp"
#include "fpscope/gpu/training_data.hpp"
#include "fpscope/snapshot/memory_budget.hpp"
#include "fpscope/snapshot/output_file.hpp"
#include "interrupt_watch.hpp"
#include "number_option.hpp"

namespace fpscope::cli {

namespace {

// Numbers are kept as the user typed them and read by number_option.hpp: nothing is clamped.
// The defaults are the app's (training_defaults.hpp): one example, whichever tool starts it.
struct TrainOptions {
  std::string model = training_defaults::model;
  std::string activation = activation_name(training_defaults::activation);
  std::string precision = precision_name(training_defaults::precision);
  std::string round = rounding_mode_name(training_defaults::rounding);
  std::string loss_scale = training_defaults::loss_scale;
  std::string steps = std::to_string(training_defaults::cli_steps);
  // Empty: the model's default (the MLP example's, or the GPT's below).
  std::string batch;
  std::string lr;
  std::string loss_weight;
  std::string record_every = std::to_string(training_defaults::record_every);
  std::string data = training_defaults::data;
  std::string backend = "auto";
  std::string record_blocks;  // FORMAT or FORMAT:RULE
  std::string recipe = "none";
  std::string threads = "0";
  std::string fp8_format = "hybrid";
  std::string amax_history = "16";
  std::string fp8_margin = "0";
  std::string weight_blocks = "1d";  // block-scaled recipes: 1d, or 2d (square tiles)
  std::string gradient_round;        // recipes: the output gradients' rounding, where not --round's
  bool hadamard = false;             // block-scaled recipes: the weight gradient's operands through a random Hadamard transform
  std::string optimizer;
  std::string momentum = "0.9";
  std::string weight_decay = "0";
  std::string betas = "0.9,0.999";
  std::string eps = "1e-8";
  std::string clip_grad_norm = "0";
  std::string seed = std::to_string(training_defaults::seed);
  std::optional<std::string> out;
  std::vector<std::string> inject;
  std::string checkpoint_every = "0";
  std::optional<std::string> checkpoint;
  std::optional<std::string> export_inputs;
  bool resume = false;
};

// A GPT's defaults where the options are not given (training_defaults::gpt), as option text.
namespace gpt_defaults {
const std::string batch = std::to_string(training_defaults::gpt::batch);
const std::string learning_rate = fmt::format("{:g}", training_defaults::gpt::learning_rate);
const std::string loss_weight = fmt::format("{:g}", std::ldexp(1.0, training_defaults::gpt::loss_weight_log2));
const std::string optimizer = optimizer_name(training_defaults::gpt::optimizer);
}  // namespace gpt_defaults

// The parameters as NumPy arrays in PyTorch's layouts (an MLP's fcN.weight out x in, fcN.bias; a
// GPT's gpt_parameters names and shapes, vectors one-dimensional), row-major as .npy wants.
void export_parameters(const std::filesystem::path& folder, const MlpConfig& config, const TrainerState& state) {
  const auto write = [&](const std::string& name, const Eigen::MatrixXf& m, bool vector) {
    const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> row_major = m;
    std::vector<std::uint64_t> shape{static_cast<std::uint64_t>(m.rows())};
    if (!vector) shape.push_back(static_cast<std::uint64_t>(m.cols()));
    const auto* bytes = reinterpret_cast<const unsigned char*>(row_major.data());
    write_output(folder / (name + ".npy"), npy_bytes("<f4", shape, {bytes, static_cast<std::size_t>(m.size()) * sizeof(float)}));
  };
  if (config.gpt) {
    const std::vector<GptParameter> layout = gpt_parameters(*config.gpt);
    for (std::size_t p = 0; p < layout.size(); ++p) write(layout[p].name, state.weights[p], layout[p].cols == 1);
    return;
  }
  for (std::size_t l = 0; l < state.weights.size(); ++l) {
    write("fc" + std::to_string(l + 1) + ".weight", state.weights[l], false);
    write("fc" + std::to_string(l + 1) + ".bias", state.biases[l], true);
  }
}

// A step's batch: an MLP's inputs as float32 and labels as int32; a GPT's token ids and targets as
// int32, batch x context each.
void export_batch(const std::filesystem::path& folder, std::int64_t step, const MlpConfig& config, const Eigen::MatrixXf& inputs,
                  const std::vector<int>& labels) {
  const std::string suffix = fmt::format("-{:06}.npy", step);
  const std::vector<std::uint64_t> input_shape{static_cast<std::uint64_t>(inputs.rows()), static_cast<std::uint64_t>(inputs.cols())};
  const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> row_major = inputs;
  if (config.gpt) {
    const std::vector<std::int32_t> tokens(row_major.data(), row_major.data() + row_major.size());
    write_output(folder / ("inputs" + suffix),
                 npy_bytes("<i4", input_shape, {reinterpret_cast<const unsigned char*>(tokens.data()), tokens.size() * sizeof(std::int32_t)}));
  } else {
    write_output(folder / ("inputs" + suffix), npy_bytes("<f4", input_shape, {reinterpret_cast<const unsigned char*>(row_major.data()),
                                                                                static_cast<std::size_t>(row_major.size()) * sizeof(float)}));
  }
  const std::vector<std::int32_t> targets(labels.begin(), labels.end());
  std::vector<std::uint64_t> target_shape{static_cast<std::uint64_t>(labels.size())};
  if (config.gpt) target_shape = input_shape;
  write_output(folder / ("targets" + suffix),
               npy_bytes("<i4", target_shape, {reinterpret_cast<const unsigned char*>(targets.data()), targets.size() * sizeof(std::int32_t)}));
}

template <typename Parse>
auto parse_or_usage(Parse parse) {
  try {
    return parse();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

// A run longer than this is a typo, not a plan (10^12 steps at 10^6 steps/s is 11 days).
constexpr std::int64_t max_steps = 1'000'000'000'000;

// After a SIGINT the step in progress finishes, the log is left whole, and train exits with this.
constexpr int interrupted_status = 130;

void run_train(const TrainOptions& o) {
  // Ctrl-C is watched for from here, before the run starts any thread (interrupt_watch.hpp).
  InterruptWatch interrupts;
  // Every option is read and checked before any file is touched.
  MlpConfig config;
  const bool gpt = names_gpt(o.model);
  if (gpt) {
    config.gpt = parse_or_usage([&] { return parse_gpt_shape(o.model); });
    if (o.activation != activation_name(training_defaults::activation))
      throw UsageError("--activation sets an MLP's; a GPT's blocks use GELU");
  } else {
    config.layer_sizes = parse_or_usage([&] { return parse_layer_sizes(o.model); });
  }
  config.activation = parse_or_usage([&] { return parse_activation(o.activation); });
  const std::string lr = !o.lr.empty() ? o.lr : gpt ? gpt_defaults::learning_rate : fmt::format("{:g}", training_defaults::learning_rate);
  const std::string loss_weight =
      !o.loss_weight.empty() ? o.loss_weight : gpt ? gpt_defaults::loss_weight : fmt::format("2^{}", training_defaults::loss_weight_log2);
  const std::string batch_text = !o.batch.empty() ? o.batch : gpt ? gpt_defaults::batch : std::to_string(training_defaults::batch);
  const std::string optimizer = !o.optimizer.empty() ? o.optimizer : gpt ? gpt_defaults::optimizer : optimizer_name(training_defaults::optimizer);
  config.precision = parse_or_usage([&] { return parse_precision(o.precision); });
  config.rounding = parse_rounding_mode(o.round);
  config.scaler = parse_or_usage([&] { return parse_loss_scale(o.loss_scale); });
  if (config.precision == Precision::fp32 && o.loss_scale == "dynamic") config.scaler = LossScalerConfig::none();
  config.learning_rate = parse_positive_float_option("--lr", lr);
  config.loss_weight = parse_or_usage([&] {
    const std::optional<double> weight = parse_scale_factor(loss_weight);
    if (!weight) throw std::invalid_argument("--loss-weight '" + printable_text(loss_weight) + "' is not 2^k or a positive number that float32 holds");
    return static_cast<float>(*weight);
  });
  config.seed = parse_integer_option<std::uint64_t>("--seed", o.seed, 0, std::numeric_limits<std::uint64_t>::max());
  const auto steps = parse_integer_option<std::int64_t>("--steps", o.steps, 1, max_steps);
  const auto batch = parse_integer_option<int>("--batch", batch_text, 1, std::numeric_limits<int>::max());
  const auto record_every = parse_integer_option<std::int64_t>("--record-every", o.record_every, 1, max_steps);
  const auto checkpoint_every = parse_integer_option<std::int64_t>("--checkpoint-every", o.checkpoint_every, 0, max_steps);
  if (o.backend != "auto" && o.backend != "cpu" && o.backend != "cuda")
    throw UsageError("unknown --backend '" + printable_text(o.backend) + "': expected auto, cpu or cuda");
  if (!o.record_blocks.empty()) config.record_blocks = parse_or_usage([&] { return parse_block_recording(o.record_blocks); });
  config.recipe.recipe = parse_or_usage([&] { return parse_gemm_recipe(o.recipe); });
  set_gemm_threads(parse_integer_option<int>("--threads", o.threads, 0, 4096));
  if (o.fp8_format != "hybrid" && o.fp8_format != "e4m3")
    throw UsageError("unknown --fp8-format '" + printable_text(o.fp8_format) + "': expected hybrid or e4m3");
  config.recipe.all_e4m3 = o.fp8_format == "e4m3";
  config.recipe.amax_history = parse_integer_option<int>("--amax-history", o.amax_history, 1, 1024);
  config.recipe.margin = parse_integer_option<int>("--fp8-margin", o.fp8_margin, 0, 32);
  if (!per_tensor_fp8(config.recipe.recipe) && o.fp8_format != "hybrid")
    throw UsageError("--fp8-format sets the FP8 recipes: use --recipe fp8-delayed, fp8-current or fp8-unscaled");
  if (config.recipe.recipe != GemmRecipe::fp8_delayed && o.amax_history != "16")
    throw UsageError("--amax-history is the delayed recipe's: use --recipe fp8-delayed");
  if (config.recipe.recipe != GemmRecipe::fp8_delayed && config.recipe.recipe != GemmRecipe::fp8_current && o.fp8_margin != "0")
    throw UsageError("--fp8-margin sets the scaled FP8 recipes: use --recipe fp8-delayed or fp8-current");
  config.recipe.square_weight_tiles = parse_or_usage([&] { return parse_weight_blocks(o.weight_blocks); });
  if (config.recipe.square_weight_tiles && !block_scaled(config.recipe.recipe))
    throw UsageError("--weight-blocks 2d sets the block-scaled recipes: use --recipe nvfp4, mxfp8, mxfp6 or mxfp4");
  config.recipe.hadamard_weight_gradients = o.hadamard;
  if (o.hadamard && !block_scaled(config.recipe.recipe))
    throw UsageError("--hadamard turns the weight gradient's operands for the block-scaled recipes: use --recipe nvfp4, mxfp8, mxfp6 or mxfp4");
  if (!o.gradient_round.empty()) {
    if (config.recipe.recipe == GemmRecipe::none)
      throw UsageError("--gradient-round sets how a recipe's output-gradient operands round: use it with --recipe");
    config.recipe.gradient_rounding = parse_rounding_mode(o.gradient_round);
  }
  config.optimizer.kind = parse_or_usage([&] { return parse_optimizer(optimizer); });
  const auto fraction = [](const char* option, const std::string& text) {  // in [0, 1)
    const float value = text == "0" ? 0.0f : parse_positive_float_option(option, text);
    if (!(value < 1.0f)) throw UsageError(std::string(option) + " '" + printable_text(text) + "' must be below 1");
    return value;
  };
  config.optimizer.momentum = fraction("--momentum", o.momentum);
  config.optimizer.weight_decay = o.weight_decay == "0" ? 0.0f : parse_positive_float_option("--weight-decay", o.weight_decay);
  {
    const auto comma = o.betas.find(',');
    if (comma == std::string::npos) throw UsageError("--betas '" + printable_text(o.betas) + "' is not B1,B2 (such as 0.9,0.999)");
    config.optimizer.beta1 = fraction("--betas", o.betas.substr(0, comma));
    config.optimizer.beta2 = fraction("--betas", o.betas.substr(comma + 1));
  }
  config.optimizer.epsilon = parse_positive_float_option("--eps", o.eps);
  config.optimizer.clip_grad_norm = o.clip_grad_norm == "0" ? 0.0f : parse_positive_float_option("--clip-grad-norm", o.clip_grad_norm);
  if (config.optimizer.kind != OptimizerKind::adamw && config.optimizer.weight_decay != 0.0f)
    throw UsageError("--weight-decay is AdamW's decoupled decay: use --optimizer adamw");
  std::vector<FaultInjection> faults;
  const std::vector<std::string> gpt_weights = gpt ? gpt_recorded_weights(*config.gpt) : std::vector<std::string>{};
  for (const std::string& text : o.inject) {
    faults.push_back(parse_or_usage([&] {
      return gpt ? parse_fault_injection(text, gpt_weights) : parse_fault_injection(text, static_cast<int>(config.layer_sizes.size()) - 1);
    }));
    if (faults.back().step >= steps)
      throw UsageError(fmt::format("--inject {} is at step {}, but the run's steps are 0 to {}", describe(faults.back()), faults.back().step, steps - 1));
  }
  if (o.checkpoint && o.checkpoint->empty()) throw OutputError("--checkpoint is empty: name a file");
  try {
    check_memory_budget(gpt ? estimated_gpt_training_bytes(*config.gpt, batch) : estimated_training_bytes(config.layer_sizes, batch),
                        fmt::format("training {} at batch {}", o.model, batch));
  } catch (const MemoryBudgetError& e) {
    throw UsageError(e.what());
  }

  // The outputs, resolved and checked against each other and the inputs before anything is written.
  const std::string checkpoint_path = o.checkpoint ? *o.checkpoint : o.out && *o.out != "-" ? *o.out + ".ckpt" : std::string("fpscope-train.ckpt");
  std::vector<OutputTarget> outputs;
  if (o.out) outputs.push_back(resolve_output(*o.out, "--out"));
  if (checkpoint_every > 0) outputs.push_back(resolve_output(checkpoint_path, "--checkpoint"));
  std::optional<TrainingData> data;
  try {
    data.emplace(o.data, config);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--data: ") + e.what());
  }
  check_outputs(outputs, data->files());
  if (o.out && !o.resume) check_replaces_only_a_run_log(outputs.front());
  if (checkpoint_every > 0) check_replaces_only_a_checkpoint(outputs.back());
  std::optional<std::filesystem::path> export_folder;
  if (o.export_inputs) {
    export_folder = *o.export_inputs;
    std::error_code error;
    const bool exists = std::filesystem::exists(*export_folder, error);
    if (o.export_inputs->empty() || (exists && (!std::filesystem::is_directory(*export_folder, error) || !std::filesystem::is_empty(*export_folder, error))))
      throw OutputError("--export-inputs " + printable_text(*o.export_inputs, 200) + " is not a new or empty folder: name one, nothing is overwritten");
  }
  const OutputTarget* log_target = o.out ? &outputs.front() : nullptr;
  const OutputTarget* checkpoint_target = checkpoint_every > 0 ? &outputs.back() : nullptr;

  const std::unique_ptr<TrainerBackend> backend = parse_or_usage([&] { return make_trainer_backend(o.backend, config); });
  TrainerBackend& trainer = *backend;
  std::string injected;
  for (const FaultInjection& fault : faults) {
    trainer.inject(fault);
    injected += " " + describe(fault);
  }
  RunHeader header;
  header.source = "fpscope train";
  header.model = gpt ? gpt_shape_name(*config.gpt) : o.model + " " + activation_name(config.activation);
  header.precision = precision_name(config.precision);
  header.format = format_name(trainer.format());
  header.rounding = rounding_mode_name(config.rounding);
  header.scaler = describe(config.scaler);
  header.optimizer = describe(config.optimizer);
  if (config.recipe.recipe != GemmRecipe::none) header.recipe = recipe_description(config.recipe);
  header.products = products_description(trainer.name());
  // What a checkpoint must agree with to be resumed: everything that decides the bits, the
  // products' kernels last (a checkpoint from before they were recorded has none to compare).
  RunHeader options_header = header;
  options_header.products.clear();
  const std::string products_part = "|products " + header.products;
  std::string settings = fmt::format(
      "{}|backend {}|batch {}|lr {}|loss weight {}|record-every {}|record-blocks {}|optimizer {} momentum {} betas {},{} eps {} decay {} clip {}|data {}|seed {}|inject{}|log {}{}",
      run_header_line(options_header), trainer.name(), batch, config.learning_rate, config.loss_weight, record_every, o.record_blocks,
      optimizer_name(config.optimizer.kind), config.optimizer.momentum, config.optimizer.beta1, config.optimizer.beta2, config.optimizer.epsilon,
      config.optimizer.weight_decay, config.optimizer.clip_grad_norm, o.data, config.seed, injected, o.out.value_or(""), products_part);
  std::int64_t first_step = 0;
  std::optional<RunLogAppender> log;
  if (o.resume) {
    TrainingCheckpoint checkpoint;
    try {
      checkpoint = read_checkpoint(checkpoint_path);
    } catch (const CheckpointError& e) {
      throw UsageError(std::string(e.what()) + ": cannot --resume", 1);
    }
    const std::size_t their_products = checkpoint.settings.rfind("|products ");
    const std::string their_options = checkpoint.settings.substr(0, their_products);
    if (their_options != settings.substr(0, settings.size() - products_part.size()))
      throw UsageError("checkpoint " + printable_text(checkpoint_path, 200) + " was written by a run with other settings: resume with the same options", 1);
    if (their_products != std::string::npos && checkpoint.settings.substr(their_products) != products_part)
      throw UsageError("checkpoint " + printable_text(checkpoint_path, 200) + " was written where the products ran in other kernels (" +
                           printable_text(checkpoint.settings.substr(their_products + products_part.find(' ') + 1), 200) + "), not here (" +
                           header.products + "), and they round differently: resume it where it was written, or with its FPSCOPE_FLOAT32_PRODUCTS and FPSCOPE_BF16_PRODUCTS",
                       1);
    // A checkpoint from before runs named their products goes on in its log as it began, a header
    // without them, and so do the checkpoints this run writes.
    if (their_products == std::string::npos) {
      header.products.clear();
      settings = their_options;
    }
    trainer.restore(checkpoint.trainer);
    data->restore_state(checkpoint.data_state);
    header.run_id = checkpoint.run_id;
    if (log_target) log.emplace(*log_target, header, RunLogPosition{checkpoint.run_log_bytes, checkpoint.run_log_crc32});
    first_step = checkpoint.trainer.steps;
  } else {
    header.run_id = new_run_id();
    if (log_target) log.emplace(*log_target, header);
  }
  // With the run log on standard output, the summary goes to standard error.
  std::FILE* summary = log_target && log_target->kind == OutputTarget::Kind::descriptor && log_target->descriptor == 1 ? stderr : stdout;

  // Progress is for a person watching: shown on a terminal, never in a log of stderr.
  const bool show_progress = ::isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  if (export_folder) {
    std::error_code error;
    std::filesystem::create_directories(*export_folder, error);
    if (error) throw OutputError("cannot make folder " + printable_text(export_folder->string(), 200) + ": " + error.message());
    export_parameters(*export_folder, config, trainer.state());
  }
  Eigen::MatrixXf inputs;
  std::vector<int> labels;
  StepResult last;
  std::int64_t step = first_step;
  bool interrupted = false;
  for (; step < steps && !(interrupted = interrupts.interrupted()); ++step) {
    data->next_batch(batch, inputs, labels);
    if (export_folder) export_batch(*export_folder, step, config, inputs, labels);
    const bool report = step % 10 == 0 || step + 1 == steps;
    // A run log holds a step record for every step: the loss and scale are read back each step
    // then (on the CUDA backend that is a wait for the device per step).
    last = trainer.step(inputs, labels, log.has_value() && step % record_every == 0, report || log.has_value());
    if (last.snapshot) log->append(*last.snapshot);
    else if (log) log->append_step({step, last.loss, last.loss_scale, last.skipped, last.scaling});
    if (checkpoint_target && (step + 1) % checkpoint_every == 0) {
      if (log) log->sync();  // the checkpoint never covers bytes a power cut could take back
      const RunLogPosition position = log ? log->position() : RunLogPosition{};
      write_checkpoint(*checkpoint_target, {settings, trainer.state(), data->save_state(), header.run_id, position.bytes, position.crc32});
    }
    if (report && show_progress) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      fmt::print(stderr, "\r{} step {:>7}/{}  loss {:.4f}  scale {:g}  skipped {}  {:.1f} steps/s   ", trainer.name(), step + 1, steps,
                 last.loss, last.loss_scale, trainer.scaler_state().skipped_steps,
                 static_cast<double>(step + 1 - first_step) / std::max(seconds, 1e-9));
    }
  }
  if (show_progress) fmt::print(stderr, "\n");
  if (log) log->sync();  // the whole log durable before train says it is done (or interrupted)
  const LossScalerState scaler = trainer.scaler_state();
  if (interrupted)
    throw UsageError(fmt::format("interrupted after step {} of {}: the run log is whole up to it{}", step, steps,
                                 checkpoint_target ? "; --resume goes on from the last checkpoint" : ""),
                     interrupted_status);
  fmt::print(summary, "{} steps, final loss {:.6f}, loss scale {:g}, skipped steps {}\n", step, last.loss, scaler.scale, scaler.skipped_steps);
}

}  // namespace

void add_train(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train an MLP or a GPT in fp32 or mixed precision (CPU or CUDA backend), recording exponent histograms");
  cmd->add_option("--model", o->model,
                  "an MLP's layer sizes, input to classes, or a GPT: gpt or gpt:layers=L,width=D,heads=H,context=T[,vocab=V] "
                  "(defaults 2, 64, 4, 32, 256)")
      ->capture_default_str();
  cmd->add_option("--activation", o->activation, "relu, gelu or tanh")->capture_default_str();
  cmd->add_option("--precision", o->precision, "fp32, fp16, bf16 or fp16-pure")->capture_default_str();
  cmd->add_option("-r,--round", o->round, "rounding mode of every low-precision cast")->capture_default_str();
  cmd->add_option("--loss-scale", o->loss_scale, "none, dynamic (GradScaler's rule), or a static scale: 2^k or a number")->capture_default_str();
  cmd->add_option("--steps", o->steps, "training steps")->capture_default_str();
  cmd->add_option("--batch", o->batch, fmt::format("batch size (sequences for a GPT; default {}, a GPT {})", training_defaults::batch, gpt_defaults::batch));
  cmd->add_option("--lr", o->lr, fmt::format("learning rate (default {:g}, a GPT {})", training_defaults::learning_rate, gpt_defaults::learning_rate));
  cmd->add_option("--loss-weight", o->loss_weight,
                  fmt::format("the loss is multiplied by this before the backward pass, as one term of a multi-task loss often is: 2^k or a "
                              "number (default 2^{}, a GPT {})", training_defaults::loss_weight_log2, gpt_defaults::loss_weight));
  cmd->add_option("--record-every", o->record_every, "record a snapshot every N steps")->capture_default_str();
  cmd->add_option("--optimizer", o->optimizer,
                  "sgd, momentum or adamw (fp32 states; default sgd, a GPT adamw)");
  cmd->add_option("--momentum", o->momentum, "momentum's factor: b = momentum * b + g")->capture_default_str();
  cmd->add_option("--betas", o->betas, "AdamW's B1,B2")->capture_default_str();
  cmd->add_option("--eps", o->eps, "AdamW's epsilon")->capture_default_str();
  cmd->add_option("--weight-decay", o->weight_decay, "AdamW's decoupled weight decay")->capture_default_str();
  cmd->add_option("--clip-grad-norm", o->clip_grad_norm,
                  "clip the unscaled gradients' global L2 norm to this (0: off); skipped steps are never clipped")->capture_default_str();
  cmd->add_option("--threads", o->threads,
                  "CPU backend: threads for the matrix products and the element-wise passes, 0 for all cores; "
                  "any count gives the same bits")
      ->capture_default_str();
  cmd->add_option("--recipe", o->recipe,
                  "GEMM operands: none, fp8-delayed, fp8-current (per-tensor FP8 scaling, as Transformer Engine), fp8-unscaled, mxfp8, mxfp6, mxfp4 "
                  "(OCP MX blocks along each product's reduction axis) or nvfp4")
      ->capture_default_str();
  cmd->add_option("--fp8-format", o->fp8_format, "hybrid (E4M3 inputs and weights, E5M2 gradients) or e4m3 (all three)")->capture_default_str();
  cmd->add_option("--amax-history", o->amax_history, "fp8-delayed: the steps of amax its scale looks back over, 1 ..= 1024")
      ->capture_default_str();
  cmd->add_option("--fp8-margin", o->fp8_margin, "FP8: the scale is divided by 2^margin, 0 ..= 32")->capture_default_str();
  cmd->add_option("--weight-blocks", o->weight_blocks,
                  "block-scaled recipes: 1d (the weights blocked along each product's reduction axis) or 2d (in square tiles of the block size, "
                  "16x16 for nvfp4, as NVIDIA's NVFP4 recipe: one quantization for both products)")
      ->capture_default_str();
  cmd->add_flag("--hadamard", o->hadamard,
                "block-scaled recipes: the weight gradient's two operands through a 16-point random Hadamard transform along the batch before "
                "they are quantized (NVIDIA's NVFP4 recipe; signs from --seed)");
  cmd->add_option("--gradient-round", o->gradient_round,
                  "recipes: how the output-gradient operands' elements round (default: --round's mode); NVIDIA's NVFP4 recipe: stochastic, with --round rne");
  cmd->add_option("--record-blocks", o->record_blocks,
                  "also record what a block-scaled format would do to every recorded tensor: FORMAT or FORMAT:RULE (mxfp8-e4m3, mxfp4:even, nvfp4, ...)");
  cmd->add_option("--data", o->data, "synthetic (embedded: clusters for an MLP, repeated motifs for a GPT), mnist:DIR with train-images-idx3-ubyte and "
                  "train-labels-idx1-ubyte (.gz or not) for an MLP, or text:FILE for a GPT (bytes as tokens)")->capture_default_str();
  cmd->add_option("--backend", o->backend, "auto (cuda where a device answers, else cpu; cpu too for what the CUDA backend lacks: --weight-blocks 2d, --hadamard), cpu or cuda")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed: the same seed gives the same bits")->capture_default_str();
  cmd->add_option_function<std::string>("--out", [o](const std::string& path) { o->out = path; },
                                        "run log to write as training goes (JSON Lines; - for standard output)");
  cmd->add_option("--inject", o->inject, "put nan or inf into a layer's weight gradient at a step: nan@fc2:100, or for a GPT a weight by name: nan@h0.attn.qkv:100 (repeatable)");
  cmd->add_option("--checkpoint-every", o->checkpoint_every, "write a checkpoint every N steps (atomically)")->capture_default_str();
  cmd->add_option_function<std::string>("--checkpoint", [o](const std::string& path) { o->checkpoint = path; },
                                        "checkpoint file (default: the run log's name + .ckpt, or fpscope-train.ckpt)");
  cmd->add_option_function<std::string>("--export-inputs", [o](const std::string& path) { o->export_inputs = path; },
                                        "write the starting parameters (NAME.npy, PyTorch's names and layouts) and every step's batch "
                                        "(inputs-STEP.npy, targets-STEP.npy) into this new folder, to replay the run in another framework");
  cmd->add_flag("--resume", o->resume, "go on from the checkpoint with the same options; the run log is cut back to it");
  cmd->callback([o] { run_train(*o); });
}

}  // namespace fpscope::cli
