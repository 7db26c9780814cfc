// The CPU reference backend: an MLP step in fp32 or mixed precision, with recording.
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/core/printable_text.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <span>

#include "fpscope/core/bulk.hpp"
#include "fpscope/core/names.hpp"
#include "cast_tensor.hpp"
#include "activation_pass.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/parallel.hpp"
#include "recording.hpp"
#include "training_memory.hpp"
#include "parse_choice.hpp"
#include "fpscope/gpu/sgd_update.hpp"
#include "fpscope/gpu/softmax_cross_entropy.hpp"

namespace fpscope {

namespace {

double activate(Activation a, double z) {
  switch (a) {
    case Activation::relu: return z > 0 ? z : 0.0;
    case Activation::gelu: return 0.5 * z * (1.0 + std::erf(z / std::sqrt(2.0)));
    case Activation::tanh: return std::tanh(z);
  }
  return z;
}

// The sum of each column of dz (the bias gradient), each column on its own, on the threads.
Eigen::VectorXf column_sums(const Eigen::MatrixXf& dz) {
  Eigen::VectorXf sums(dz.cols());
  parallel_for(static_cast<std::size_t>(dz.cols()), grain_of(static_cast<std::size_t>(dz.rows())),
               [&](std::size_t first, std::size_t last) {
                 for (auto j = static_cast<Eigen::Index>(first); j < static_cast<Eigen::Index>(last); ++j) sums(j) = dz.col(j).sum();
               });
  return sums;
}

}  // namespace

BlockRecording parse_block_recording(std::string_view text) {
  const auto colon = text.find(':');
  BlockRecording blocks;
  try {
    blocks.format = parse_block_format(text.substr(0, colon));
    if (colon != std::string_view::npos) blocks.rule = parse_scale_rule(text.substr(colon + 1));
  } catch (const UnknownNameError& e) {
    throw std::invalid_argument(std::string("--record-blocks: ") + e.what());
  }
  if (colon != std::string_view::npos && blocks.format.scale != BlockFormat::Scale::e8m0)
    throw std::invalid_argument("--record-blocks " + printable_text(text) + ": a scale rule chooses MX (E8M0) scales; " +
                                block_format_name(blocks.format) + " has one");
  return blocks;
}

std::string block_recording_name(const BlockRecording& blocks) {
  std::string name = block_format_name(blocks.format);
  if (blocks.rule != ScaleRule::floor) {
    name += ':';
    name += scale_rule_name(blocks.rule);
  }
  return name;
}

Activation parse_activation(std::string_view name) { return parse_choice(name, all_activations, activation_name, "activation"); }

std::string activation_name(Activation a) {
  switch (a) {
    case Activation::relu: return "relu";
    case Activation::gelu: return "gelu";
    case Activation::tanh: return "tanh";
  }
  return "?";
}

Precision parse_precision(std::string_view name) { return parse_choice(name, all_precisions, precision_name, "precision"); }

std::string precision_name(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::fp16: return "fp16";
    case Precision::bf16: return "bf16";
    case Precision::fp16_pure: return "fp16-pure";
  }
  return "?";
}

std::string layer_sizes_name(const std::vector<int>& sizes) {
  std::string text;
  for (int size : sizes) {
    if (!text.empty()) text += '-';
    text += std::to_string(size);
  }
  return text;
}

std::string model_name(const TrainingConfig& config) {
  return config.gpt ? gpt_shape_name(*config.gpt) : layer_sizes_name(config.layer_sizes) + " " + activation_name(config.activation);
}

std::vector<int> parse_layer_sizes(std::string_view text) {
  std::vector<int> sizes;
  const std::string message = "model '" + printable_text(text) + "' is not a list of layer sizes such as 784-512-512-10";
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t dash = std::min(text.find('-', start), text.size());
    int size = 0;
    const auto piece = text.substr(start, dash - start);
    const auto result = std::from_chars(piece.data(), piece.data() + piece.size(), size);
    if (piece.empty() || result.ec != std::errc{} || result.ptr != piece.data() + piece.size() || size < 1 || size > max_layer_size)
      throw std::invalid_argument(message);
    sizes.push_back(size);
    start = dash + 1;
  }
  if (sizes.size() < 2) throw std::invalid_argument(message);
  return sizes;
}

std::uint64_t estimated_training_bytes(const std::vector<int>& layer_sizes, std::int64_t batch) {
  // In doubles: the products of user-given sizes overflow 64 bits long before they matter.
  double parameters = 0, activations = 0, widest = 0;
  for (std::size_t l = 0; l < layer_sizes.size(); ++l) {
    activations += layer_sizes[l];
    widest = std::max<double>(widest, layer_sizes[l]);
    if (l + 1 < layer_sizes.size()) parameters += static_cast<double>(layer_sizes[l]) * layer_sizes[l + 1] + layer_sizes[l + 1];
  }
  // Measured peaks (maxrss) lie within -30%..+10% of this: seven copies of the parameters
  // (master, low-precision copy, gradient, update and GEMM temporaries, a checkpoint's state and
  // encoding) and three of a batch's activations and of its widest layer.
  const double bytes = 4.0 * (7.0 * parameters + static_cast<double>(batch) * (3.0 * activations + 3.0 * widest));
  return bytes >= 1.8e19 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(bytes);
}

Format MlpTrainer::format() const { return precision_format(config_.precision); }

MlpTrainer::MlpTrainer(const TrainingConfig& config) : config_(config), scaler_(config.scaler) {
  keep_training_memory();
  ctx_.rounding = config.rounding;
  ctx_.stochastic_seed = config.seed;
  std::mt19937_64 rng(config.seed);
  for (std::size_t l = 0; l + 1 < config.layer_sizes.size(); ++l) {
    const int in = config.layer_sizes[l], out = config.layer_sizes[l + 1];
    // He initialisation for ReLU-like layers, Glorot for tanh.
    const double stddev = config.activation == Activation::tanh ? std::sqrt(1.0 / in) : std::sqrt(2.0 / in);
    std::normal_distribution<float> normal(0.0f, static_cast<float>(stddev));
    Eigen::MatrixXf w(out, in);
    for (Eigen::Index i = 0; i < w.size(); ++i) w.data()[i] = normal(rng);
    weights_.push_back(std::move(w));
    biases_.push_back(Eigen::VectorXf::Zero(out));
  }
  if (config.precision == Precision::fp16_pure)
    for (auto& w : weights_) cast(formats::fp16, true, w, ctx_, nullptr);
  if (per_tensor_fp8(config.recipe.recipe)) fp8_.resize(3 * weights_.size());
}

StepResult MlpTrainer::step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record) {
  const ParallelStep step_scope;  // the workers stay awake between the step's passes
  const std::size_t layers = weights_.size();
  const bool low = config_.precision != Precision::fp32;
  const Format f = format();
  const auto batch = inputs.rows();
  if (inputs.cols() != config_.layer_sizes.front() || static_cast<std::size_t>(batch) != labels.size())
    throw std::invalid_argument("step: inputs are " + std::to_string(inputs.rows()) + "x" + std::to_string(inputs.cols()) +
                                " with " + std::to_string(labels.size()) + " labels; the model takes " +
                                std::to_string(config_.layer_sizes.front()) + " features");
  StepResult result;
  result.loss_scale = scaler_.scale();
  const float scale = static_cast<float>(result.loss_scale);
  Snapshot snapshot;
  std::vector<TensorRecord> activation(layers), activation_gradient(layers), weight(layers), weight_gradient(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    const std::string name = "fc" + std::to_string(l + 1);
    activation[l] = new_record(name, TensorKind::activation);
    activation_gradient[l] = new_record(name, TensorKind::activation_gradient);
    weight[l] = new_record(name, TensorKind::weight);
    weight_gradient[l] = new_record(name, TensorKind::weight_gradient);
  }
  auto recorded = [&](std::vector<TensorRecord>& records, std::size_t l) { return record ? &records[l] : nullptr; };

  const GemmRecipe recipe = config_.recipe.recipe;
  // Each layer's weights and inputs serve its forward product and one backward product: packed
  // for the bf16 kernels once (gemm.hpp), as their casts make them where no recipe makes the
  // products' operands (`for_products`). The weights' and the first inputs' low-precision copies
  // are read by nothing else then: their casts may make only the bf16 bits (OutputReaders).
  std::vector<Eigen::MatrixXf> w(layers), a(layers), z(layers);
  std::vector<ProductOperand> weight_operands, input_operands;
  for (std::size_t l = 0; l < layers; ++l) weight_operands.emplace_back(w[l]), input_operands.emplace_back(a[l]);
  const auto for_products = [&](ProductOperand& operand) { return recipe == GemmRecipe::none ? &operand : nullptr; };
  // Low-precision copies of the weights (the weights themselves for fp32 and fp16-pure).
  std::vector<Eigen::VectorXf> b(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    cast_copy(f, low, weights_[l], w[l], ctx_, recorded(weight, l), config_.record_blocks, FeatureAxis::second, for_products(weight_operands[l]),
              OutputReaders::products_only);
    cast_copy(f, low, biases_[l], b[l], ctx_, nullptr);
  }
  // Forward: GEMMs on low-precision values with float32 accumulation, outputs rounded.
  // Under a recipe the products see the operands it makes (gemm_recipe.hpp); FP8 operands are
  // made once and serve both products that use them.
  std::vector<Fp8Operand> fp8_input(per_tensor_fp8(recipe) ? layers : 0), fp8_weight(fp8_input.size());
  const auto fp8_slot = [&](std::size_t l, GemmOperand operand) -> Fp8TensorState& { return fp8_[3 * l + static_cast<std::size_t>(operand)]; };
  const auto fp8_record = [&](std::size_t l) { return &new_operand_scaling(result.scaling, "fc" + std::to_string(l + 1)); };
  // A block-scaled operand of layer l, its quantization counted under (fcN, operand) in the result.
  const auto mx = [&](std::size_t l, GemmOperand operand, const Eigen::MatrixXf& x, bool along_rows, bool weight_gradient_product = false) {
    return recipe_block_operand(config_.recipe, operand, x, along_rows, ctx_,
                                &block_operand_statistics(result.block_operands, "fc" + std::to_string(l + 1), operand), weight_gradient_product);
  };
  // Layer l's block-scaled weights for a product: along its reduction axis, or in square tiles
  // quantized by the forward product and kept for the input gradient's.
  std::vector<Eigen::MatrixXf> tiled_weights(config_.recipe.square_weight_tiles ? layers : 0);
  const auto mx_weight = [&](std::size_t l, bool along_rows) -> Eigen::MatrixXf {
    if (!config_.recipe.square_weight_tiles) return mx(l, GemmOperand::weight, w[l], along_rows);
    if (tiled_weights[l].size() == 0) tiled_weights[l] = mx(l, GemmOperand::weight, w[l], along_rows);
    return tiled_weights[l];
  };
  cast_copy(f, low, inputs, a[0], ctx_, nullptr, std::nullopt, FeatureAxis::second, for_products(input_operands[0]), OutputReaders::products_only);
  for (std::size_t l = 0; l < layers; ++l) {
    const bool next = l + 1 < layers;
    TensorRecord* z_record = recorded(activation, l);
    const std::size_t size = static_cast<std::size_t>(batch * w[l].rows());
    if (next) a[l + 1].resize(batch, w[l].rows());
    // z's cast, the activation and its cast, in that order in the stochastic stream; started once
    // whatever the product draws (a recipe's operands) has been drawn.
    std::optional<PiecewiseCast> z_cast, a_cast;
    const auto start_casts = [&] {
      z_cast.emplace(f, low, ctx_, z_record, size);
      if (next) {
        a_cast.emplace(f, low, ctx_, nullptr, size);
        a_cast->pack_for_products(for_products(input_operands[l + 1]));
      }
    };
    const auto add_bias_to = [&](float* values, Eigen::Index first, Eigen::Index columns) {
      for (Eigen::Index j = 0; j < columns; ++j) Eigen::Map<Eigen::ArrayXf>(values + j * batch, batch) += b[l](first + j);
    };
    const auto cast_and_activate = [&](float* values, Eigen::Index first, Eigen::Index columns) {
      const auto offset = static_cast<std::size_t>(first * batch), n = static_cast<std::size_t>(columns * batch);
      z_cast->piece(std::span<float>(values, n), offset);
      if (!next) return;
      float* activated = a[l + 1].data() + offset;
      activation_forward(config_.activation, values, activated, n);
      a_cast->piece(std::span<float>(activated, n), offset);
    };
    // Blocks are recorded from the whole tensor before its cast: such steps finish the product first.
    if (recipe == GemmRecipe::none && !(z_record != nullptr && config_.record_blocks)) {
      start_casts();
      z[l] = gemm(input_operands[l], false, weight_operands[l], true, [&](float* values, Eigen::Index first, Eigen::Index columns) {
        add_bias_to(values, first, columns);
        cast_and_activate(values, first, columns);
      });
    } else {
      if (per_tensor_fp8(recipe)) {
        fp8_input[l] = quantize_fp8_operand(config_.recipe, GemmOperand::input, a[l], fp8_slot(l, GemmOperand::input), ctx_, *fp8_record(l));
        fp8_weight[l] = quantize_fp8_operand(config_.recipe, GemmOperand::weight, w[l], fp8_slot(l, GemmOperand::weight), ctx_, *fp8_record(l));
        z[l] = fp8_product(fp8_input[l].values, false, fp8_input[l].dequantize, fp8_weight[l].values, true, fp8_weight[l].dequantize);
      } else if (block_scaled(recipe)) {
        // Named in turn: the stochastic stream's order must not be left to the compiler.
        const Eigen::MatrixXf input = mx(l, GemmOperand::input, a[l], false);
        const Eigen::MatrixXf weight_operand = mx_weight(l, false);
        z[l] = gemm(input, false, weight_operand, true);
      } else {
        z[l] = gemm(input_operands[l], false, weight_operands[l], true);
      }
      run_epilogue(z[l], add_bias_to);
      if (z_record != nullptr && config_.record_blocks) z_record->blocks = block_record(*config_.record_blocks, z[l]);
      start_casts();
      run_epilogue(z[l], cast_and_activate);
    }
    z_cast->finish();
    if (next) a_cast->finish();
  }
  // Softmax cross-entropy in float32; its gradient carries the loss scale.
  const Eigen::MatrixXf& logits = z[layers - 1];  // column-major: row i's logits are `batch` apart
  Eigen::MatrixXf dz(logits.rows(), logits.cols());
  const float factor = scale * config_.loss_weight / static_cast<float>(batch);
  double loss = 0;
  for (Eigen::Index i = 0; i < batch; ++i)
    loss += softmax_cross_entropy_row(logits.data() + i, static_cast<int>(logits.cols()), static_cast<int>(batch),
                                      labels[static_cast<std::size_t>(i)], factor, dz.data() + i);
  result.loss = loss / static_cast<double>(batch);
  // Backward in low precision.
  std::vector<Eigen::MatrixXf> grad_w(layers);
  std::vector<Eigen::VectorXf> grad_b(layers);
  bool non_finite = false;
  for (std::size_t l = layers; l-- > 0;) {
    ProductOperand gradient_operand(dz);  // both backward products; dz changes only after them
    cast(f, low, dz, ctx_, recorded(activation_gradient, l), config_.record_blocks, FeatureAxis::second, for_products(gradient_operand));
    Fp8Operand fp8_dz;
    // The weight gradient's faults, then its cast (recorded) and check for infinities and NaNs, on
    // each slice as the product makes it where nothing comes between: the cast is started before
    // the product where the product draws nothing, blocks are recorded from the whole tensor.
    TensorRecord* gw_record = recorded(weight_gradient, l);
    std::optional<PiecewiseCast> grad_w_cast;
    std::atomic<bool> grad_w_non_finite{false};
    const auto inject_faults = [&](float* values, Eigen::Index first) {
      if (first != 0) return;  // element (0, 0)
      for (const FaultInjection& fault : faults_)
        if (fault.step == steps_ && static_cast<std::size_t>(fault.layer) == l + 1)
          values[0] = fault.value == FaultInjection::Value::nan ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    };
    const auto cast_and_check = [&](float* values, Eigen::Index first, Eigen::Index columns) {
      const Eigen::Index rows = w[l].rows();
      const std::span<float> slice(values, static_cast<std::size_t>(rows * columns));
      grad_w_cast->piece(slice, static_cast<std::size_t>(first * rows));
      if (has_non_finite(slice)) grad_w_non_finite = true;
    };
    const bool fuse_weight_gradient = recipe == GemmRecipe::none && !(gw_record != nullptr && config_.record_blocks);
    if (fuse_weight_gradient) grad_w_cast.emplace(f, low, ctx_, gw_record, static_cast<std::size_t>(w[l].size()));
    if (per_tensor_fp8(recipe)) {
      fp8_dz = quantize_fp8_operand(config_.recipe, GemmOperand::output_gradient, dz, fp8_slot(l, GemmOperand::output_gradient), ctx_,
                                    *fp8_record(l));
      grad_w[l] = fp8_product(fp8_dz.values, true, fp8_dz.dequantize, fp8_input[l].values, false, fp8_input[l].dequantize);
    } else if (block_scaled(recipe)) {
      // The weight gradient's product reduces over the batch: both operands blocked along it.
      const Eigen::MatrixXf gradient = mx(l, GemmOperand::output_gradient, dz, true, true);
      const Eigen::MatrixXf input = mx(l, GemmOperand::input, a[l], true, true);
      grad_w[l] = gemm(gradient, true, input, false);
    } else {
      grad_w[l] = gemm(gradient_operand, true, input_operands[l], false,
                       fuse_weight_gradient ? GemmEpilogue([&](float* values, Eigen::Index first, Eigen::Index columns) {
                         inject_faults(values, first);
                         cast_and_check(values, first, columns);
                       })
                                            : GemmEpilogue());
    }
    if (!fuse_weight_gradient) {
      inject_faults(grad_w[l].data(), 0);
      if (gw_record != nullptr && config_.record_blocks) gw_record->blocks = block_record(*config_.record_blocks, grad_w[l]);
      grad_w_cast.emplace(f, low, ctx_, gw_record, static_cast<std::size_t>(grad_w[l].size()));
      run_epilogue(grad_w[l], cast_and_check);
    }
    grad_w_cast->finish();
    grad_b[l] = column_sums(dz);
    cast(f, low, grad_b[l], ctx_, nullptr);
    non_finite = non_finite || grad_w_non_finite || any_non_finite(grad_b[l]);
    if (l > 0) {
      // The previous layer's output gradient, from da = dz W: cast, then through the activation.
      Eigen::MatrixXf next_dz(batch, w[l].cols());
      std::optional<PiecewiseCast> da_cast;
      const auto cast_and_differentiate = [&](float* values, Eigen::Index first, Eigen::Index columns) {
        const auto offset = static_cast<std::size_t>(first * batch), n = static_cast<std::size_t>(columns * batch);
        da_cast->piece(std::span<float>(values, n), offset);
        activation_backward(config_.activation, z[l - 1].data() + offset, values, next_dz.data() + offset, n);
      };
      if (per_tensor_fp8(recipe) || block_scaled(recipe)) {
        Eigen::MatrixXf da;
        if (per_tensor_fp8(recipe)) {
          da = fp8_product(fp8_dz.values, false, fp8_dz.dequantize, fp8_weight[l].values, false, fp8_weight[l].dequantize);
        } else {  // reduces over the layer's outputs
          const Eigen::MatrixXf gradient = mx(l, GemmOperand::output_gradient, dz, false);
          da = gemm(gradient, false, mx_weight(l, true), false);
        }
        da_cast.emplace(f, low, ctx_, nullptr, static_cast<std::size_t>(da.size()));
        run_epilogue(da, cast_and_differentiate);
      } else {
        da_cast.emplace(f, low, ctx_, nullptr, static_cast<std::size_t>(next_dz.size()));
        gemm(gradient_operand, false, weight_operands[l], false, cast_and_differentiate);
      }
      da_cast->finish();
      dz = std::move(next_dz);
    }
  }
  // Update in float32 with the gradients unscaled by the step's factor (sgd_update.hpp), unless a
  // gradient overflowed.
  result.skipped = scaler_.update(non_finite);
  if (!result.skipped) {
    std::vector<std::span<float>> parameters;
    std::vector<std::span<const float>> gradients;
    for (std::size_t l = 0; l < layers; ++l) {
      parameters.emplace_back(weights_[l].data(), static_cast<std::size_t>(weights_[l].size()));
      gradients.emplace_back(grad_w[l].data(), static_cast<std::size_t>(grad_w[l].size()));
      parameters.emplace_back(biases_[l].data(), static_cast<std::size_t>(biases_[l].size()));
      gradients.emplace_back(grad_b[l].data(), static_cast<std::size_t>(grad_b[l].size()));
    }
    update_parameters(config_.optimizer, config_.learning_rate, scale, parameters, gradients, optimizer_);
    if (config_.precision == Precision::fp16_pure)
      for (std::size_t l = 0; l < layers; ++l) {
        cast(formats::fp16, true, weights_[l], ctx_, nullptr);
        cast(formats::fp16, true, biases_[l], ctx_, nullptr);
      }
  }
  if (record) {
    add_recipe_records(snapshot, config_.recipe, result.scaling, result.block_operands);
    for (std::size_t l = 0; l < layers; ++l) {
      snapshot.tensors.push_back(std::move(activation[l]));
      snapshot.tensors.push_back(std::move(activation_gradient[l]));
      snapshot.tensors.push_back(std::move(weight[l]));
      snapshot.tensors.push_back(std::move(weight_gradient[l]));
    }
    complete_snapshot(snapshot, steps_, result.loss, result.loss_scale, result.skipped);
    result.snapshot = std::move(snapshot);
  }
  ++steps_;
  return result;
}

MlpTrainer::State MlpTrainer::state() const {
  return {steps_, weights_, biases_, scaler_.state(), ctx_.stochastic_counter, optimizer_, fp8_};
}

void check_mlp_state(const std::vector<int>& layer_sizes, const TrainerState& state, std::size_t fp8_slots) {
  const std::size_t layers = layer_sizes.size() - 1;
  bool fits = state.weights.size() == layers && state.biases.size() == layers;
  for (std::size_t l = 0; fits && l < layers; ++l)
    fits = state.weights[l].rows() == layer_sizes[l + 1] && state.weights[l].cols() == layer_sizes[l] && state.biases[l].size() == layer_sizes[l + 1];
  if (!fits || state.steps < 0) throw std::invalid_argument("the saved training state is not of this model's shape");
  std::vector<std::size_t> sizes;  // the optimizer's order: weight 2l, bias 2l + 1
  for (std::size_t l = 0; l < layers; ++l) {
    sizes.push_back(static_cast<std::size_t>(layer_sizes[l + 1]) * static_cast<std::size_t>(layer_sizes[l]));
    sizes.push_back(static_cast<std::size_t>(layer_sizes[l + 1]));
  }
  if (!optimizer_state_fits(state.optimizer, sizes))
    throw std::invalid_argument("the saved optimizer state is not of this model's shape");
  if (state.fp8.size() != fp8_slots)
    throw std::invalid_argument("the saved FP8 scales are not this run's (" + std::to_string(state.fp8.size()) + " tensors, not " +
                                std::to_string(fp8_slots) + ": another recipe?)");
}

void MlpTrainer::restore(const State& state) {
  check_mlp_state(config_.layer_sizes, state, fp8_.size());
  steps_ = state.steps;
  weights_ = state.weights;
  biases_ = state.biases;
  scaler_.restore(state.scaler);
  ctx_.stochastic_counter = state.stochastic_counter;
  optimizer_ = state.optimizer;
  fp8_ = state.fp8;
}

double MlpTrainer::loss_in_double(const Eigen::MatrixXf& inputs, const std::vector<int>& labels) const {
  Eigen::MatrixXd a = inputs.cast<double>();
  for (std::size_t l = 0; l < weights_.size(); ++l) {
    Eigen::MatrixXd z = a * weights_[l].cast<double>().transpose();
    z.rowwise() += biases_[l].cast<double>().transpose();
    a = l + 1 < weights_.size() ? Eigen::MatrixXd(z.unaryExpr([&](double v) { return activate(config_.activation, v); })) : z;
  }
  double loss = 0;
  for (Eigen::Index i = 0; i < a.rows(); ++i) {
    const double top = a.row(i).maxCoeff();
    const double sum = (a.row(i).array() - top).exp().sum();
    loss += -(a(i, labels[static_cast<std::size_t>(i)]) - top - std::log(sum));
  }
  return loss / static_cast<double>(a.rows());
}

}  // namespace fpscope
