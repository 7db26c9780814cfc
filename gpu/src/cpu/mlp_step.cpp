// The CPU MLP's step, phase by phase: the casts of the weights, each layer's forward product, the
// loss, each layer's backward products (top down), the scaler's check and the update, the record.
// The phases run in this order and no other: the stochastic-rounding stream is drawn in it.
#include "fpscope/gpu/mlp.hpp"

#include <atomic>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

#include "fpscope/core/bulk.hpp"
#include "cast_tensor.hpp"
#include "activation_pass.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/parallel.hpp"
#include "recording.hpp"
#include "fpscope/gpu/sgd_update.hpp"
#include "fpscope/gpu/step_sentinel.hpp"
#include "next_cast.hpp"

namespace fpscope {

namespace {

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

// One step's tensors, from the weights' casts to the snapshot. Holds references into itself
// (the products' packed operands): neither copied nor moved.
class MlpTrainer::Pass {
 public:
  Pass(MlpTrainer& trainer, const Eigen::MatrixXf& inputs, bool record);
  Pass(const Pass&) = delete;
  Pass& operator=(const Pass&) = delete;

  // The weights' and biases' low-precision copies (the weights recorded), then the inputs'.
  void cast_parameters_and_inputs(const Eigen::MatrixXf& inputs);
  // Layer l's pre-activations z (recorded) and, below the top, the next layer's inputs.
  void forward(std::size_t l);
  // Softmax cross-entropy in float32 on the top layer's z; its gradient dz carries the loss scale.
  void loss(const std::vector<int>& labels);
  // Layer l's weight and bias gradients from dz (recorded), and dz passed down through the
  // activation; whether a gradient held an infinity or a NaN.
  bool backward(std::size_t l);
  // The optimizer's update of the master weights with the gradients unscaled by the step's factor.
  void update();
  // The step's snapshot into `result`.
  void record_snapshot();
  // The step sentinel's readings into `result`. A skipped step leaves the weights as it cast them:
  // their readings are taken from them after the step, and only where it skipped (the only steps
  // whose readings anyone reads), not on every step.
  void take_sentinel() {
    if (result.skipped)
      for (std::size_t l = 0; l < layers_; ++l)
        if (weight_readings_[l] != nullptr)
          *weight_readings_[l] = largest_magnitude_bits(std::span<const float>(t_.weights_[l].data(), static_cast<std::size_t>(t_.weights_[l].size())));
    result.sentinel = sentinel_.take();
  }

  StepResult result;

 private:
  TensorRecord* recorded(std::vector<TensorRecord>& records, std::size_t l) { return record_ ? &records[l] : nullptr; }
  // Layer l's weights as the products take them: their low-precision copy, or in fp32 the master
  // weights themselves (the update comes after the step's last product).
  const Eigen::MatrixXf& weights_of(std::size_t l) const { return low_ ? w_[l] : t_.weights_[l]; }
  // Layer l's inputs as its products take them: the first layer's in fp32 are the batch itself.
  const Eigen::MatrixXf& inputs_of(std::size_t l) const { return l == 0 && !low_ ? batch_inputs_ : a_[l]; }
  // The sentinel's reading of layer l's tensor of `kind`, the next in execution order; none where it is off.
  std::uint32_t* watch(std::size_t l, TensorKind kind) { return config_.sentinel ? sentinel_.watch(mlp_layer_name(l), kind) : nullptr; }
  // Where no recipe makes the products' operands, the casts pack them for the bf16 kernels.
  ProductOperand* for_products(ProductOperand& operand) const { return recipe_ == GemmRecipe::none ? &operand : nullptr; }
  Fp8TensorState& fp8_slot(std::size_t l, GemmOperand operand) { return t_.fp8_[3 * l + static_cast<std::size_t>(operand)]; }
  OperandScaling& fp8_record(std::size_t l) { return new_operand_scaling(result.scaling, mlp_layer_name(l)); }
  // A block-scaled operand of layer l, its quantization counted under (fcN, operand) in the result.
  Eigen::MatrixXf block_operand(std::size_t l, GemmOperand operand, const Eigen::MatrixXf& x, bool along_rows, bool weight_gradient_product = false);
  // Layer l's block-scaled weights for a product: along its reduction axis, or in square tiles
  // quantized by the forward product and kept for the input gradient's.
  Eigen::MatrixXf block_weight(std::size_t l, bool along_rows);
  // The faults injected at this step into layer l's weight gradient, at element (0, 0).
  void inject_faults(std::size_t l, float* values, Eigen::Index first) const;

  MlpTrainer& t_;
  const TrainingConfig& config_;
  Context& ctx_;
  const bool record_;
  const std::size_t layers_;
  const bool low_;
  const Format f_;
  const Eigen::Index batch_;
  const Eigen::MatrixXf& batch_inputs_;
  const GemmRecipe recipe_;
  float scale_ = 1;
  StepSentinel sentinel_;
  std::vector<std::uint32_t*> weight_readings_;  // each layer's weights' reading, taken by take_sentinel
  const std::uint32_t finite_bits_;               // largest_finite_magnitude_bits of the run's format
  std::vector<TensorRecord> activation_, activation_gradient_, weight_, weight_gradient_;
  // Each layer's weights and inputs serve its forward product and one backward product: packed
  // for the bf16 kernels once (gemm.hpp), as their casts make them where no recipe makes the
  // products' operands. The weights' and the first inputs' low-precision copies are read by
  // nothing else then: their casts may make only the bf16 bits (OutputReaders). In fp32 there are
  // no copies: w_ and a_[0] stay empty (weights_of(), inputs_of()). The weights' copies and
  // operands are the trainer's, kept for the next step (update()).
  std::vector<Eigen::MatrixXf>& w_;
  std::vector<Eigen::MatrixXf> a_, z_;
  std::vector<Eigen::VectorXf> b_;
  std::vector<ProductOperand>& weight_operands_;
  std::vector<ProductOperand> input_operands_;
  // Whether the last update made this step's cast of the weights (MlpTrainer::next_weight_cast_made),
  // and the step takes it: it does not record its weights.
  const bool weight_cast_made_;
  // Under a per-tensor FP8 recipe: each layer's operands, made once for both products using them.
  std::vector<Fp8Operand> fp8_input_, fp8_weight_;
  std::vector<Eigen::MatrixXf> tiled_weights_;
  Eigen::MatrixXf dz_;
  std::vector<Eigen::MatrixXf> grad_w_;
  std::vector<Eigen::VectorXf> grad_b_;
};

MlpTrainer::Pass::Pass(MlpTrainer& trainer, const Eigen::MatrixXf& inputs, bool record)
    : t_(trainer),
      config_(trainer.config_),
      ctx_(trainer.ctx_),
      record_(record),
      layers_(trainer.weights_.size()),
      low_(trainer.config_.precision != Precision::fp32),
      f_(trainer.format()),
      batch_(inputs.rows()),
      batch_inputs_(inputs),
      recipe_(trainer.config_.recipe.recipe),
      weight_readings_(layers_, nullptr),
      finite_bits_(largest_finite_magnitude_bits(trainer.format())),
      activation_(layers_),
      activation_gradient_(layers_),
      weight_(layers_),
      weight_gradient_(layers_),
      w_(trainer.low_weights_),
      a_(layers_),
      z_(layers_),
      b_(layers_),
      weight_operands_(trainer.weight_operands_),
      weight_cast_made_(trainer.next_weight_cast_made_ && !record),
      fp8_input_(per_tensor_fp8(recipe_) ? layers_ : 0),
      fp8_weight_(fp8_input_.size()),
      tiled_weights_(config_.recipe.square_weight_tiles ? layers_ : 0),
      grad_w_(layers_),
      grad_b_(layers_) {
  result.loss_scale = t_.scaler_.scale();
  scale_ = static_cast<float>(result.loss_scale);
  t_.next_weight_cast_made_ = false;  // taken now, or cast afresh
  if (!weight_cast_made_)
    for (ProductOperand& operand : weight_operands_) operand.restart();
  for (std::size_t l = 0; l < layers_; ++l) {
    activation_[l] = new_record(mlp_layer_name(l), TensorKind::activation);
    activation_gradient_[l] = new_record(mlp_layer_name(l), TensorKind::activation_gradient);
    weight_[l] = new_record(mlp_layer_name(l), TensorKind::weight);
    weight_gradient_[l] = new_record(mlp_layer_name(l), TensorKind::weight_gradient);
    input_operands_.emplace_back(inputs_of(l));
  }
}

Eigen::MatrixXf MlpTrainer::Pass::block_operand(std::size_t l, GemmOperand operand, const Eigen::MatrixXf& x, bool along_rows,
                                                bool weight_gradient_product) {
  return recipe_block_operand(config_.recipe, operand, x, along_rows, ctx_, &block_operand_statistics(result.block_operands, mlp_layer_name(l), operand),
                              weight_gradient_product);
}

Eigen::MatrixXf MlpTrainer::Pass::block_weight(std::size_t l, bool along_rows) {
  if (!config_.recipe.square_weight_tiles) return block_operand(l, GemmOperand::weight, weights_of(l), along_rows);
  if (tiled_weights_[l].size() == 0) tiled_weights_[l] = block_operand(l, GemmOperand::weight, weights_of(l), along_rows);
  return tiled_weights_[l];
}

void MlpTrainer::Pass::cast_parameters_and_inputs(const Eigen::MatrixXf& inputs) {
  // Low-precision copies of the weights (of fp16 values for fp16-pure); in fp32 the master
  // weights themselves, recorded where they are.
  for (std::size_t l = 0; l < layers_; ++l) {
    if (weight_cast_made_)  // the random words the cast would have taken, none of them read in this mode
      ctx_.stochastic_counter += static_cast<std::uint64_t>(t_.weights_[l].size());
    else if (low_)
      cast_copy(f_, low_, t_.weights_[l], w_[l], ctx_, recorded(weight_, l), config_.record_blocks, FeatureAxis::second,
                for_products(weight_operands_[l]), OutputReaders::products_only);
    else
      cast(f_, low_, t_.weights_[l], ctx_, recorded(weight_, l), config_.record_blocks, FeatureAxis::second);
    weight_readings_[l] = watch(l, TensorKind::weight);  // take_sentinel reads it, where the step skips
    cast_copy(f_, low_, t_.biases_[l], b_[l], ctx_, nullptr);
  }
  if (weight_cast_made_) ctx_.raise(t_.next_weight_flags_);
  if (low_)
    cast_copy(f_, low_, inputs, a_[0], ctx_, nullptr, std::nullopt, FeatureAxis::second, for_products(input_operands_[0]), OutputReaders::products_only);
}

void MlpTrainer::Pass::forward(std::size_t l) {
  // GEMMs on low-precision values with float32 accumulation, outputs rounded. Under a recipe the
  // products see the operands it makes (gemm_recipe.hpp).
  const bool next = l + 1 < layers_;
  TensorRecord* z_record = recorded(activation_, l);
  const std::size_t size = static_cast<std::size_t>(batch_ * weights_of(l).rows());
  if (next) a_[l + 1].resize(batch_, weights_of(l).rows());
  // z's cast, the activation and its cast, in that order in the stochastic stream; started once
  // whatever the product draws (a recipe's operands) has been drawn.
  std::optional<PiecewiseCast> z_cast, a_cast;
  std::uint32_t* z_largest = watch(l, TensorKind::activation);
  const auto start_casts = [&] {
    z_cast.emplace(f_, low_, ctx_, z_record, size);
    z_cast->watch(z_largest);
    if (next) {
      a_cast.emplace(f_, low_, ctx_, nullptr, size);
      a_cast->pack_for_products(for_products(input_operands_[l + 1]));
    }
  };
  const auto add_bias_to = [&](float* values, Eigen::Index first, Eigen::Index columns) {
    for (Eigen::Index j = 0; j < columns; ++j) Eigen::Map<Eigen::ArrayXf>(values + j * batch_, batch_) += b_[l](first + j);
  };
  const auto cast_and_activate = [&](float* values, Eigen::Index first, Eigen::Index columns) {
    const auto offset = static_cast<std::size_t>(first * batch_), n = static_cast<std::size_t>(columns * batch_);
    z_cast->piece(std::span<float>(values, n), offset);
    if (!next) return;
    float* activated = a_[l + 1].data() + offset;
    activation_forward(config_.activation, values, activated, n);
    a_cast->piece(std::span<float>(activated, n), offset);
  };
  // Blocks are recorded from the whole tensor before its cast: such steps finish the product first.
  if (recipe_ == GemmRecipe::none && !(z_record != nullptr && config_.record_blocks)) {
    start_casts();
    z_[l] = gemm(input_operands_[l], false, weight_operands_[l], true, [&](float* values, Eigen::Index first, Eigen::Index columns) {
      add_bias_to(values, first, columns);
      cast_and_activate(values, first, columns);
    });
  } else {
    if (per_tensor_fp8(recipe_)) {
      fp8_input_[l] = quantize_fp8_operand(config_.recipe, GemmOperand::input, inputs_of(l), fp8_slot(l, GemmOperand::input), ctx_, fp8_record(l));
      fp8_weight_[l] = quantize_fp8_operand(config_.recipe, GemmOperand::weight, weights_of(l), fp8_slot(l, GemmOperand::weight), ctx_, fp8_record(l));
      z_[l] = fp8_product(fp8_input_[l].values, false, fp8_input_[l].dequantize, fp8_weight_[l].values, true, fp8_weight_[l].dequantize);
    } else if (block_scaled(recipe_)) {
      // Named in turn: the stochastic stream's order must not be left to the compiler.
      const Eigen::MatrixXf input = block_operand(l, GemmOperand::input, inputs_of(l), false);
      const Eigen::MatrixXf weight_operand = block_weight(l, false);
      z_[l] = gemm(input, false, weight_operand, true);
    } else {
      z_[l] = gemm(input_operands_[l], false, weight_operands_[l], true);
    }
    run_epilogue(z_[l], add_bias_to);
    if (z_record != nullptr && config_.record_blocks) z_record->blocks = block_record(*config_.record_blocks, z_[l]);
    start_casts();
    run_epilogue(z_[l], cast_and_activate);
  }
  z_cast->finish();
  if (next) a_cast->finish();
}

void MlpTrainer::Pass::loss(const std::vector<int>& labels) {
  // softmax_cross_entropy_row's operations on each row, through the vector pass that is held to it
  // bit for bit (cross_entropy_rows): on the logits laid out row by row (column-major, row i's
  // logits are `batch` apart), the gradient laid back.
  const Eigen::MatrixXf rows = z_[layers_ - 1].transpose();  // classes x batch: row i's logits contiguous
  Eigen::MatrixXf gradient_rows(rows.rows(), rows.cols());
  std::vector<float> row_losses(static_cast<std::size_t>(batch_));
  const float factor = scale_ * config_.loss_weight / static_cast<float>(batch_);
  cross_entropy_rows(rows.data(), static_cast<std::size_t>(rows.rows()), static_cast<std::size_t>(batch_), labels.data(), factor,
                     gradient_rows.data(), row_losses.data());
  dz_ = gradient_rows.transpose();
  double loss = 0;  // summed in order
  for (const float row_loss : row_losses) loss += static_cast<double>(row_loss);
  result.loss = loss / static_cast<double>(batch_);
}

void MlpTrainer::Pass::inject_faults(std::size_t l, float* values, Eigen::Index first) const {
  if (first != 0) return;
  for (const FaultInjection& fault : t_.faults_)
    if (fault.step == t_.steps_ && static_cast<std::size_t>(fault.layer) == l + 1)
      values[0] = fault.value == FaultInjection::Value::nan ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
}

bool MlpTrainer::Pass::backward(std::size_t l) {
  ProductOperand gradient_operand(dz_);  // both backward products; dz changes only after them
  cast(f_, low_, dz_, ctx_, recorded(activation_gradient_, l), config_.record_blocks, FeatureAxis::second, for_products(gradient_operand),
       watch(l, TensorKind::activation_gradient));
  Fp8Operand fp8_dz;
  // The weight gradient's faults, then its cast (recorded) and check for infinities and NaNs, on
  // each slice as the product makes it where nothing comes between: the cast is started before
  // the product where the product draws nothing, blocks are recorded from the whole tensor.
  TensorRecord* gw_record = recorded(weight_gradient_, l);
  std::uint32_t* gw_largest = watch(l, TensorKind::weight_gradient);
  std::optional<PiecewiseCast> grad_w_cast;
  // The check is of the values after their cast (an overflow of the format skips the step). Where
  // the sentinel reads the piece before it, a reading within the format's largest says the cast
  // made nothing non-finite, and only a piece above it is looked at again.
  std::atomic<bool> grad_w_non_finite{false};
  const auto cast_and_check = [&](float* values, Eigen::Index first, Eigen::Index columns) {
    const Eigen::Index rows = weights_of(l).rows();
    const std::span<float> slice(values, static_cast<std::size_t>(rows * columns));
    const std::uint32_t top = grad_w_cast->piece(slice, static_cast<std::size_t>(first * rows));
    if ((gw_largest == nullptr || top > finite_bits_) && has_non_finite(slice)) grad_w_non_finite = true;
  };
  const bool fuse_weight_gradient = recipe_ == GemmRecipe::none && !(gw_record != nullptr && config_.record_blocks);
  if (fuse_weight_gradient) {
    grad_w_cast.emplace(f_, low_, ctx_, gw_record, static_cast<std::size_t>(weights_of(l).size()));
    grad_w_cast->watch(gw_largest);
  }
  if (per_tensor_fp8(recipe_)) {
    fp8_dz = quantize_fp8_operand(config_.recipe, GemmOperand::output_gradient, dz_, fp8_slot(l, GemmOperand::output_gradient), ctx_, fp8_record(l));
    grad_w_[l] = fp8_product(fp8_dz.values, true, fp8_dz.dequantize, fp8_input_[l].values, false, fp8_input_[l].dequantize);
  } else if (block_scaled(recipe_)) {
    // The weight gradient's product reduces over the batch: both operands blocked along it.
    const Eigen::MatrixXf gradient = block_operand(l, GemmOperand::output_gradient, dz_, true, true);
    const Eigen::MatrixXf input = block_operand(l, GemmOperand::input, inputs_of(l), true, true);
    grad_w_[l] = gemm(gradient, true, input, false);
  } else {
    grad_w_[l] = gemm(gradient_operand, true, input_operands_[l], false,
                      fuse_weight_gradient ? GemmEpilogue([&](float* values, Eigen::Index first, Eigen::Index columns) {
                        inject_faults(l, values, first);
                        cast_and_check(values, first, columns);
                      })
                                           : GemmEpilogue());
  }
  if (!fuse_weight_gradient) {
    inject_faults(l, grad_w_[l].data(), 0);
    if (gw_record != nullptr && config_.record_blocks) gw_record->blocks = block_record(*config_.record_blocks, grad_w_[l]);
    grad_w_cast.emplace(f_, low_, ctx_, gw_record, static_cast<std::size_t>(grad_w_[l].size()));
    grad_w_cast->watch(gw_largest);
    run_epilogue(grad_w_[l], cast_and_check);
  }
  grad_w_cast->finish();
  grad_b_[l] = column_sums(dz_);
  cast(f_, low_, grad_b_[l], ctx_, nullptr);
  const bool non_finite = grad_w_non_finite || any_non_finite(grad_b_[l]);
  if (l == 0) return non_finite;
  // The previous layer's output gradient, from da = dz W: cast, then through the activation.
  Eigen::MatrixXf next_dz(batch_, weights_of(l).cols());
  std::optional<PiecewiseCast> da_cast;
  const auto cast_and_differentiate = [&](float* values, Eigen::Index first, Eigen::Index columns) {
    const auto offset = static_cast<std::size_t>(first * batch_), n = static_cast<std::size_t>(columns * batch_);
    da_cast->piece(std::span<float>(values, n), offset);
    activation_backward(config_.activation, z_[l - 1].data() + offset, values, next_dz.data() + offset, n);
  };
  if (per_tensor_fp8(recipe_) || block_scaled(recipe_)) {
    Eigen::MatrixXf da;
    if (per_tensor_fp8(recipe_)) {
      da = fp8_product(fp8_dz.values, false, fp8_dz.dequantize, fp8_weight_[l].values, false, fp8_weight_[l].dequantize);
    } else {  // reduces over the layer's outputs
      const Eigen::MatrixXf gradient = block_operand(l, GemmOperand::output_gradient, dz_, false);
      da = gemm(gradient, false, block_weight(l, true), false);
    }
    da_cast.emplace(f_, low_, ctx_, nullptr, static_cast<std::size_t>(da.size()));
    run_epilogue(da, cast_and_differentiate);
  } else {
    da_cast.emplace(f_, low_, ctx_, nullptr, static_cast<std::size_t>(next_dz.size()));
    gemm(gradient_operand, false, weight_operands_[l], false, cast_and_differentiate);
  }
  da_cast->finish();
  dz_ = std::move(next_dz);
  return non_finite;
}

void MlpTrainer::Pass::update() {
  std::vector<std::span<float>> parameters;
  std::vector<std::span<const float>> gradients;
  for (std::size_t l = 0; l < layers_; ++l) {
    parameters.emplace_back(t_.weights_[l].data(), static_cast<std::size_t>(t_.weights_[l].size()));
    gradients.emplace_back(grad_w_[l].data(), static_cast<std::size_t>(grad_w_[l].size()));
    parameters.emplace_back(t_.biases_[l].data(), static_cast<std::size_t>(t_.biases_[l].size()));
    gradients.emplace_back(grad_b_[l].data(), static_cast<std::size_t>(grad_b_[l].size()));
  }
  // Where it may (next_cast.hpp), the update makes the next step's cast of the weights as it
  // writes each range of them, while they are in cache: their bf16 bits, into the operands the
  // next step's products take, as that cast makes only them where the products go to the bf16
  // kernels (OutputReaders::products_only), else their values. fp16-pure casts its master
  // weights after the update instead.
  const bool making = update_makes_next_cast(config_, ctx_.rounding, record_);
  const bool as_bits = making && next_cast_as_bits(f_);
  for (std::size_t l = 0; making && l < layers_; ++l) {
    weight_operands_[l].restart();
    if (as_bits && !weight_operands_[l].start_bits(std::span<float>(w_[l].data(), static_cast<std::size_t>(w_[l].size()))))
      throw std::logic_error("MLP update: the next step's weight bits could not be started");
  }
  std::atomic<std::uint8_t> next_flags{0};
  const UpdatedRange make_cast = [&](std::size_t parameter, std::size_t begin, std::size_t end) {
    if (parameter % 2 != 0) return;  // the biases (weight 2l, bias 2l + 1) are cast by the step
    const std::size_t l = parameter / 2;
    const std::span<const float> weights(t_.weights_[l].data() + begin, end - begin);
    next_flags.fetch_or(make_next_cast(f_, weights, begin, as_bits ? &weight_operands_[l] : nullptr, w_[l].data(), ctx_), std::memory_order_relaxed);
  };
  update_parameters(config_.optimizer, config_.learning_rate, scale_, parameters, gradients, t_.optimizer_, making ? make_cast : UpdatedRange{});
  if (making) {
    if (as_bits)
      for (ProductOperand& operand : weight_operands_) operand.finish_pieces();
    t_.next_weight_cast_made_ = true;
    t_.next_weight_flags_ = next_flags.load();
  }
  if (config_.precision == Precision::fp16_pure)
    for (std::size_t l = 0; l < layers_; ++l) {
      cast(formats::fp16, true, t_.weights_[l], ctx_, nullptr);
      cast(formats::fp16, true, t_.biases_[l], ctx_, nullptr);
    }
}

void MlpTrainer::Pass::record_snapshot() {
  Snapshot snapshot;
  add_recipe_records(snapshot, config_.recipe, result.scaling, result.block_operands);
  for (std::size_t l = 0; l < layers_; ++l) {
    snapshot.tensors.push_back(std::move(activation_[l]));
    snapshot.tensors.push_back(std::move(activation_gradient_[l]));
    snapshot.tensors.push_back(std::move(weight_[l]));
    snapshot.tensors.push_back(std::move(weight_gradient_[l]));
  }
  complete_snapshot(snapshot, t_.steps_, result.loss, result.loss_scale, result.skipped);
  result.snapshot = std::move(snapshot);
}

StepResult MlpTrainer::step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record) {
  if (inputs.cols() != config_.layer_sizes.front() || static_cast<std::size_t>(inputs.rows()) != labels.size())
    throw std::invalid_argument("step: inputs are " + std::to_string(inputs.rows()) + "x" + std::to_string(inputs.cols()) + " with " +
                                std::to_string(labels.size()) + " labels; the model takes " + std::to_string(config_.layer_sizes.front()) +
                                " features");
  const ParallelStep step_scope;  // the workers stay awake between the step's passes
  Pass pass(*this, inputs, record);
  pass.cast_parameters_and_inputs(inputs);
  for (std::size_t l = 0; l < weights_.size(); ++l) pass.forward(l);
  pass.loss(labels);
  bool non_finite = false;
  for (std::size_t l = weights_.size(); l-- > 0;) non_finite = pass.backward(l) || non_finite;
  // A gradient that overflowed skips the update.
  pass.result.skipped = scaler_.update(non_finite);
  if (!pass.result.skipped) pass.update();
  if (record) pass.record_snapshot();
  pass.take_sentinel();  // before ++steps_; the weights as the step found them where it skipped
  ++steps_;
  return std::move(pass.result);
}

}  // namespace fpscope
