// The CPU backend's GPT: its shape, parameters, and the trainer around gpt_pass.hpp.
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/step_sentinel.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <deque>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <unordered_map>

#include "cast_tensor.hpp"
#include "fpscope/core/bulk.hpp"
#include "fpscope/core/printable_text.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "recording.hpp"
#include "training_memory.hpp"
#include "fpscope/gpu/sgd_update.hpp"
#include "gpt_pass.hpp"
#include "next_cast.hpp"

namespace fpscope {

bool names_gpt(std::string_view model) { return model == "gpt" || model.rfind("gpt:", 0) == 0; }

GptShape parse_gpt_shape(std::string_view text) {
  const std::string whole = printable_text(text);
  if (!names_gpt(text))
    throw std::invalid_argument("model '" + whole + "' is not gpt or gpt:layers=L,width=D,heads=H,context=T");
  GptShape shape;
  struct Key {
    const char* name;
    int* value;
    int max;
    bool seen;
  } keys[] = {{"layers", &shape.layers, max_gpt_layers, false},
              {"width", &shape.width, max_gpt_width, false},
              {"heads", &shape.heads, max_gpt_width, false},
              {"context", &shape.context, max_gpt_context, false},
              {"vocab", &shape.vocab, max_gpt_vocab, false}};
  if (text == "gpt:" || text.back() == ',') throw std::invalid_argument("model '" + whole + "' ends where a key=value should be");
  std::string_view rest = text.size() > 3 ? text.substr(4) : std::string_view{};
  while (!rest.empty()) {
    const std::size_t comma = std::min(rest.find(','), rest.size());
    const std::string_view item = rest.substr(0, comma);
    rest = comma < rest.size() ? rest.substr(comma + 1) : std::string_view{};
    const std::size_t equals = item.find('=');
    Key* key = nullptr;
    for (Key& k : keys)
      if (equals != std::string_view::npos && item.substr(0, equals) == k.name) key = &k;
    if (key == nullptr)
      throw std::invalid_argument("model '" + whole + "': '" + printable_text(item) + "' is not one of layers=, width=, heads=, context=, vocab=");
    if (key->seen) throw std::invalid_argument("model '" + whole + "' gives " + key->name + " twice");
    key->seen = true;
    const std::string_view number = item.substr(equals + 1);
    int value = 0;
    const auto parsed = std::from_chars(number.data(), number.data() + number.size(), value);
    if (number.empty() || parsed.ec != std::errc{} || parsed.ptr != number.data() + number.size() || value < 1 || value > key->max)
      throw std::invalid_argument("model '" + whole + "': " + key->name + " must be a whole number from 1 to " + std::to_string(key->max));
    *key->value = value;
  }
  if (shape.width % shape.heads != 0)
    throw std::invalid_argument("model '" + whole + "': width " + std::to_string(shape.width) + " is not a multiple of heads " +
                                std::to_string(shape.heads));
  return shape;
}

std::string gpt_shape_name(const GptShape& shape) {
  return "gpt:layers=" + std::to_string(shape.layers) + ",width=" + std::to_string(shape.width) + ",heads=" + std::to_string(shape.heads) +
         ",context=" + std::to_string(shape.context) + ",vocab=" + std::to_string(shape.vocab);
}

std::vector<GptParameter> gpt_parameters(const GptShape& shape) {
  const int D = shape.width;
  std::vector<GptParameter> list{{"embed.tokens", shape.vocab, D, "embed.tokens"}, {"embed.positions", shape.context, D, "embed.positions"}};
  for (int l = 0; l < shape.layers; ++l) {
    std::string h = "h";
    h += std::to_string(l);
    h += '.';
    const auto add = [&](const std::string& module, int rows, int cols) {
      list.push_back({h + module + ".weight", rows, cols, h + module});
      list.push_back({h + module + ".bias", rows, 1, ""});
    };
    list.push_back({h + "ln1.weight", D, 1, h + "ln1"});
    list.push_back({h + "ln1.bias", D, 1, ""});
    add("attn.qkv", 3 * D, D);
    add("attn.proj", D, D);
    list.push_back({h + "ln2.weight", D, 1, h + "ln2"});
    list.push_back({h + "ln2.bias", D, 1, ""});
    add("mlp.fc", 4 * D, D);
    add("mlp.proj", D, 4 * D);
  }
  list.push_back({"ln_f.weight", D, 1, "ln_f"});
  list.push_back({"ln_f.bias", D, 1, ""});
  return list;
}

std::string gpt_tensor_name(int block, std::string_view name) {
  if (block < 0) return std::string(name);
  std::string full = "h";
  full += std::to_string(block);
  full += '.';
  full += name;
  return full;
}

std::vector<std::string> gpt_recorded_weights(const GptShape& shape) {
  std::vector<std::string> names;
  for (const GptParameter& p : gpt_parameters(shape))
    if (!p.recorded.empty()) names.push_back(p.recorded);
  return names;
}

std::int64_t gpt_parameter_count(const GptShape& shape) {
  std::int64_t count = 0;
  for (const GptParameter& p : gpt_parameters(shape)) count += static_cast<std::int64_t>(p.rows) * p.cols;
  return count;
}

std::uint64_t estimated_gpt_training_bytes(const GptShape& shape, std::int64_t batch) {
  // In doubles, as estimated_training_bytes: seven copies of the parameters (master, low-precision
  // copy, gradient, two optimizer moments, a checkpoint's state and encoding); per block and
  // token about 20 width-sized stored tensors and their gradients, and the attention triangles
  // (scores, probabilities, their gradients) per head; the logits and their gradient.
  const double D = shape.width, T = shape.context, tokens = static_cast<double>(batch) * T;
  const double parameters = 12.0 * D * D * shape.layers + (static_cast<double>(shape.vocab) + T) * D;
  const double per_block = tokens * 40.0 * D + static_cast<double>(batch) * shape.heads * T * (T + 1) / 2 * 4.0;
  const double bytes = 4.0 * (7.0 * parameters + shape.layers * per_block + 3.0 * tokens * shape.vocab);
  return bytes >= 1.8e19 ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(bytes);
}

std::vector<Eigen::MatrixXf> initial_gpt_parameters(const GptShape& shape, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Eigen::MatrixXf> parameters;
  for (const GptParameter& p : gpt_parameters(shape)) {
    Eigen::MatrixXf m(p.rows, p.cols);
    const bool gain = p.name.find("ln") != std::string::npos && p.name.ends_with(".weight");
    if (p.recorded.empty()) m.setZero();
    else if (gain) m.setOnes();
    else {
      const bool into_residual = p.name.ends_with("attn.proj.weight") || p.name.ends_with("mlp.proj.weight");
      const double stddev = into_residual ? 0.02 / std::sqrt(2.0 * shape.layers) : 0.02;
      std::normal_distribution<float> normal(0.0f, static_cast<float>(stddev));
      for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
    }
    parameters.push_back(std::move(m));
  }
  return parameters;
}

namespace {

void check_batch(const GptShape& shape, Eigen::Index rows, Eigen::Index cols, std::size_t targets) {
  if (cols != shape.context || rows < 1 || targets != static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols))
    throw std::invalid_argument("step: a batch of " + std::to_string(rows) + " sequences of " + std::to_string(cols) + " tokens with " +
                                std::to_string(targets) + " targets; the model takes sequences of " + std::to_string(shape.context) +
                                " tokens and one target per token");
}

void check_token(const GptShape& shape, double token) {
  if (!(token >= 0 && token < shape.vocab) || token != std::floor(token))
    throw std::invalid_argument("step: token " + std::to_string(token) + " is not an id below the model's vocab of " + std::to_string(shape.vocab));
}

}  // namespace

double gpt_loss_in_double(const GptShape& shape, const std::vector<Eigen::MatrixXd>& parameters, const Eigen::MatrixXi& tokens,
                          const std::vector<int>& targets, std::vector<Eigen::MatrixXd>* gradients) {
  check_batch(shape, tokens.rows(), tokens.cols(), targets.size());
  std::vector<int> ids(static_cast<std::size_t>(tokens.size()));
  for (Eigen::Index b = 0; b < tokens.rows(); ++b)
    for (Eigen::Index t = 0; t < tokens.cols(); ++t) {
      check_token(shape, tokens(b, t));
      ids[static_cast<std::size_t>(b * tokens.cols() + t)] = tokens(b, t);
    }
  for (int target : targets) check_token(shape, target);
  gpt_pass::NoRounding<double> hooks;
  const double factor = 1.0 / static_cast<double>(targets.size());
  return gpt_pass::run<double>(shape, parameters, ids.data(), targets.data(), static_cast<int>(tokens.rows()), factor, hooks, gradients);
}

namespace {

constexpr std::string_view recipe_linears[] = {"attn.qkv", "attn.proj", "mlp.fc", "mlp.proj"};
constexpr std::size_t operands_per_linear = 3;  // GemmOperand's input, weight, output_gradient

}  // namespace

std::size_t gpt_recipe_slots(const GptShape& shape) {
  return static_cast<std::size_t>(shape.layers) * std::size(recipe_linears) * operands_per_linear;
}

std::size_t gpt_recipe_slot(int block, std::string_view linear, GemmOperand operand) {
  const auto it = std::find(std::begin(recipe_linears), std::end(recipe_linears), linear);
  if (it == std::end(recipe_linears)) throw std::invalid_argument("gpt_recipe_slot: " + std::string(linear) + " is not a linear layer of a block");
  const auto index = static_cast<std::size_t>(it - std::begin(recipe_linears));
  return (static_cast<std::size_t>(block) * std::size(recipe_linears) + index) * operands_per_linear + static_cast<std::size_t>(operand);
}

namespace {

// The trainer's hooks: every stored tensor rounded into the run's format, recorded by its name on
// recorded steps (activations in the order the forward pass made them, gradients by name).
struct RecordingHooks final : gpt_pass::Hooks<float> {
  Format format;
  bool low = false;
  bool record = false;
  Context* ctx = nullptr;
  const std::optional<BlockRecording>* blocks = nullptr;
  int context = 0;  // the model's: the attention triangles' queries
  std::deque<TensorRecord> activations;  // a deque: a record a PiecewiseCast holds stays where it is
  std::unordered_map<std::string, TensorRecord> gradients;

  static std::string full_name(int block, const char* name) { return gpt_tensor_name(block, name); }

  StepSentinel* sentinel = nullptr;  // every stored tensor's reading, recorded step or not; null where the run's sentinel is off

  void cast_span(float* values, std::size_t count, std::size_t features, TensorRecord* into, std::uint32_t* largest) {
    if (features == 0) {  // packed attention triangles: blocks along each query's keys
      if (into != nullptr && *blocks) into->blocks = triangle_block_record(**blocks, std::span<const float>(values, count), context);
      Eigen::Map<Eigen::MatrixXf> m(values, static_cast<Eigen::Index>(count), 1);
      return cast(format, low, m, *ctx, into, std::nullopt, FeatureAxis::second, nullptr, largest);
    }
    // A features x (count / features) column-major matrix over the values: blocks along features.
    Eigen::Map<Eigen::MatrixXf> m(values, static_cast<Eigen::Index>(features), static_cast<Eigen::Index>(count / features));
    cast(format, low, m, *ctx, into, *blocks, FeatureAxis::first, nullptr, largest);
  }
  std::uint32_t* watch(bool gradient, int block, const char* name) {
    if (sentinel == nullptr) return nullptr;
    return sentinel->watch(full_name(block, name), gradient ? TensorKind::activation_gradient : TensorKind::activation);
  }
  void activation(int block, const char* name, float* values, std::size_t count, std::size_t features) override {
    cast_span(values, count, features, new_activation_record(block, name), watch(false, block, name));
  }
  void gradient(int block, const char* name, float* values, std::size_t count, std::size_t features) override {
    cast_span(values, count, features, new_gradient_record(block, name), watch(true, block, name));
  }
  TensorRecord* new_activation_record(int block, const char* name) {
    if (!record) return nullptr;
    activations.push_back(new_record(full_name(block, name), TensorKind::activation));
    return &activations.back();
  }
  TensorRecord* new_gradient_record(int block, const char* name) {
    if (!record) return nullptr;
    const std::string key = full_name(block, name);
    TensorRecord& r = gradients[key];
    r = new_record(key, TensorKind::activation_gradient);
    return &r;
  }

  // Stored tensors rounded in pieces as the pass makes them (cast_tensor.hpp's PiecewiseCast),
  // where nothing needs a whole tensor first: no recipe (whose products draw random words of their
  // own), and no block statistics on recorded steps (made from the whole tensor before its cast).
  bool rounds_in_pieces() const override { return recipe->recipe == GemmRecipe::none && !(record && *blocks); }
  struct Pieces final : gpt_pass::StoredPieces<float> {
    PiecewiseCast cast;
    Pieces(Format f, bool low, Context& ctx, TensorRecord* record, std::size_t count) : cast(f, low, ctx, record, count) {}
    void piece(float* values, std::size_t count, std::size_t offset) override { cast.piece(std::span<float>(values, count), offset); }
    void finish() override { cast.finish(); }
  };
  std::unique_ptr<gpt_pass::StoredPieces<float>> begin_stored(bool gradient, int block, const char* name, std::size_t count,
                                                              std::size_t /*features*/, const gpt_pass::ProductUse<float>* use) override {
    TensorRecord* into = gradient ? new_gradient_record(block, name) : new_activation_record(block, name);
    auto pieces = std::make_unique<Pieces>(format, low, *ctx, into, count);
    pieces->cast.watch(watch(gradient, block, name));
    // Packed for the product as each piece is rounded, while it is in cache (only casts into bf16 pack).
    if (use != nullptr) pieces->cast.pack_for_products(&prepared_operand(*use), count);
    return pieces;
  }

  // Operands packed as their stores rounded them (begin_stored), until their product takes them:
  // by linear layer and role.
  std::unordered_map<std::string, ProductOperand> prepared;
  static std::string operand_key(const std::string& full, bool gradient) { return full + (gradient ? " dy" : " x"); }
  ProductOperand& prepared_operand(const gpt_pass::ProductUse<float>& use) {
    const std::string key = operand_key(full_name(use.block, use.linear), use.gradient);
    return prepared.insert_or_assign(key, ProductOperand(*use.matrix)).first->second;
  }
  // The operand prepared for `values` as that product's x (dy), else a new one.
  ProductOperand operand_of(const std::string& full, bool gradient, const Eigen::MatrixXf& values) {
    const auto found = prepared.find(operand_key(full, gradient));
    if (found == prepared.end()) return ProductOperand(values);
    ProductOperand operand = std::move(found->second);
    prepared.erase(found);
    if (!operand.refers_to(values)) throw std::logic_error("GPT pass: " + full + "'s product takes another tensor than the one packed for it");
    return operand;
  }

  // The linear layers' products under the run's recipe (gemm_recipe.hpp), as the MLP makes them:
  // FP8 operands cast once per step (the forward's input and weight serve the backward too),
  // block-scaled operands quantized along each product's reduction axis. Every quantization
  // draws from the run's context in the pass's order.
  const RecipeConfig* recipe = nullptr;
  std::vector<Fp8TensorState>* fp8 = nullptr;  // gpt_recipe_slot's order
  std::vector<OperandScaling> scaling;
  std::vector<BlockOperandStatistics> block_operands;
  struct Fp8Forward {
    Fp8Operand input, weight;
  };
  std::unordered_map<std::string, Fp8Forward> fp8_forward;

  Fp8TensorState& fp8_state(int block, const char* name, GemmOperand operand) {
    return (*fp8)[gpt_recipe_slot(block, name, operand)];
  }
  OperandScaling& scaling_record(const std::string& name) { return new_operand_scaling(scaling, name); }
  Eigen::MatrixXf block_operand(const std::string& name, GemmOperand operand, const Eigen::MatrixXf& x, bool along_first_axis,
                                bool weight_gradient_product = false) {
    return recipe_block_operand(*recipe, operand, x, along_first_axis, *ctx, &block_operand_statistics(block_operands, name, operand),
                                weight_gradient_product);
  }
  // A linear layer's block-scaled weights for a product: along its reduction axis, or in square
  // tiles quantized by the forward product and kept for the input gradient's.
  std::unordered_map<std::string, Eigen::MatrixXf> tiled_weights;
  Eigen::MatrixXf block_weight(const std::string& name, const Eigen::MatrixXf& weight, bool along_first_axis) {
    if (!recipe->square_weight_tiles) return block_operand(name, GemmOperand::weight, weight, along_first_axis);
    const auto found = tiled_weights.find(name);
    if (found != tiled_weights.end()) return found->second;
    return tiled_weights[name] = block_operand(name, GemmOperand::weight, weight, along_first_axis);
  }

  // Without a recipe, each linear layer's weights and input from its forward product to its
  // backward ones: packed for the bf16 kernels once (gemm.hpp). The pass changes neither between.
  // The weights' operands are the trainer's (kept from step to step, GptTrainer::weight_operands_)
  // where it has one for them, else their own.
  std::unordered_map<const Eigen::MatrixXf*, ProductOperand*> weight_operands;
  struct LinearOperands {
    ProductOperand input;
    std::optional<ProductOperand> own_weight;
    ProductOperand* weight = nullptr;
  };
  std::unordered_map<std::string, LinearOperands> linear_operands;

  Eigen::MatrixXf plain_forward(const std::string& full, const Eigen::MatrixXf& weight, const Eigen::MatrixXf& x, const GemmEpilogue& slices) {
    LinearOperands& made = linear_operands.insert_or_assign(full, LinearOperands{operand_of(full, false, x), std::nullopt, nullptr}).first->second;
    const auto kept = weight_operands.find(&weight);
    made.weight = kept != weight_operands.end() ? kept->second : &made.own_weight.emplace(weight);  // where the map keeps it
    return gemm(*made.weight, false, made.input, false, slices);
  }
  Eigen::MatrixXf plain_backward(const std::string& full, const Eigen::MatrixXf& weight, const Eigen::MatrixXf& x, const Eigen::MatrixXf& dy,
                                 Eigen::MatrixXf& weight_gradient, const GemmEpilogue& slices) {
    const auto it = linear_operands.find(full);
    if (it == linear_operands.end() || !it->second.weight->refers_to(weight) || !it->second.input.refers_to(x))
      throw std::logic_error("GPT pass: " + full + "'s backward products without its forward operands");
    const ProductOperand gradient = operand_of(full, true, dy);
    weight_gradient = gemm(gradient, false, it->second.input, true);
    return gemm(*it->second.weight, true, gradient, false, slices);
  }
  Eigen::MatrixXf linear_forward_in_slices(int block, const char* name, const Eigen::MatrixXf& weight, const Eigen::MatrixXf& x,
                                           const gpt_pass::Slices<float>& slices) override {
    return plain_forward(full_name(block, name), weight, x, slices);
  }
  Eigen::MatrixXf linear_backward_in_slices(int block, const char* name, const Eigen::MatrixXf& weight, const Eigen::MatrixXf& x,
                                            const Eigen::MatrixXf& dy, Eigen::MatrixXf& weight_gradient, const gpt_pass::Slices<float>& slices) override {
    return plain_backward(full_name(block, name), weight, x, dy, weight_gradient, slices);
  }

  Eigen::MatrixXf linear_forward(int block, const char* name, const Eigen::MatrixXf& weight, const Eigen::MatrixXf& x) override {
    const std::string full = full_name(block, name);
    if (recipe->recipe == GemmRecipe::none) return plain_forward(full, weight, x, {});
    if (per_tensor_fp8(recipe->recipe)) {
      Fp8Forward& f = fp8_forward[full];
      f.input = quantize_fp8_operand(*recipe, GemmOperand::input, x, fp8_state(block, name, GemmOperand::input), *ctx, scaling_record(full));
      f.weight = quantize_fp8_operand(*recipe, GemmOperand::weight, weight, fp8_state(block, name, GemmOperand::weight), *ctx,
                                      scaling_record(full));
      return fp8_product(f.weight.values, false, f.weight.dequantize, f.input.values, false, f.input.dequantize);
    }
    // W x reduces over W's columns and x's rows. Named in turn: the stochastic stream's order must
    // not be left to the compiler.
    const Eigen::MatrixXf input = block_operand(full, GemmOperand::input, x, true);
    const Eigen::MatrixXf w = block_weight(full, weight, false);
    return gemm(w, false, input, false);
  }
  Eigen::MatrixXf linear_backward(int block, const char* name, const Eigen::MatrixXf& weight, const Eigen::MatrixXf& x,
                                  const Eigen::MatrixXf& dy, Eigen::MatrixXf& weight_gradient) override {
    const std::string full = full_name(block, name);
    if (recipe->recipe == GemmRecipe::none) return plain_backward(full, weight, x, dy, weight_gradient, {});
    if (per_tensor_fp8(recipe->recipe)) {
      const Fp8Forward& f = fp8_forward.at(full);
      const Fp8Operand g = quantize_fp8_operand(*recipe, GemmOperand::output_gradient, dy, fp8_state(block, name, GemmOperand::output_gradient),
                                                *ctx, scaling_record(full));
      weight_gradient = fp8_product(g.values, false, g.dequantize, f.input.values, true, f.input.dequantize);
      return fp8_product(f.weight.values, true, f.weight.dequantize, g.values, false, g.dequantize);
    }
    // dy x^T reduces over the tokens: both along their second axis.
    const Eigen::MatrixXf gradient = block_operand(full, GemmOperand::output_gradient, dy, false, true);
    const Eigen::MatrixXf input = block_operand(full, GemmOperand::input, x, false, true);
    weight_gradient = gemm(gradient, false, input, true);
    // W^T dy reduces over W's rows and dy's: both along their first axis.
    const Eigen::MatrixXf gradient_down = block_operand(full, GemmOperand::output_gradient, dy, true);
    const Eigen::MatrixXf w = block_weight(full, weight, true);
    return gemm(w, true, gradient_down, false);
  }
};

}  // namespace

GptTrainer::GptTrainer(const GptShape& shape, const TrainingConfig& config)
    : shape_(shape), config_(config), scaler_(config.scaler), layout_(gpt_parameters(shape)), parameters_(initial_gpt_parameters(shape, config.seed)) {
  if (shape.width % shape.heads != 0) throw std::invalid_argument("a GPT's width must be a multiple of its heads");
  keep_training_memory();
  ctx_.rounding = config.rounding;
  ctx_.stochastic_seed = config.seed;
  if (config.precision == Precision::fp16_pure)
    for (auto& w : parameters_) cast(formats::fp16, true, w, ctx_, nullptr);
  if (per_tensor_fp8(config.recipe.recipe)) fp8_.resize(gpt_recipe_slots(shape));
  // The copies and the linear weights' operands, from here on where they are (a vector of them
  // never grows): the operands refer to the copies.
  const bool low = config.precision != Precision::fp32;
  copies_.resize(low ? parameters_.size() : 0);
  weight_operands_.resize(copies_.size());
  for (int layer = 0; low && config.recipe.recipe == GemmRecipe::none && layer < shape.layers; ++layer)
    for (const gpt_pass::Index::Block linear : {gpt_pass::Index::qkv_weight, gpt_pass::Index::proj_weight, gpt_pass::Index::fc_weight,
                                                gpt_pass::Index::mlp_proj_weight})
      weight_operands_[static_cast<std::size_t>(gpt_pass::Index::block(layer, linear))].emplace(copies_[static_cast<std::size_t>(gpt_pass::Index::block(layer, linear))]);
}

Format GptTrainer::format() const { return precision_format(config_.precision); }

void check_gpt_fault(const GptShape& shape, const FaultInjection& fault) {
  const std::vector<std::string> recorded = gpt_recorded_weights(shape);
  if (std::find(recorded.begin(), recorded.end(), fault.tensor) == recorded.end())
    throw std::invalid_argument("--inject " + describe(fault) + ": the GPT records no weight of that name");
}

void GptTrainer::inject(const FaultInjection& fault) {
  check_gpt_fault(shape_, fault);
  faults_.push_back(fault);
}

std::vector<int> gpt_batch_tokens(const GptShape& shape, const Eigen::MatrixXf& inputs, const std::vector<int>& targets) {
  check_batch(shape, inputs.rows(), inputs.cols(), targets.size());
  std::vector<int> tokens(static_cast<std::size_t>(inputs.size()));
  for (Eigen::Index b = 0; b < inputs.rows(); ++b)
    for (Eigen::Index t = 0; t < inputs.cols(); ++t) {
      check_token(shape, inputs(b, t));
      tokens[static_cast<std::size_t>(b * inputs.cols() + t)] = static_cast<int>(inputs(b, t));
    }
  for (int target : targets) check_token(shape, target);
  return tokens;
}

StepResult GptTrainer::step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool /*read_loss*/) {
  const ParallelStep step_scope;  // the workers stay awake between the step's passes
  const std::vector<int> tokens = gpt_batch_tokens(shape_, inputs, labels);
  const int batch = static_cast<int>(inputs.rows());

  const bool low = config_.precision != Precision::fp32;
  const Format f = format();
  StepResult result;
  result.loss_scale = scaler_.scale();
  const float scale = static_cast<float>(result.loss_scale);

  // Low-precision copies of the parameters (of fp16 values for fp16-pure); in fp32 the pass takes
  // the master weights themselves (the update comes after it), recorded where they are. Where the
  // last update made this step's cast (next_cast_made), the step takes it and records no weights.
  std::vector<TensorRecord> weights, weight_gradients;
  const bool cast_made = next_cast_made_ && !record;
  next_cast_made_ = false;  // taken now, or cast afresh
  if (!cast_made)
    for (std::optional<ProductOperand>& operand : weight_operands_)
      if (operand) operand->restart();
  StepSentinel sentinel;
  // A skipped step leaves the weights as it cast them: their readings are taken from them after
  // the step, where it skipped (the only steps whose readings anyone reads).
  std::vector<std::uint32_t*> weight_readings(parameters_.size(), nullptr);
  const auto watch = [&](std::size_t p, TensorKind kind) {
    return !config_.sentinel || layout_[p].recorded.empty() ? nullptr : sentinel.watch(layout_[p].recorded, kind);
  };
  for (std::size_t p = 0; p < parameters_.size(); ++p) {
    const bool recorded = record && !layout_[p].recorded.empty();
    if (recorded) weights.push_back(new_record(layout_[p].recorded, TensorKind::weight));
    TensorRecord* weight_record = recorded ? &weights.back() : nullptr;
    if (cast_made)  // the random words the cast would have taken, none of them read in this mode
      ctx_.stochastic_counter += static_cast<std::uint64_t>(parameters_[p].size());
    else if (low)  // the linear weights' copies read by their products alone
      cast_copy(f, low, parameters_[p], copies_[p], ctx_, weight_record, config_.record_blocks, weight_features(parameters_[p]),
                weight_operands_[p] ? &*weight_operands_[p] : nullptr, weight_operands_[p] ? OutputReaders::products_only : OutputReaders::anyone);
    else
      cast(f, low, parameters_[p], ctx_, weight_record, config_.record_blocks, weight_features(parameters_[p]));
    weight_readings[p] = watch(p, TensorKind::weight);  // taken after the step, where it skipped
  }
  if (cast_made) ctx_.raise(next_flags_);
  RecordingHooks hooks;
  hooks.format = f;
  hooks.low = low;
  hooks.record = record;
  hooks.ctx = &ctx_;
  hooks.blocks = &config_.record_blocks;
  hooks.context = shape_.context;
  hooks.recipe = &config_.recipe;
  hooks.fp8 = &fp8_;
  hooks.sentinel = config_.sentinel ? &sentinel : nullptr;
  for (std::size_t p = 0; p < weight_operands_.size(); ++p)
    if (weight_operands_[p]) hooks.weight_operands[&copies_[p]] = &*weight_operands_[p];
  const float factor = scale * config_.loss_weight / static_cast<float>(labels.size());
  std::vector<Eigen::MatrixXf> gradients;
  result.loss = gpt_pass::run<float>(shape_, low ? copies_ : parameters_, tokens.data(), labels.data(), batch, factor, hooks, &gradients);

  for (const FaultInjection& fault : faults_)
    for (std::size_t p = 0; p < gradients.size(); ++p)
      if (fault.step == steps_ && layout_[p].recorded == fault.tensor)
        gradients[p](0, 0) = fault.value == FaultInjection::Value::nan ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  bool non_finite = false;
  const std::uint32_t finite_bits = largest_finite_magnitude_bits(f);
  // The sentinel reads the weight gradients in the order the backward makes them, the last layer's
  // first, though they are cast (and draw their random words) in the parameters' order.
  std::vector<std::uint32_t*> gradient_readings(gradients.size());
  for (std::size_t p = gradients.size(); p-- > 0;) gradient_readings[p] = watch(p, TensorKind::weight_gradient);
  for (std::size_t p = 0; p < gradients.size(); ++p) {
    const bool recorded = record && !layout_[p].recorded.empty();
    if (recorded) weight_gradients.push_back(new_record(layout_[p].recorded, TensorKind::weight_gradient));
    std::uint32_t* largest = gradient_readings[p];
    cast(f, low, gradients[p], ctx_, recorded ? &weight_gradients.back() : nullptr, config_.record_blocks, weight_features(gradients[p]), nullptr,
         largest);
    // After the cast: an overflow of the format skips the step. A reading within the format's
    // largest says the cast made nothing non-finite (largest_finite_magnitude_bits).
    if (!non_finite && (largest == nullptr || *largest > finite_bits)) non_finite = any_non_finite(gradients[p]);
  }
  result.skipped = scaler_.update(non_finite);
  if (result.skipped)
    for (std::size_t p = 0; p < parameters_.size(); ++p)
      if (weight_readings[p] != nullptr)
        *weight_readings[p] = largest_magnitude_bits(std::span<const float>(parameters_[p].data(), static_cast<std::size_t>(parameters_[p].size())));
  if (!result.skipped) {
    std::vector<std::span<float>> parameters;
    std::vector<std::span<const float>> scaled_gradients;
    for (std::size_t p = 0; p < parameters_.size(); ++p) {
      parameters.emplace_back(parameters_[p].data(), static_cast<std::size_t>(parameters_[p].size()));
      scaled_gradients.emplace_back(gradients[p].data(), static_cast<std::size_t>(gradients[p].size()));
    }
    update(scale, parameters, scaled_gradients, record);
  }
  result.sentinel = sentinel.take();
  result.scaling = std::move(hooks.scaling);
  result.block_operands = std::move(hooks.block_operands);
  if (record) {
    Snapshot snapshot;
    add_recipe_records(snapshot, config_.recipe, result.scaling, result.block_operands);
    for (TensorRecord& a : hooks.activations) {
      const std::string name = a.name;
      snapshot.tensors.push_back(std::move(a));
      if (auto it = hooks.gradients.find(name); it != hooks.gradients.end()) snapshot.tensors.push_back(std::move(it->second));
    }
    for (std::size_t i = 0; i < weights.size(); ++i) {
      snapshot.tensors.push_back(std::move(weights[i]));
      snapshot.tensors.push_back(std::move(weight_gradients[i]));
    }
    complete_snapshot(snapshot, steps_, result.loss, result.loss_scale, result.skipped);
    result.snapshot = std::move(snapshot);
  }
  ++steps_;
  return result;
}

void GptTrainer::update(float scale, std::span<const std::span<float>> parameters, std::span<const std::span<const float>> gradients,
                        bool recorded) {
  // Where it may (next_cast.hpp), the update makes the next step's cast of the parameters as it
  // writes each range of them, while they are in cache: the linear weights' bf16 bits, into the
  // operands the next step's products take, where those go to the bf16 kernels (the cast makes
  // only them there, OutputReaders::products_only), else every parameter's rounded values.
  // fp16-pure casts its master weights after the update instead.
  const Format f = format();
  const bool making = update_makes_next_cast(config_, ctx_.rounding, recorded);
  const bool as_bits = making && next_cast_as_bits(f);
  for (std::size_t p = 0; making && p < weight_operands_.size(); ++p) {
    if (!weight_operands_[p]) continue;
    weight_operands_[p]->restart();
    if (as_bits && !weight_operands_[p]->start_bits(std::span<float>(copies_[p].data(), static_cast<std::size_t>(copies_[p].size()))))
      throw std::logic_error("GPT update: the next step's weight bits could not be started");
  }
  std::atomic<std::uint8_t> next_flags{0};
  const UpdatedRange make_cast = [&](std::size_t p, std::size_t begin, std::size_t end) {
    const std::span<const float> values(parameters_[p].data() + begin, end - begin);
    ProductOperand* bits = as_bits && weight_operands_[p] ? &*weight_operands_[p] : nullptr;
    next_flags.fetch_or(make_next_cast(f, values, begin, bits, copies_[p].data(), ctx_), std::memory_order_relaxed);
  };
  update_parameters(config_.optimizer, config_.learning_rate, scale, parameters, gradients, optimizer_, making ? make_cast : UpdatedRange{});
  if (making) {
    if (as_bits)
      for (std::optional<ProductOperand>& operand : weight_operands_)
        if (operand) operand->finish_pieces();
    next_cast_made_ = true;
    next_flags_ = next_flags.load();
  }
  if (config_.precision == Precision::fp16_pure)
    for (auto& w : parameters_) cast(formats::fp16, true, w, ctx_, nullptr);
}

TrainerState GptTrainer::position() const {
  TrainerState state;
  state.steps = steps_;
  state.scaler = scaler_.state();
  state.stochastic_counter = ctx_.stochastic_counter;
  state.fp8 = fp8_;
  return state;
}

TrainerState GptTrainer::state() const {
  TrainerState state;
  state.steps = steps_;
  state.weights = parameters_;
  state.biases.assign(parameters_.size(), Eigen::VectorXf());  // every parameter is in `weights`
  state.scaler = scaler_.state();
  state.stochastic_counter = ctx_.stochastic_counter;
  state.optimizer = optimizer_;
  state.fp8 = fp8_;
  return state;
}

void check_gpt_state(const GptShape& shape, const TrainerState& state, std::size_t fp8_slots) {
  const std::vector<GptParameter> layout = gpt_parameters(shape);
  bool fits = state.weights.size() == layout.size() && state.biases.size() == layout.size() && state.steps >= 0;
  for (std::size_t p = 0; fits && p < layout.size(); ++p)
    fits = state.weights[p].rows() == layout[p].rows && state.weights[p].cols() == layout[p].cols && state.biases[p].size() == 0;
  if (!fits) throw std::invalid_argument("the saved training state is not of this model's shape");
  std::vector<std::size_t> sizes;
  for (const GptParameter& p : layout) sizes.push_back(static_cast<std::size_t>(p.rows) * static_cast<std::size_t>(p.cols));
  if (!optimizer_state_fits(state.optimizer, sizes))
    throw std::invalid_argument("the saved optimizer state is not of this model's shape");
  if (state.fp8.size() != fp8_slots)
    throw std::invalid_argument("the saved FP8 scales are not this run's (" + std::to_string(state.fp8.size()) + " tensors, not " +
                                std::to_string(fp8_slots) + ": another recipe?)");
}

void GptTrainer::restore(const TrainerState& state) {
  check_gpt_state(shape_, state, fp8_.size());
  next_cast_made_ = false;  // the parameters change: the next step casts them
  steps_ = state.steps;
  parameters_ = state.weights;
  fp8_ = state.fp8;
  scaler_.restore(state.scaler);
  ctx_.stochastic_counter = state.stochastic_counter;
  optimizer_ = state.optimizer;
}

}  // namespace fpscope
