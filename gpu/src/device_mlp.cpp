// The MLP's step on DeviceOps (device_mlp.hpp): mlp.cpp's recipe, step for step -- the same tensors
// cast in the same order (so the same random words), recorded in the same slots.
#include "fpscope/gpu/device_mlp.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "device_step.hpp"

namespace fpscope {

using device_step::Buffer;
using device_step::record_stride;

namespace {

// The read-back's scalars: the batch's loss sum and the step's scale (float32 each) in word 0,
// the skip flag in word 1; then, for a recorded step, each layer's four tensors' records.
constexpr std::size_t scalar_words = 2;
constexpr TensorKind kinds[] = {TensorKind::activation, TensorKind::activation_gradient, TensorKind::weight, TensorKind::weight_gradient};

}  // namespace

struct DeviceMlpTrainer::Memory {
  // Per layer: master weights and biases, the biases' low-precision copies (float32, for the bias
  // add), gradients, the weights' 16-bit copies as the products read them.
  std::vector<Buffer<float>> weights, biases, biases_low, grad_w, grad_b;
  std::vector<Buffer<std::uint16_t>> weights_16;
  std::vector<std::size_t> sizes;  // the optimizer's order: weight 2l, bias 2l + 1
  device_step::Optimizer optimizer;
  Buffer<LossScalerState> scaler;
  Buffer<int> found_non_finite;
  Buffer<unsigned long long> readback;
  std::vector<unsigned long long> host_readback;
  // Sized for one batch: per layer its input activations and pre-activations, the 16-bit
  // operands; the gradients passed down; the labels and each row's loss.
  int batch = 0;
  std::vector<Buffer<float>> a, z;
  std::vector<Buffer<std::uint16_t>> a_16, dz_16;
  Buffer<float> dz, da, row_loss;
  Buffer<int> labels;
  // Under a recipe: its quantizer (device_step.hpp); the weights' low-precision copies as float32,
  // the operands it quantizes (the activations are cast in place under a recipe); each layer's FP8
  // input and weight from its forward product to its backward ones, with their dequantization
  // factors; room for two block-scaled operands or one FP8 dz.
  device_step::DeviceRecipe recipe;
  std::vector<Buffer<float>> weights_low, fp8_inputs, fp8_weights;
  std::vector<float> input_dequantize, weight_dequantize;
  Buffer<float> operand_a, operand_b;
  device_step::BlockRecorder block_recorder;  // --record-blocks
};

DeviceMlpTrainer::DeviceMlpTrainer(const TrainingConfig& config, std::unique_ptr<DeviceOps> ops)
    : config_(config), ops_(std::move(ops)), memory_(std::make_unique<Memory>()) {
  if (!ops_) throw std::invalid_argument("a device MLP needs its device's operations");
  Memory& m = *memory_;
  DeviceOps& device = *ops_;
  // The same initial weights as the CPU backend: built there, copied here.
  const MlpTrainer reference(config);
  const TrainerState initial = reference.state();
  const std::size_t layers = config.layer_sizes.size() - 1;
  const bool low = config.precision != Precision::fp32;
  for (std::size_t l = 0; l < layers; ++l) {
    const std::size_t w = static_cast<std::size_t>(initial.weights[l].size()), b = static_cast<std::size_t>(initial.biases[l].size());
    m.weights.emplace_back(device, w);
    m.biases.emplace_back(device, b);
    m.biases_low.emplace_back(device, b);
    m.grad_w.emplace_back(device, w);
    m.grad_b.emplace_back(device, b);
    m.weights_16.emplace_back(device, low ? w : 0);
    m.sizes.push_back(w);
    m.sizes.push_back(b);
  }
  m.recipe = device_step::DeviceRecipe(device, config, initial.fp8.size());
  for (std::size_t l = 0; l < layers && m.recipe.active(); ++l) {
    m.weights_low.emplace_back(device, low ? m.sizes[2 * l] : 0);
    m.fp8_weights.emplace_back(device, per_tensor_fp8(config.recipe.recipe) ? m.sizes[2 * l] : 0);
  }
  m.optimizer = device_step::Optimizer(device, config.optimizer, m.sizes);
  if (config.record_blocks) m.block_recorder = device_step::BlockRecorder(device);
  m.found_non_finite = Buffer<int>(device, 1);
  m.scaler = Buffer<LossScalerState>(device, 1);
  m.readback = Buffer<unsigned long long>(device, scalar_words + 4 * layers * record_stride);
  m.host_readback.resize(m.readback.size());
  restore(initial);
}

DeviceMlpTrainer::~DeviceMlpTrainer() = default;

TrainerState DeviceMlpTrainer::state() const {
  const Memory& m = *memory_;
  TrainerState s;
  s.steps = steps_;
  for (std::size_t l = 0; l + 1 < config_.layer_sizes.size(); ++l) {
    Eigen::MatrixXf w(config_.layer_sizes[l + 1], config_.layer_sizes[l]);
    Eigen::VectorXf b(config_.layer_sizes[l + 1]);
    ops_->download(w.data(), m.weights[l].data(), m.weights[l].bytes());
    ops_->download(b.data(), m.biases[l].data(), m.biases[l].bytes());
    s.weights.push_back(std::move(w));
    s.biases.push_back(std::move(b));
  }
  s.scaler = scaler_state();
  s.stochastic_counter = stochastic_counter_;
  s.optimizer = m.optimizer.state(*ops_);
  s.fp8 = m.recipe.fp8();
  return s;
}

void DeviceMlpTrainer::restore(const TrainerState& state) {
  Memory& m = *memory_;
  check_mlp_state(config_.layer_sizes, state, m.recipe.fp8().size());
  m.recipe.restore_fp8(state.fp8);
  m.optimizer.restore(*ops_, state.optimizer);
  for (std::size_t l = 0; l < m.weights.size(); ++l) {
    ops_->upload(m.weights[l].data(), state.weights[l].data(), m.weights[l].bytes());
    ops_->upload(m.biases[l].data(), state.biases[l].data(), m.biases[l].bytes());
  }
  ops_->upload(m.scaler.data(), &state.scaler, sizeof(LossScalerState));
  steps_ = state.steps;
  stochastic_counter_ = state.stochastic_counter;
}

void DeviceMlpTrainer::reconfigure_scaler(const LossScalerConfig& config) {
  device_step::reconfigure_scaler(*ops_, memory_->scaler.data(), config_.scaler, config);
}

LossScalerState DeviceMlpTrainer::scaler_state() const { return device_step::scaler_state(*ops_, memory_->scaler.data()); }

StepResult DeviceMlpTrainer::step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool read_loss) {
  Memory& m = *memory_;
  DeviceOps& ops = *ops_;
  const std::size_t layers = config_.layer_sizes.size() - 1;
  const int batch = static_cast<int>(inputs.rows());
  if (inputs.cols() != config_.layer_sizes.front() || static_cast<std::size_t>(batch) != labels.size())
    throw std::invalid_argument("step: the inputs do not fit the model");
  const bool low = config_.precision != Precision::fp32;
  const bool bf16 = config_.precision == Precision::bf16;

  if (m.batch != batch) {  // (re)size the activation buffers
    m.a.clear(), m.z.clear(), m.a_16.clear(), m.dz_16.clear();
    const auto rows = static_cast<std::size_t>(batch);
    for (std::size_t l = 0; l < layers; ++l) {
      m.a.emplace_back(ops, rows * static_cast<std::size_t>(config_.layer_sizes[l]));
      m.a_16.emplace_back(ops, low ? rows * static_cast<std::size_t>(config_.layer_sizes[l]) : 0);
      m.z.emplace_back(ops, rows * static_cast<std::size_t>(config_.layer_sizes[l + 1]));
      m.dz_16.emplace_back(ops, low ? rows * static_cast<std::size_t>(config_.layer_sizes[l + 1]) : 0);
    }
    const auto widest = static_cast<std::size_t>(*std::max_element(config_.layer_sizes.begin(), config_.layer_sizes.end()));
    m.dz = Buffer<float>(ops, rows * widest);
    m.da = Buffer<float>(ops, rows * widest);
    m.row_loss = Buffer<float>(ops, rows);
    m.labels = Buffer<int>(ops, rows);
    if (m.recipe.active()) {
      std::size_t largest = 0;  // the largest operand: a layer's input, output gradient or weights
      for (std::size_t l = 0; l < layers; ++l)
        largest = std::max({largest, rows * static_cast<std::size_t>(config_.layer_sizes[l]), rows * static_cast<std::size_t>(config_.layer_sizes[l + 1]),
                            m.sizes[2 * l]});
      m.operand_a = Buffer<float>(ops, largest);
      m.operand_b = Buffer<float>(ops, largest);
      m.fp8_inputs.clear();
      if (per_tensor_fp8(m.recipe.recipe()))
        for (std::size_t l = 0; l < layers; ++l) m.fp8_inputs.emplace_back(ops, rows * static_cast<std::size_t>(config_.layer_sizes[l]));
    }
    m.batch = batch;
  }
  // The batch as Eigen holds it (column-major batch x features): no reordering on the host.
  ops.upload(m.a[0].data(), inputs.data(), sizeof(float) * static_cast<std::size_t>(inputs.size()));
  ops.upload(m.labels.data(), labels.data(), sizeof(int) * labels.size());
  unsigned long long* records = m.readback.data() + scalar_words;
  if (record) ops.zero(records, sizeof(unsigned long long) * (m.readback.size() - scalar_words));

  // Block statistics of the recorded tensors (--record-blocks), made on the device from the values
  // before their cast, as the CPU backend makes them: per layer and kind.
  std::vector<std::optional<BlockRecord>> blocks(4 * layers);
  const auto record_blocks = [&](std::size_t l, int kind, const float* values, int rows, int cols) {
    if (record && config_.record_blocks)
      blocks[4 * l + static_cast<std::size_t>(kind)] =
          m.block_recorder.record(ops, *config_.record_blocks, values, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols),
                                  FeatureAxis::second);
  };
  // Where tensor (layer, kind) records, kinds in the snapshot's order; nowhere when unrecorded.
  const auto slots = [&](std::size_t l, int kind, bool recorded) {
    return recorded ? device_step::record_slots(records + (4 * l + static_cast<std::size_t>(kind)) * record_stride) : RecordSlots{};
  };
  // The cast of n values from `in` to `out` (float32; null where nothing reads them) and `packed`
  // (16-bit; null where no product reads them), taking n random words; the fp32 policy casts
  // nothing and records the histogram of `in` where asked.
  const auto cast = [&](const float* in, float* out, std::uint16_t* packed, std::size_t n, RecordSlots into) {
    if (low) {
      ops.cast(in, out, packed, n, bf16, config_.rounding, into, config_.seed, stochastic_counter_);
      stochastic_counter_ += n;
    } else if (into.histogram != nullptr) {
      ops.record_histogram(in, n, into.histogram);
    }
  };
  // C (rows x cols) = op(A) op(B), all column-major; 16-bit operands in low precision.
  const auto product = [&](bool ta, bool tb, int rows, int cols, int k, const float* a32, const std::uint16_t* a16, int lda, const float* b32,
                           const std::uint16_t* b16, int ldb, float* c, int ldc) {
    ProductCall call;
    call.transpose_a = ta, call.transpose_b = tb, call.m = rows, call.n = cols, call.k = k;
    call.a = {a32, a16, lda, 0}, call.b = {b32, b16, ldb, 0}, call.c = c, call.ldc = ldc, call.sixteen = low, call.bf16 = bf16;
    ops.product(call);
  };

  // Low-precision copies of the weights (16-bit, for the products) and biases (float32, for the
  // bias add); the fp32 policy reads the master weights themselves.
  // Under a recipe the products read the operands it makes from float32 values: the weights'
  // copies and the activations cast in place, no 16-bit patterns.
  const bool recipe_active = m.recipe.active();
  for (std::size_t l = 0; l < layers; ++l) {
    record_blocks(l, 2, m.weights[l].data(), config_.layer_sizes[l + 1], config_.layer_sizes[l]);
    cast(m.weights[l].data(), recipe_active && low ? m.weights_low[l].data() : nullptr, recipe_active ? nullptr : m.weights_16[l].data(),
         m.weights[l].size(), slots(l, 2, record));
    cast(m.biases[l].data(), m.biases_low[l].data(), nullptr, m.biases[l].size(), {});
  }
  const auto bias = [&](std::size_t l) { return low ? m.biases_low[l].data() : m.biases[l].data(); };
  // Forward: z (batch x out) = a (batch x in) W^T (W: out x in). In low precision the products read
  // the 16-bit operands the casts wrote; the float32 activations a are not rounded.
  StepResult result;
  // Under a recipe, products of the float32 operands it makes (DeviceRecipe), each drawing its
  // random words where the CPU's step draws them: just before its product.
  const GemmRecipe recipe = m.recipe.recipe();
  const auto recipe_product = [&](bool ta, bool tb, int rows, int cols, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc,
                                  float alpha) { device_step::DeviceRecipe::product(ops, ta, tb, rows, cols, k, a, lda, b, ldb, c, ldc, alpha); };
  const auto layer_name = [](std::size_t l) { return "fc" + std::to_string(l + 1); };
  const auto block_operand = [&](std::size_t l, GemmOperand operand, const float* x, int rows, int cols, bool along_rows, float* device) {
    m.recipe.block_operand(ops, operand, x, rows, cols, along_rows, block_operand_index(result.block_operands, layer_name(l), operand), stochastic_counter_,
                           device);
  };
  const auto fp8_operand = [&](std::size_t l, GemmOperand operand, const float* x, std::size_t n, float* device) {
    return m.recipe.fp8_operand(ops, operand, x, n, 3 * l + static_cast<std::size_t>(operand), new_operand_scaling(result.scaling, layer_name(l)),
                                stochastic_counter_, device);
  };
  const auto weight_operand = [&](std::size_t l) { return low ? m.weights_low[l].data() : m.weights[l].data(); };
  if (recipe_active) m.recipe.begin_step(ops), m.input_dequantize.assign(layers, 1.0f), m.weight_dequantize.assign(layers, 1.0f);
  cast(m.a[0].data(), recipe_active ? m.a[0].data() : nullptr, recipe_active ? nullptr : m.a_16[0].data(), m.a[0].size(), {});
  for (std::size_t l = 0; l < layers; ++l) {
    const int in = config_.layer_sizes[l], out = config_.layer_sizes[l + 1];
    if (!recipe_active) {
      product(false, true, batch, out, in, m.a[l].data(), m.a_16[l].data(), batch, m.weights[l].data(), m.weights_16[l].data(), out, m.z[l].data(), batch);
    } else if (per_tensor_fp8(recipe)) {
      m.input_dequantize[l] = fp8_operand(l, GemmOperand::input, m.a[l].data(), m.a[l].size(), m.fp8_inputs[l].data());
      m.weight_dequantize[l] = fp8_operand(l, GemmOperand::weight, weight_operand(l), m.sizes[2 * l], m.fp8_weights[l].data());
      recipe_product(false, true, batch, out, in, m.fp8_inputs[l].data(), batch, m.fp8_weights[l].data(), out, m.z[l].data(), batch,
                     fp8_product_factor(m.input_dequantize[l], m.weight_dequantize[l]));
    } else {  // both blocked along the layer's inputs, which the product reduces over
      block_operand(l, GemmOperand::input, m.a[l].data(), batch, in, false, m.operand_a.data());
      block_operand(l, GemmOperand::weight, weight_operand(l), out, in, false, m.operand_b.data());
      recipe_product(false, true, batch, out, in, m.operand_a.data(), batch, m.operand_b.data(), out, m.z[l].data(), batch, 1.0f);
    }
    ops.add_column_bias(m.z[l].data(), bias(l), batch, out);
    record_blocks(l, 0, m.z[l].data(), batch, out);
    cast(m.z[l].data(), m.z[l].data(), nullptr, m.z[l].size(), slots(l, 0, record));
    if (l + 1 < layers) {
      ops.activation_forward(m.z[l].data(), m.a[l + 1].data(), m.z[l].size(), config_.activation);
      cast(m.a[l + 1].data(), recipe_active ? m.a[l + 1].data() : nullptr, recipe_active ? nullptr : m.a_16[l + 1].data(), m.a[l + 1].size(), {});
    }
  }
  // Loss in float32; its gradient carries the loss scale (read on the device).
  const int classes = config_.layer_sizes.back();
  float* loss_sum = reinterpret_cast<float*>(m.readback.data());
  float* step_scale = loss_sum + 1;
  int* skip = reinterpret_cast<int*>(m.readback.data() + 1);
  ops.cross_entropy_rows(m.z[layers - 1].data(), m.labels.data(), batch, classes, m.scaler.data(), config_.loss_weight, m.dz.data(), m.row_loss.data());
  ops.ordered_sum(m.row_loss.data(), batch, loss_sum);
  // Backward.
  ops.zero(m.found_non_finite.data(), sizeof(int));
  for (std::size_t l = layers; l-- > 0;) {
    const int in = config_.layer_sizes[l], out = config_.layer_sizes[l + 1];
    const std::size_t n_dz = static_cast<std::size_t>(batch) * static_cast<std::size_t>(out);
    record_blocks(l, 1, m.dz.data(), batch, out);
    cast(m.dz.data(), m.dz.data(), m.dz_16[l].data(), n_dz, slots(l, 1, record));
    // grad_W (out x in) = dz^T (dz: batch x out) a (batch x in)
    float dz_dequantize = 1.0f;
    if (!recipe_active) {
      product(true, false, out, in, batch, m.dz.data(), m.dz_16[l].data(), batch, m.a[l].data(), m.a_16[l].data(), batch, m.grad_w[l].data(), out);
    } else if (per_tensor_fp8(recipe)) {  // the FP8 dz serves both backward products
      dz_dequantize = fp8_operand(l, GemmOperand::output_gradient, m.dz.data(), n_dz, m.operand_a.data());
      recipe_product(true, false, out, in, batch, m.operand_a.data(), batch, m.fp8_inputs[l].data(), batch, m.grad_w[l].data(), out,
                     fp8_product_factor(dz_dequantize, m.input_dequantize[l]));
    } else {  // both blocked along the batch, which the product reduces over
      block_operand(l, GemmOperand::output_gradient, m.dz.data(), batch, out, true, m.operand_a.data());
      block_operand(l, GemmOperand::input, m.a[l].data(), batch, in, true, m.operand_b.data());
      recipe_product(true, false, out, in, batch, m.operand_a.data(), batch, m.operand_b.data(), batch, m.grad_w[l].data(), out, 1.0f);
    }
    ops.column_sums(m.dz.data(), batch, out, m.grad_b[l].data());
    for (const FaultInjection& fault : faults_)
      if (fault.step == steps_ && static_cast<std::size_t>(fault.layer) == l + 1) {
        const float bad = fault.value == FaultInjection::Value::nan ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
        ops.upload(m.grad_w[l].data(), &bad, sizeof bad);
      }
    record_blocks(l, 3, m.grad_w[l].data(), out, in);
    cast(m.grad_w[l].data(), m.grad_w[l].data(), nullptr, m.grad_w[l].size(), slots(l, 3, record));
    cast(m.grad_b[l].data(), m.grad_b[l].data(), nullptr, m.grad_b[l].size(), {});
    if (l > 0) {
      // dA (batch x in) = dz (batch x out) W (out x in)
      if (!recipe_active) {
        product(false, false, batch, in, out, m.dz.data(), m.dz_16[l].data(), batch, m.weights[l].data(), m.weights_16[l].data(), out, m.da.data(),
                batch);
      } else if (per_tensor_fp8(recipe)) {
        recipe_product(false, false, batch, in, out, m.operand_a.data(), batch, m.fp8_weights[l].data(), out, m.da.data(), batch,
                       fp8_product_factor(dz_dequantize, m.weight_dequantize[l]));
      } else {  // both blocked along the layer's outputs, which the product reduces over
        block_operand(l, GemmOperand::output_gradient, m.dz.data(), batch, out, false, m.operand_a.data());
        block_operand(l, GemmOperand::weight, weight_operand(l), out, in, true, m.operand_b.data());
        recipe_product(false, false, batch, in, out, m.operand_a.data(), batch, m.operand_b.data(), out, m.da.data(), batch, 1.0f);
      }
      const std::size_t n_da = static_cast<std::size_t>(batch) * static_cast<std::size_t>(in);
      cast(m.da.data(), m.da.data(), nullptr, n_da, {});
      ops.activation_backward(m.z[l - 1].data(), m.da.data(), n_da, config_.activation);
      std::swap(m.dz, m.da);
    }
  }
  if (recipe_active) m.recipe.finish_step(ops, result.scaling, result.block_operands);
  // Check the gradients, advance the scaler, update unless skipped: all on the device. The
  // gradients keep their loss scale; the update divides it out, as the CPU does.
  for (std::size_t l = 0; l < layers; ++l) {
    ops.find_non_finite(m.grad_w[l].data(), m.grad_w[l].size(), m.found_non_finite.data());
    ops.find_non_finite(m.grad_b[l].data(), m.grad_b[l].size(), m.found_non_finite.data());
  }
  ops.update_scaler(config_.scaler, m.scaler.data(), m.found_non_finite.data(), skip, step_scale);
  std::vector<float*> parameters;
  std::vector<const float*> gradients;
  for (std::size_t l = 0; l < layers; ++l) {
    parameters.push_back(m.weights[l].data()), gradients.push_back(m.grad_w[l].data());
    parameters.push_back(m.biases[l].data()), gradients.push_back(m.grad_b[l].data());
  }
  m.optimizer.update(ops, config_.learning_rate, parameters, gradients, m.sizes, step_scale, skip);
  // fp16-pure re-casts the weights after an update only, as the CPU backend does: a skipped step
  // leaves them, and the stochastic-rounding counter, as they were. The host must know whether
  // this step was skipped before it queues the casts: one read-back a step, in this mode only.
  if (config_.precision == Precision::fp16_pure) {
    int skipped = 0;
    ops.download(&skipped, skip, sizeof skipped);
    if (skipped == 0)
      for (std::size_t l = 0; l < layers; ++l) {
        cast(m.weights[l].data(), m.weights[l].data(), nullptr, m.weights[l].size(), {});
        cast(m.biases[l].data(), m.biases[l].data(), nullptr, m.biases[l].size(), {});
      }
  }

  result.loss = std::numeric_limits<double>::quiet_NaN();
  result.loss_scale = std::numeric_limits<double>::quiet_NaN();
  if (record || read_loss) {
    // One read-back: the scalars, and the records of a recorded step.
    const std::size_t words = record ? m.readback.size() : scalar_words;
    ops.download(m.host_readback.data(), m.readback.data(), sizeof(unsigned long long) * words);
    float sum = 0, scale = 0;
    int skipped = 0;
    std::memcpy(&sum, m.host_readback.data(), sizeof sum);
    std::memcpy(&scale, reinterpret_cast<const char*>(m.host_readback.data()) + sizeof(float), sizeof scale);
    std::memcpy(&skipped, m.host_readback.data() + 1, sizeof skipped);
    result.loss = static_cast<double>(sum) / batch;
    result.loss_scale = scale;
    result.skipped = skipped != 0;
    if (record) {
      Snapshot snapshot;
      for (std::size_t l = 0; l < layers; ++l)
        for (std::size_t k = 0; k < 4; ++k) {
          snapshot.tensors.push_back(device_step::counted_record("fc" + std::to_string(l + 1), kinds[k],
                                                                 m.host_readback.data() + scalar_words + (4 * l + k) * record_stride, low));
          snapshot.tensors.back().blocks = std::move(blocks[4 * l + k]);
        }
      add_recipe_records(snapshot, config_.recipe, result.scaling, result.block_operands);
      complete_snapshot(snapshot, steps_, result.loss, result.loss_scale, result.skipped);
      result.snapshot = std::move(snapshot);
    }
  }
  ++steps_;
  return result;
}

}  // namespace fpscope
