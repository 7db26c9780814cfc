// The CPU reference backend: an MLP step in fp32 or mixed precision, with recording.
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/core/printable_text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <random>

#include "fpscope/core/names.hpp"
#include "cast_tensor.hpp"
#include "training_memory.hpp"
#include "parse_choice.hpp"

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

std::string mlp_layer_name(std::size_t index) { return "fc" + std::to_string(index + 1); }

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
    const bool digits = !piece.empty() && piece.find_first_not_of("0123456789") == std::string_view::npos;
    if (digits && (result.ec == std::errc::result_out_of_range || size > max_layer_size))
      throw std::invalid_argument("model '" + printable_text(text) + "': a layer of " + printable_text(piece) + " is wider than the largest, " +
                                  std::to_string(max_layer_size));
    if (piece.empty() || result.ec != std::errc{} || result.ptr != piece.data() + piece.size() || size < 1 || size > max_layer_size)
      throw std::invalid_argument(message);
    sizes.push_back(size);
    start = dash + 1;
  }
  if (sizes.size() < 2) throw std::invalid_argument(message);
  // One class is a softmax of one value: the loss is 0 and every gradient with it, whatever the data.
  if (sizes.back() < 2)
    throw std::invalid_argument("model '" + printable_text(text) + "': its last size is the number of classes it tells apart, at least 2");
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
  const bool low = config.precision != Precision::fp32;
  low_weights_.resize(low ? weights_.size() : 0);
  for (std::size_t l = 0; l < weights_.size(); ++l) weight_operands_.emplace_back(low ? low_weights_[l] : weights_[l]);
}

MlpTrainer::State MlpTrainer::position() const { return {steps_, {}, {}, scaler_.state(), ctx_.stochastic_counter, {}, fp8_}; }

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
  weights_ = state.weights;  // element by element (the same layer count): weight_operands_ still refer to them
  next_weight_cast_made_ = false;
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
