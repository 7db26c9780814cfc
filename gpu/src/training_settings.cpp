// Reading and checking a training run's options: the one parser fpscope train and fpscope-gui share.
#include "fpscope/gpu/training_settings.hpp"

#include <filesystem>

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "fpscope/core/names.hpp"
#include "fpscope/core/option_number.hpp"
#include "fpscope/core/printable_text.hpp"
#include "fpscope/gpu/backend_choice.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/training_defaults.hpp"
#include "fpscope/snapshot/memory_budget.hpp"

namespace fpscope {

namespace {

constexpr std::int64_t max_steps = max_training_steps;

std::string default_learning_rate(bool gpt) {
  return fmt::format("{:g}", gpt ? training_defaults::gpt::learning_rate : training_defaults::learning_rate);
}
std::string default_loss_weight(bool gpt) {
  return fmt::format("2^{}", gpt ? training_defaults::gpt::loss_weight_log2 : training_defaults::loss_weight_log2);
}
std::string default_batch(bool gpt) { return std::to_string(gpt ? training_defaults::gpt::batch : training_defaults::batch); }
std::string default_optimizer(bool gpt) { return optimizer_name(gpt ? training_defaults::gpt::optimizer : training_defaults::optimizer); }

// A fraction in [0, 1): momentum, AdamW's betas.
float parse_fraction(const char* option, const std::string& text) {
  const float value = text == "0" ? 0.0f : parse_positive_float_option(option, text);
  if (!(value < 1.0f)) throw TrainingOptionError(std::string(option) + " '" + printable_text(text) + "' must be below 1");
  return value;
}

// 0 (off), or a finite positive float32.
float parse_zero_or_positive(const char* option, const std::string& text) {
  return text == "0" ? 0.0f : parse_positive_float_option(option, text);
}

TrainingSettings parse(const TrainingOptions& o) {
  TrainingSettings settings;
  TrainingConfig& config = settings.config;
  const bool gpt = names_gpt(o.model);
  if (gpt) {
    config.gpt = parse_gpt_shape(o.model);
    if (o.activation) throw TrainingOptionError("--activation sets an MLP's; a GPT's blocks use GELU");
  } else {
    config.layer_sizes = parse_layer_sizes(o.model);
  }
  config.activation = parse_activation(o.activation.value_or(activation_name(training_defaults::activation)));
  config.precision = parse_precision(o.precision);
  config.rounding = parse_rounding_mode(o.round);
  config.scaler = parse_loss_scale(o.loss_scale);
  // fp32 has nothing to flush: GradScaler's rule would only ever grow the scale.
  if (config.precision == Precision::fp32 && config.scaler.kind == LossScalerConfig::Kind::dynamic) config.scaler = LossScalerConfig::none();
  config.learning_rate = parse_positive_float_option("--lr", o.lr.value_or(default_learning_rate(gpt)));
  {
    const std::string text = o.loss_weight.value_or(default_loss_weight(gpt));
    const std::optional<double> weight = parse_scale_factor(text);
    if (!weight) throw TrainingOptionError("--loss-weight '" + printable_text(text) + "' is not 2^k or a positive number that float32 holds");
    config.loss_weight = static_cast<float>(*weight);
  }
  config.seed = parse_integer_option<std::uint64_t>("--seed", o.seed, 0, std::numeric_limits<std::uint64_t>::max());
  settings.steps = parse_integer_option<std::int64_t>("--steps", o.steps, o.endless ? 0 : 1, max_steps);
  settings.batch = parse_integer_option<int>("--batch", o.batch.value_or(default_batch(gpt)), 1, std::numeric_limits<int>::max());
  settings.record_every = parse_integer_option<std::int64_t>("--record-every", o.record_every, 1, max_steps);
  settings.threads = parse_integer_option<int>("--threads", o.threads, 0, 4096);
  settings.pause_at_step = parse_integer_option<std::int64_t>("--pause-at-step", o.pause_at_step, 0, max_steps);
  settings.shadow = o.shadow;
  if (o.backend != "auto" && o.backend != "cpu" && o.backend != "cuda")
    throw TrainingOptionError("unknown --backend '" + printable_text(o.backend) + "': expected auto, cpu or cuda");
  settings.backend = o.backend;
  if (o.data.empty()) throw TrainingOptionError("--data is empty: name synthetic, mnist:DIR or text:FILE");
  settings.data = o.data;
  if (o.record_blocks) config.record_blocks = parse_block_recording(*o.record_blocks);

  RecipeConfig& recipe = config.recipe;
  recipe.recipe = parse_gemm_recipe(o.recipe);
  const std::string fp8_format = o.fp8_format.value_or("hybrid");
  if (fp8_format != "hybrid" && fp8_format != "e4m3")
    throw TrainingOptionError("unknown --fp8-format '" + printable_text(fp8_format) + "': expected hybrid or e4m3");
  if (o.fp8_format && !per_tensor_fp8(recipe.recipe))
    throw TrainingOptionError("--fp8-format sets the FP8 recipes: use --recipe fp8-delayed, fp8-current or fp8-unscaled");
  recipe.all_e4m3 = fp8_format == "e4m3";
  recipe.amax_history = parse_integer_option<int>("--amax-history", o.amax_history.value_or("16"), 1, 1024);
  if (o.amax_history && recipe.recipe != GemmRecipe::fp8_delayed)
    throw TrainingOptionError("--amax-history is the delayed recipe's: use --recipe fp8-delayed");
  recipe.margin = parse_integer_option<int>("--fp8-margin", o.fp8_margin.value_or("0"), 0, 32);
  if (o.fp8_margin && recipe.recipe != GemmRecipe::fp8_delayed && recipe.recipe != GemmRecipe::fp8_current)
    throw TrainingOptionError("--fp8-margin sets the scaled FP8 recipes: use --recipe fp8-delayed or fp8-current");
  recipe.square_weight_tiles = parse_weight_blocks(o.weight_blocks.value_or("1d"));
  if (recipe.square_weight_tiles && !block_scaled(recipe.recipe))
    throw TrainingOptionError("--weight-blocks 2d sets the block-scaled recipes: use --recipe nvfp4, mxfp8, mxfp6 or mxfp4");
  recipe.hadamard_weight_gradients = o.hadamard;
  if (o.hadamard && !block_scaled(recipe.recipe))
    throw TrainingOptionError(
        "--hadamard turns the weight gradient's operands for the block-scaled recipes: use --recipe nvfp4, mxfp8, mxfp6 or mxfp4");
  if (o.gradient_round) {
    if (recipe.recipe == GemmRecipe::none)
      throw TrainingOptionError("--gradient-round sets how a recipe's output-gradient operands round: use it with --recipe");
    recipe.gradient_rounding = parse_rounding_mode(*o.gradient_round);
  }

  OptimizerConfig& optimizer = config.optimizer;
  optimizer.kind = parse_optimizer(o.optimizer.value_or(default_optimizer(gpt)));
  optimizer.momentum = parse_fraction("--momentum", o.momentum.value_or("0.9"));
  optimizer.weight_decay = parse_zero_or_positive("--weight-decay", o.weight_decay.value_or("0"));
  {
    const std::string betas = o.betas.value_or("0.9,0.999");
    const auto comma = betas.find(',');
    if (comma == std::string::npos) throw TrainingOptionError("--betas '" + printable_text(betas) + "' is not B1,B2 (such as 0.9,0.999)");
    optimizer.beta1 = parse_fraction("--betas", betas.substr(0, comma));
    optimizer.beta2 = parse_fraction("--betas", betas.substr(comma + 1));
  }
  optimizer.epsilon = parse_positive_float_option("--eps", o.eps.value_or("1e-08"));
  optimizer.clip_grad_norm = parse_zero_or_positive("--clip-grad-norm", o.clip_grad_norm);
  if (optimizer.kind != OptimizerKind::adamw && optimizer.weight_decay != 0.0f)
    throw TrainingOptionError("--weight-decay is AdamW's decoupled decay: use --optimizer adamw");

  const std::vector<std::string> gpt_weights = gpt ? gpt_recorded_weights(*config.gpt) : std::vector<std::string>{};
  for (const std::string& text : o.inject) {
    settings.faults.push_back(gpt ? parse_fault_injection(text, gpt_weights)
                                  : parse_fault_injection(text, static_cast<int>(config.layer_sizes.size()) - 1));
    const FaultInjection& fault = settings.faults.back();
    if (settings.steps > 0 && fault.step >= settings.steps)
      throw TrainingOptionError(
          fmt::format("--inject {} is at step {}, but the run's steps are 0 to {}", describe(fault), fault.step, settings.steps - 1));
  }
  try {
    check_memory_budget(gpt ? estimated_gpt_training_bytes(*config.gpt, settings.batch) : estimated_training_bytes(config.layer_sizes, settings.batch),
                        fmt::format("training {} at batch {}", model_name(config), settings.batch));
  } catch (const MemoryBudgetError& e) {
    throw TrainingOptionError(e.what());
  }
  return settings;
}

}  // namespace

TrainingOptions::TrainingOptions()
    : model(training_defaults::model),
      precision(precision_name(training_defaults::precision)),
      round(rounding_mode_name(training_defaults::rounding)),
      loss_scale(training_defaults::loss_scale),
      steps(std::to_string(training_defaults::cli_steps)),
      record_every(std::to_string(training_defaults::record_every)),
      data(training_defaults::data),
      seed(std::to_string(training_defaults::seed)) {}

TrainingSettings parse_training_options(const TrainingOptions& options) {
  try {
    return parse(options);
  } catch (const TrainingOptionError&) {
    throw;
  } catch (const std::invalid_argument& e) {  // the names' and numbers' readers: one sentence each
    throw TrainingOptionError(e.what());
  } catch (const UnknownNameError& e) {
    throw TrainingOptionError(e.what());
  }
}

const std::vector<TrainingOptionSpec>& training_option_specs() {
  using O = TrainingOptions;
  static const std::vector<TrainingOptionSpec> specs = [] {
    std::vector<TrainingOptionSpec> s;
    const auto text = [&](std::string name, std::string help, std::string O::*member, bool in_app = true) {
      s.push_back({std::move(name), std::move(help), member, nullptr, nullptr, nullptr, true, in_app, true});
    };
    const auto optional = [&](std::string name, std::string help, std::optional<std::string> O::*member, bool in_app = true) {
      s.push_back({std::move(name), std::move(help), nullptr, member, nullptr, nullptr, false, in_app, true});
    };
    text("--model", "an MLP's layer sizes, input to classes, or a GPT: gpt or gpt:layers=L,width=D,heads=H,context=T[,vocab=V] "
                    "(defaults 2, 64, 4, 32, 256)", &O::model);
    optional("--activation", fmt::format("an MLP's: relu, gelu or tanh (default {}; a GPT's blocks use GELU)",
                                         activation_name(training_defaults::activation)), &O::activation);
    text("--precision", "fp32, fp16, bf16 or fp16-pure", &O::precision);
    text("-r,--round", "rounding mode of every low-precision cast", &O::round);
    text("--loss-scale", "none, dynamic (GradScaler's rule), or a static scale: 2^k or a number", &O::loss_scale);
    text("--steps", "training steps", &O::steps);
    optional("--batch", fmt::format("batch size (sequences for a GPT; default {}, a GPT {})", default_batch(false), default_batch(true)), &O::batch);
    optional("--lr", fmt::format("learning rate (default {}, a GPT {})", default_learning_rate(false), default_learning_rate(true)), &O::lr);
    optional("--loss-weight",
             fmt::format("the loss is multiplied by this before the backward pass, as one term of a multi-task loss often is: 2^k or a "
                         "number (default {}, a GPT {})", default_loss_weight(false), default_loss_weight(true)),
             &O::loss_weight);
    text("--record-every", "record a snapshot every N steps", &O::record_every);
    optional("--optimizer", fmt::format("sgd, momentum or adamw (fp32 states; default {}, a GPT {})", default_optimizer(false), default_optimizer(true)),
             &O::optimizer);
    optional("--momentum", "momentum's factor: b = momentum * b + g (default 0.9)", &O::momentum);
    optional("--betas", "AdamW's B1,B2 (default 0.9,0.999)", &O::betas);
    optional("--eps", "AdamW's epsilon (default 1e-08)", &O::eps);
    optional("--weight-decay", "AdamW's decoupled weight decay (default 0)", &O::weight_decay);
    text("--clip-grad-norm", "clip the unscaled gradients' global L2 norm to this (0: off); skipped steps are never clipped", &O::clip_grad_norm);
    text("--threads", "CPU backend: threads for the matrix products and the element-wise passes, 0 for all cores; any count gives the same bits",
         &O::threads, false);
    text("--recipe", "GEMM operands: none, fp8-delayed, fp8-current (per-tensor FP8 scaling, as Transformer Engine), fp8-unscaled, mxfp8, "
                     "mxfp6, mxfp4 (OCP MX blocks along each product's reduction axis) or nvfp4", &O::recipe);
    optional("--fp8-format", "hybrid (E4M3 inputs and weights, E5M2 gradients; the default) or e4m3 (all three)", &O::fp8_format);
    optional("--amax-history", "fp8-delayed: the steps of amax its scale looks back over, 1 ..= 1024 (default 16)", &O::amax_history);
    optional("--fp8-margin", "FP8: the scale is divided by 2^margin, 0 ..= 32 (default 0)", &O::fp8_margin);
    optional("--weight-blocks", "block-scaled recipes: 1d (the default: the weights blocked along each product's reduction axis) or 2d (in "
                                "square tiles of the block size, 16x16 for nvfp4, as NVIDIA's NVFP4 recipe: one quantization for both products)",
             &O::weight_blocks);
    s.push_back({"--hadamard",
                 "block-scaled recipes: the weight gradient's two operands through a 16-point random Hadamard transform along the batch "
                 "before they are quantized (NVIDIA's NVFP4 recipe; signs from --seed)",
                 nullptr, nullptr, nullptr, &O::hadamard, false, true, true});
    optional("--gradient-round", "recipes: how the output-gradient operands' elements round (default: --round's mode); NVIDIA's NVFP4 "
                                 "recipe: stochastic, with --round rne", &O::gradient_round);
    optional("--record-blocks", "also record what a block-scaled format would do to every recorded tensor: FORMAT or FORMAT:RULE "
                                "(mxfp8-e4m3, mxfp4:even, nvfp4, ...)", &O::record_blocks);
    text("--data", "synthetic (embedded: clusters for an MLP, repeated motifs for a GPT), mnist:DIR with train-images-idx3-ubyte and "
                   "train-labels-idx1-ubyte (.gz or not) for an MLP, or text:FILE for a GPT (bytes as tokens)", &O::data);
    text("--backend", "auto (cuda where a device answers, else cpu; cpu too for what the CUDA backend lacks: --weight-blocks 2d, "
                      "--hadamard), cpu or cuda", &O::backend);
    text("--seed", "seed: the same seed gives the same bits", &O::seed);
    s.push_back({"--inject",
                 "put nan or inf into a layer's weight gradient at a step: nan@fc2:100, or for a GPT a weight by name: "
                 "nan@h0.attn.qkv:100 (repeatable)",
                 nullptr, nullptr, &O::inject, nullptr, false, true, true});
    s.push_back({"--shadow",
                 "on recorded steps, also run the step in float32 without casts (the same weights and batch, scaled by the step's loss "
                 "scale) and record its tensors as '<name> (fp32 shadow)': the values nothing flushed, which analyze and the app advise from",
                 nullptr, nullptr, nullptr, &O::shadow, false, true, true});
    text("--pause-at-step", "pause once this many steps are done, as Pause would (0: never)", &O::pause_at_step);
    s.back().in_cli = false;
    return s;
  }();
  return specs;
}

RunHeader training_run_header(const TrainingSettings& settings, const TrainerBackend& trainer) {
  const TrainingConfig& config = settings.config;
  RunHeader header;
  header.source = training_source;
  header.model = model_name(config);
  header.precision = precision_name(config.precision);
  header.format = format_name(trainer.format());
  header.rounding = rounding_mode_name(config.rounding);
  header.scaler = describe(config.scaler);
  header.optimizer = describe(config.optimizer);
  if (config.recipe.recipe != GemmRecipe::none) header.recipe = recipe_description(config.recipe);
  header.products = products_description(trainer.name());
  return header;
}

std::string checkpoint_settings_text(const TrainingSettings& settings, std::string_view header_line, std::string_view backend,
                                     std::string_view log_path) {
  const TrainingConfig& config = settings.config;
  std::string injected;
  for (const FaultInjection& fault : settings.faults) injected.append(" ").append(describe(fault));  // (not " " + ...: GCC 12's -Wrestrict false alarm)
  const OptimizerConfig& optimizer = config.optimizer;
  return fmt::format(
      "{}|backend {}|batch {}|lr {}|loss weight {}|record-every {}|record-blocks {}|optimizer {} momentum {} betas {},{} eps {} decay {} "
      "clip {}|data {}|seed {}|inject{}|log {}{}",
      header_line, backend, settings.batch, config.learning_rate, config.loss_weight, settings.record_every,
      config.record_blocks ? block_recording_name(*config.record_blocks) : "", optimizer_name(optimizer.kind), optimizer.momentum,
      optimizer.beta1, optimizer.beta2, optimizer.epsilon, optimizer.weight_decay, optimizer.clip_grad_norm, settings.data, config.seed,
      injected, log_path, settings.shadow ? "|shadow" : "");
}

CheckpointSettingsParts split_checkpoint_settings(std::string_view settings) {
  // "|log PATH" comes after every other setting, then "|shadow" and "|products ..." where present.
  const std::size_t at = settings.rfind("|log ");
  if (at == std::string_view::npos) return {"", std::string(settings)};
  std::size_t end = settings.size();
  for (const std::string_view after : {std::string_view("|shadow"), std::string_view("|products ")})
    if (const std::size_t found = settings.find(after, at + 5); found != std::string_view::npos) end = std::min(end, found);
  return {std::string(settings.substr(at + 5, end - at - 5)), std::string(settings.substr(0, at)) + std::string(settings.substr(end))};
}

bool same_run_log(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty() || a == "-" || b == "-") return a == b;
  std::error_code error;
  if (std::filesystem::exists(a, error) && std::filesystem::exists(b, error)) return std::filesystem::equivalent(a, b, error) && !error;
  return std::filesystem::weakly_canonical(a, error) == std::filesystem::weakly_canonical(b, error);
}

}  // namespace fpscope
