// The MLP's step on DeviceOps (device_mlp.hpp): mlp.cpp's recipe, step for step -- the same tensors
// cast in the same order (so the same random words), recorded in the same slots.
#include "fpscope/gpu/device_mlp.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "device_step.hpp"
#include "step_graphs.hpp"

namespace fpscope {

using device_step::Buffer;
using device_step::record_stride;

namespace {

// The read-back's scalars: the batch's loss sum and the step's scale (float32 each) in word 0,
// the skip flag in word 1; then, for a recorded step, each layer's four tensors' records.
constexpr std::size_t mlp_scalar_words = 2;
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
  Buffer<std::uint32_t> sentinel;  // the step sentinel's readings, 4 per layer, in execution order
  device_step::StochasticCounter counter;  // the next random word's index, as MlpTrainer's ctx
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
    : config_(config),
      ops_(with_step_graphs(std::move(ops), config.step_graphs)),
      graphs_(static_cast<StepGraphOps*>(ops_.get())),
      memory_(std::make_unique<Memory>()) {
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
  m.readback = Buffer<unsigned long long>(device, mlp_scalar_words + 4 * layers * record_stride);
  m.host_readback.resize(m.readback.size());
  m.sentinel = Buffer<std::uint32_t>(device, 4 * layers);
  m.counter = device_step::StochasticCounter(device, config.seed);
  restore(initial);
}

DeviceMlpTrainer::~DeviceMlpTrainer() = default;

TrainerState DeviceMlpTrainer::position() const {
  return device_step::position_of(steps_, scaler_state(), memory_->counter.value(*ops_), memory_->recipe.fp8());
}

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
  s.stochastic_counter = m.counter.value(*ops_);
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
  m.counter.restore(*ops_, state.stochastic_counter);
}

void DeviceMlpTrainer::reconfigure_scaler(const LossScalerConfig& config) {
  device_step::reconfigure_scaler(*ops_, memory_->scaler.data(), config_.scaler, config);
  graphs_->forget();  // the scaler's launch takes its rule by value
}

StepGraphStatistics DeviceMlpTrainer::graph_statistics() const { return graphs_->statistics(); }

LossScalerState DeviceMlpTrainer::scaler_state() const { return device_step::scaler_state(*ops_, memory_->scaler.data()); }

// One step's phases on the device, in the CPU step's order (mlp_step.cpp): the same casts draw the
// same random words.
class DeviceMlpTrainer::Pass {
 public:
  Pass(DeviceMlpTrainer& trainer, int batch, bool record);
  // Sizes the activation buffers for the batch (kept while batches keep their size).
  void fit_batch();
  // The batch and its labels uploaded as Eigen holds them (column-major batch x features).
  void upload(const Eigen::MatrixXf& inputs, const std::vector<int>& labels);
  // Low-precision copies of the weights (16-bit, for the products; recorded) and biases (float32,
  // for the bias add), then of the inputs; the fp32 policy reads the master weights themselves.
  // Under a recipe the products read the operands it makes from float32 values: the weights'
  // copies and the activations cast in place, no 16-bit patterns.
  void cast_parameters_and_inputs();
  // z (batch x out) = a (batch x in) W^T (W: out x in), biased, cast (recorded), activated and cast
  // for the next layer. In low precision the products read the 16-bit operands the casts wrote.
  void forward(std::size_t l);
  // Cross-entropy in float32; its gradient carries the loss scale (read on the device). Clears the
  // non-finite flag for check_and_update.
  void loss();
  // Layer l's weight and bias gradients from dz (recorded), and dz passed down (above layer 0).
  void backward(std::size_t l);
  // Checks the gradients, advances the scaler, updates unless skipped: all on the device. The
  // gradients keep their loss scale; the update divides it out, as the CPU does.
  void check_and_update();
  // One read-back: the scalars, and the records of a recorded step into its snapshot.
  void read_back(bool read_loss);

  StepResult result;

 private:
  // Where tensor (layer, kind) records, kinds in the snapshot's order; nowhere when unrecorded.
  RecordSlots slots(std::size_t l, int kind) const {
    return record_ ? device_step::record_slots(records_ + (4 * l + static_cast<std::size_t>(kind)) * record_stride) : RecordSlots{};
  }
  // Block statistics of a recorded tensor (--record-blocks), made on the device from the values
  // before their cast, as the CPU backend makes them: per layer and kind.
  void record_blocks(std::size_t l, int kind, const float* values, int rows, int cols);
  // The cast of n values from `in` to `out` (float32; null where nothing reads them) and `packed`
  // (16-bit; null where no product reads them), taking n random words; the fp32 policy casts
  // nothing and records the histogram of `in` where asked. into.largest, where given (watched),
  // takes the sentinel's reading of `in` in the same pass (the fp32 policy's histogram pass,
  // recording or not).
  void cast(const float* in, float* out, std::uint16_t* packed, std::size_t n, RecordSlots into);
  // Where the step sentinel's reading of layer l's tensor of `kind` goes, the next in execution
  // order (its largest magnitude bits, kept on the device until read_back wants it): the cast of
  // the tensor takes it. Null where the sentinel is off.
  std::uint32_t* watch(std::size_t l, TensorKind kind) {
    if (!config_.sentinel) return nullptr;
    watched_.push_back({mlp_layer_name(l), kind, 0});
    return m_.sentinel.data() + (watched_.size() - 1);
  }
  // `into` with the sentinel's reading of layer l's tensor of `kind` (watch).
  RecordSlots watched(RecordSlots into, std::size_t l, TensorKind kind) {
    into.largest = watch(l, kind);
    return into;
  }
  // C (rows x cols) = op(A) op(B), all column-major; 16-bit operands in low precision.
  void product(bool ta, bool tb, int rows, int cols, int k, const float* a32, const std::uint16_t* a16, int lda, const float* b32,
               const std::uint16_t* b16, int ldb, float* c, int ldc);
  // Under a recipe, a product of the float32 operands it makes (DeviceRecipe), each drawing its
  // random words where the CPU's step draws them: just before its product.
  void recipe_product(bool ta, bool tb, int rows, int cols, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc, float alpha);
  void block_operand(std::size_t l, GemmOperand operand, const float* x, int rows, int cols, bool along_rows, float* device);
  float fp8_operand(std::size_t l, GemmOperand operand, const float* x, std::size_t n, float* device);
  const float* weight_operand(std::size_t l) const { return low_ ? m_.weights_low[l].data() : m_.weights[l].data(); }
  const float* bias(std::size_t l) const { return low_ ? m_.biases_low[l].data() : m_.biases[l].data(); }

  DeviceMlpTrainer& t_;
  const TrainingConfig& config_;
  Memory& m_;
  DeviceOps& ops_;
  const std::size_t layers_;
  const int batch_;
  const bool record_;
  const bool low_;
  const bool bf16_;
  const bool recipe_active_;
  const GemmRecipe recipe_;
  unsigned long long* records_;
  std::vector<std::optional<BlockRecord>> blocks_;
  int* skip_;           // read-back word 1
  float* step_scale_;   // read-back word 0's second float
  float dz_dequantize_ = 1.0f;  // the FP8 dz's, from the weight gradient's product to the input gradient's
  std::vector<SentinelReading> watched_;  // the sentinel's tensors in execution order, read back when wanted
  std::vector<std::size_t> weight_readings_;  // layer l's weights' place in watched_
};

DeviceMlpTrainer::Pass::Pass(DeviceMlpTrainer& trainer, int batch, bool record)
    : t_(trainer),
      config_(trainer.config_),
      m_(*trainer.memory_),
      ops_(*trainer.ops_),
      layers_(trainer.config_.layer_sizes.size() - 1),
      batch_(batch),
      record_(record),
      low_(trainer.config_.precision != Precision::fp32),
      bf16_(trainer.config_.precision == Precision::bf16),
      recipe_active_(trainer.memory_->recipe.active()),
      recipe_(trainer.memory_->recipe.recipe()),
      records_(trainer.memory_->readback.data() + mlp_scalar_words),
      blocks_(4 * layers_),
      skip_(reinterpret_cast<int*>(trainer.memory_->readback.data() + 1)),
      step_scale_(reinterpret_cast<float*>(trainer.memory_->readback.data()) + 1) {}

void DeviceMlpTrainer::Pass::fit_batch() {
  if (m_.batch == batch_) return;
  m_.a.clear(), m_.z.clear(), m_.a_16.clear(), m_.dz_16.clear();
  const auto rows = static_cast<std::size_t>(batch_);
  const std::vector<int>& sizes = config_.layer_sizes;
  for (std::size_t l = 0; l < layers_; ++l) {
    m_.a.emplace_back(ops_, rows * static_cast<std::size_t>(sizes[l]));
    m_.a_16.emplace_back(ops_, low_ ? rows * static_cast<std::size_t>(sizes[l]) : 0);
    m_.z.emplace_back(ops_, rows * static_cast<std::size_t>(sizes[l + 1]));
    m_.dz_16.emplace_back(ops_, low_ ? rows * static_cast<std::size_t>(sizes[l + 1]) : 0);
  }
  const auto widest = static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end()));
  m_.dz = Buffer<float>(ops_, rows * widest);
  m_.da = Buffer<float>(ops_, rows * widest);
  m_.row_loss = Buffer<float>(ops_, rows);
  m_.labels = Buffer<int>(ops_, rows);
  if (recipe_active_) {
    std::size_t largest = 0;  // the largest operand: a layer's input, output gradient or weights
    for (std::size_t l = 0; l < layers_; ++l)
      largest = std::max({largest, rows * static_cast<std::size_t>(sizes[l]), rows * static_cast<std::size_t>(sizes[l + 1]), m_.sizes[2 * l]});
    m_.operand_a = Buffer<float>(ops_, largest);
    m_.operand_b = Buffer<float>(ops_, largest);
    m_.fp8_inputs.clear();
    if (per_tensor_fp8(recipe_))
      for (std::size_t l = 0; l < layers_; ++l) m_.fp8_inputs.emplace_back(ops_, rows * static_cast<std::size_t>(sizes[l]));
  }
  m_.batch = batch_;
}

void DeviceMlpTrainer::Pass::upload(const Eigen::MatrixXf& inputs, const std::vector<int>& labels) {
  ops_.upload(m_.a[0].data(), inputs.data(), sizeof(float) * static_cast<std::size_t>(inputs.size()));
  ops_.upload(m_.labels.data(), labels.data(), sizeof(int) * labels.size());
  if (record_) ops_.zero(records_, sizeof(unsigned long long) * (m_.readback.size() - mlp_scalar_words));
}

void DeviceMlpTrainer::Pass::record_blocks(std::size_t l, int kind, const float* values, int rows, int cols) {
  if (record_ && config_.record_blocks)
    blocks_[4 * l + static_cast<std::size_t>(kind)] = m_.block_recorder.record(
        ops_, *config_.record_blocks, values, static_cast<std::size_t>(rows), static_cast<std::size_t>(cols), FeatureAxis::second);
}

void DeviceMlpTrainer::Pass::cast(const float* in, float* out, std::uint16_t* packed, std::size_t n, RecordSlots into) {
  if (low_) {
    ops_.cast(in, out, packed, n, bf16_, config_.rounding, into, m_.counter.draw(n));
  } else if (into.histogram != nullptr || into.largest != nullptr) {
    ops_.record_histogram(in, n, into);
  }
}

void DeviceMlpTrainer::Pass::product(bool ta, bool tb, int rows, int cols, int k, const float* a32, const std::uint16_t* a16, int lda,
                                     const float* b32, const std::uint16_t* b16, int ldb, float* c, int ldc) {
  ProductCall call;
  call.transpose_a = ta, call.transpose_b = tb, call.m = rows, call.n = cols, call.k = k;
  call.a = {a32, a16, lda, 0}, call.b = {b32, b16, ldb, 0}, call.c = c, call.ldc = ldc, call.sixteen = low_, call.bf16 = bf16_;
  ops_.product(call);
}

void DeviceMlpTrainer::Pass::recipe_product(bool ta, bool tb, int rows, int cols, int k, const float* a, int lda, const float* b, int ldb, float* c,
                                            int ldc, float alpha) {
  device_step::DeviceRecipe::product(ops_, ta, tb, rows, cols, k, a, lda, b, ldb, c, ldc, alpha);
}

void DeviceMlpTrainer::Pass::block_operand(std::size_t l, GemmOperand operand, const float* x, int rows, int cols, bool along_rows, float* device) {
  m_.recipe.block_operand(ops_, operand, x, rows, cols, along_rows, block_operand_index(result.block_operands, mlp_layer_name(l), operand),
                          m_.counter, device);
}

float DeviceMlpTrainer::Pass::fp8_operand(std::size_t l, GemmOperand operand, const float* x, std::size_t n, float* device) {
  return m_.recipe.fp8_operand(ops_, operand, x, n, 3 * l + static_cast<std::size_t>(operand), new_operand_scaling(result.scaling, mlp_layer_name(l)),
                               m_.counter, device);
}

void DeviceMlpTrainer::Pass::cast_parameters_and_inputs() {
  for (std::size_t l = 0; l < layers_; ++l) {
    record_blocks(l, 2, m_.weights[l].data(), config_.layer_sizes[l + 1], config_.layer_sizes[l]);
    if (config_.sentinel) {  // a skipped step leaves the weights as it cast them: read_back reads them, where it skipped
      weight_readings_.push_back(watched_.size());
      watched_.push_back({mlp_layer_name(l), TensorKind::weight, 0});
    }
    cast(m_.weights[l].data(), recipe_active_ && low_ ? m_.weights_low[l].data() : nullptr, recipe_active_ ? nullptr : m_.weights_16[l].data(),
         m_.weights[l].size(), slots(l, 2));
    cast(m_.biases[l].data(), m_.biases_low[l].data(), nullptr, m_.biases[l].size(), {});
  }
  if (recipe_active_) m_.recipe.begin_step(ops_), m_.input_dequantize.assign(layers_, 1.0f), m_.weight_dequantize.assign(layers_, 1.0f);
  cast(m_.a[0].data(), recipe_active_ ? m_.a[0].data() : nullptr, recipe_active_ ? nullptr : m_.a_16[0].data(), m_.a[0].size(), {});
}

void DeviceMlpTrainer::Pass::forward(std::size_t l) {
  const int in = config_.layer_sizes[l], out = config_.layer_sizes[l + 1];
  if (!recipe_active_) {
    product(false, true, batch_, out, in, m_.a[l].data(), m_.a_16[l].data(), batch_, m_.weights[l].data(), m_.weights_16[l].data(), out,
            m_.z[l].data(), batch_);
  } else if (per_tensor_fp8(recipe_)) {
    m_.input_dequantize[l] = fp8_operand(l, GemmOperand::input, m_.a[l].data(), m_.a[l].size(), m_.fp8_inputs[l].data());
    m_.weight_dequantize[l] = fp8_operand(l, GemmOperand::weight, weight_operand(l), m_.sizes[2 * l], m_.fp8_weights[l].data());
    recipe_product(false, true, batch_, out, in, m_.fp8_inputs[l].data(), batch_, m_.fp8_weights[l].data(), out, m_.z[l].data(), batch_,
                   fp8_product_factor(m_.input_dequantize[l], m_.weight_dequantize[l]));
  } else {  // both blocked along the layer's inputs, which the product reduces over
    block_operand(l, GemmOperand::input, m_.a[l].data(), batch_, in, false, m_.operand_a.data());
    block_operand(l, GemmOperand::weight, weight_operand(l), out, in, false, m_.operand_b.data());
    recipe_product(false, true, batch_, out, in, m_.operand_a.data(), batch_, m_.operand_b.data(), out, m_.z[l].data(), batch_, 1.0f);
  }
  if (low_ && !recipe_active_ && !(record_ && config_.record_blocks)) {  // nothing reads z between the steps: one epilogue
    ForwardEpilogue e;
    e.z = m_.z[l].data(), e.bias = bias(l), e.rows = batch_, e.cols = out, e.bias_per_column = true;
    e.bf16 = bf16_, e.mode = config_.rounding;
    e.z_slots = watched(slots(l, 0), l, TensorKind::activation);
    e.z_random = m_.counter.draw(e.count());
    if (l + 1 < layers_) {
      e.activate = true, e.activation = config_.activation, e.a = m_.a[l + 1].data(), e.a16 = m_.a_16[l + 1].data();
      e.a_random = m_.counter.draw(e.count());
    }
    ops_.forward_epilogue(e);
    return;
  }
  ops_.add_column_bias(m_.z[l].data(), bias(l), batch_, out);
  record_blocks(l, 0, m_.z[l].data(), batch_, out);
  cast(m_.z[l].data(), m_.z[l].data(), nullptr, m_.z[l].size(), watched(slots(l, 0), l, TensorKind::activation));
  if (l + 1 < layers_) {
    ops_.activation_forward(m_.z[l].data(), m_.a[l + 1].data(), m_.z[l].size(), config_.activation);
    cast(m_.a[l + 1].data(), recipe_active_ ? m_.a[l + 1].data() : nullptr, recipe_active_ ? nullptr : m_.a_16[l + 1].data(), m_.a[l + 1].size(), {});
  }
}

void DeviceMlpTrainer::Pass::loss() {
  float* loss_sum = reinterpret_cast<float*>(m_.readback.data());
  ops_.cross_entropy_rows(m_.z[layers_ - 1].data(), m_.labels.data(), batch_, config_.layer_sizes.back(), m_.scaler.data(), config_.loss_weight,
                          m_.dz.data(), m_.row_loss.data());
  ops_.ordered_sum(m_.row_loss.data(), batch_, loss_sum);
  ops_.zero(m_.found_non_finite.data(), sizeof(int));  // the flag check_and_update raises
}

void DeviceMlpTrainer::Pass::backward(std::size_t l) {
  const int in = config_.layer_sizes[l], out = config_.layer_sizes[l + 1];
  const std::size_t n_dz = static_cast<std::size_t>(batch_) * static_cast<std::size_t>(out);
  record_blocks(l, 1, m_.dz.data(), batch_, out);
  cast(m_.dz.data(), m_.dz.data(), m_.dz_16[l].data(), n_dz, watched(slots(l, 1), l, TensorKind::activation_gradient));
  // grad_W (out x in) = dz^T (dz: batch x out) a (batch x in)
  dz_dequantize_ = 1.0f;
  if (!recipe_active_) {
    product(true, false, out, in, batch_, m_.dz.data(), m_.dz_16[l].data(), batch_, m_.a[l].data(), m_.a_16[l].data(), batch_, m_.grad_w[l].data(),
            out);
  } else if (per_tensor_fp8(recipe_)) {  // the FP8 dz serves both backward products
    dz_dequantize_ = fp8_operand(l, GemmOperand::output_gradient, m_.dz.data(), n_dz, m_.operand_a.data());
    recipe_product(true, false, out, in, batch_, m_.operand_a.data(), batch_, m_.fp8_inputs[l].data(), batch_, m_.grad_w[l].data(), out,
                   fp8_product_factor(dz_dequantize_, m_.input_dequantize[l]));
  } else {  // both blocked along the batch, which the product reduces over
    block_operand(l, GemmOperand::output_gradient, m_.dz.data(), batch_, out, true, m_.operand_a.data());
    block_operand(l, GemmOperand::input, m_.a[l].data(), batch_, in, true, m_.operand_b.data());
    recipe_product(true, false, out, in, batch_, m_.operand_a.data(), batch_, m_.operand_b.data(), batch_, m_.grad_w[l].data(), out, 1.0f);
  }
  ops_.column_sums(m_.dz.data(), batch_, out, m_.grad_b[l].data());
  for (const FaultInjection& fault : t_.faults_)
    if (fault.step == t_.steps_ && static_cast<std::size_t>(fault.layer) == l + 1) {
      const float bad = fault.value == FaultInjection::Value::nan ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
      ops_.upload(m_.grad_w[l].data(), &bad, sizeof bad);
    }
  record_blocks(l, 3, m_.grad_w[l].data(), out, in);
  cast(m_.grad_w[l].data(), m_.grad_w[l].data(), nullptr, m_.grad_w[l].size(), watched(slots(l, 3), l, TensorKind::weight_gradient));
  cast(m_.grad_b[l].data(), m_.grad_b[l].data(), nullptr, m_.grad_b[l].size(), {});
  if (l == 0) return;
  // dA (batch x in) = dz (batch x out) W (out x in)
  if (!recipe_active_) {
    product(false, false, batch_, in, out, m_.dz.data(), m_.dz_16[l].data(), batch_, m_.weights[l].data(), m_.weights_16[l].data(), out,
            m_.da.data(), batch_);
  } else if (per_tensor_fp8(recipe_)) {
    recipe_product(false, false, batch_, in, out, m_.operand_a.data(), batch_, m_.fp8_weights[l].data(), out, m_.da.data(), batch_,
                   fp8_product_factor(dz_dequantize_, m_.weight_dequantize[l]));
  } else {  // both blocked along the layer's outputs, which the product reduces over
    block_operand(l, GemmOperand::output_gradient, m_.dz.data(), batch_, out, false, m_.operand_a.data());
    block_operand(l, GemmOperand::weight, weight_operand(l), out, in, true, m_.operand_b.data());
    recipe_product(false, false, batch_, in, out, m_.operand_a.data(), batch_, m_.operand_b.data(), out, m_.da.data(), batch_, 1.0f);
  }
  const std::size_t n_da = static_cast<std::size_t>(batch_) * static_cast<std::size_t>(in);
  cast(m_.da.data(), m_.da.data(), nullptr, n_da, {});
  ops_.activation_backward(m_.z[l - 1].data(), m_.da.data(), n_da, config_.activation);
  std::swap(m_.dz, m_.da);
}

void DeviceMlpTrainer::Pass::check_and_update() {
  if (recipe_active_) m_.recipe.finish_step(ops_, result.scaling, result.block_operands);
  for (std::size_t l = 0; l < layers_; ++l) {
    ops_.find_non_finite(m_.grad_w[l].data(), m_.grad_w[l].size(), m_.found_non_finite.data());
    ops_.find_non_finite(m_.grad_b[l].data(), m_.grad_b[l].size(), m_.found_non_finite.data());
  }
  ops_.update_scaler(config_.scaler, m_.scaler.data(), m_.found_non_finite.data(), skip_, step_scale_);
  std::vector<float*> parameters;
  std::vector<const float*> gradients;
  for (std::size_t l = 0; l < layers_; ++l) {
    parameters.push_back(m_.weights[l].data()), gradients.push_back(m_.grad_w[l].data());
    parameters.push_back(m_.biases[l].data()), gradients.push_back(m_.grad_b[l].data());
  }
  m_.optimizer.update(ops_, config_.learning_rate, parameters, gradients, m_.sizes, step_scale_, skip_);
  // fp16-pure re-casts the parameters after an update only, as the CPU backend does: a skipped step
  // leaves them, and the stochastic-rounding counter, as they were. The casts are queued either
  // way and read the skip flag on the device: the host never waits for the step.
  if (config_.precision == Precision::fp16_pure)
    for (std::size_t l = 0; l < layers_; ++l)
      for (const Buffer<float>* p : {&m_.weights[l], &m_.biases[l]})
        ops_.cast_unless_skipped(p->data(), p->data(), p->size(), bf16_, config_.rounding, m_.counter.draw_unless_skipped(p->size()), skip_);
  m_.counter.finish_step(ops_, skip_);
}

void DeviceMlpTrainer::Pass::read_back(bool read_loss) {
  result.loss = std::numeric_limits<double>::quiet_NaN();
  result.loss_scale = std::numeric_limits<double>::quiet_NaN();
  if (!record_ && !read_loss) return;
  const std::size_t words = record_ ? m_.readback.size() : mlp_scalar_words;
  ops_.download(m_.host_readback.data(), m_.readback.data(), sizeof(unsigned long long) * words);
  float sum = 0, scale = 0;
  int skipped = 0;
  std::memcpy(&sum, m_.host_readback.data(), sizeof sum);
  std::memcpy(&scale, reinterpret_cast<const char*>(m_.host_readback.data()) + sizeof(float), sizeof scale);
  std::memcpy(&skipped, m_.host_readback.data() + 1, sizeof skipped);
  result.loss = static_cast<double>(sum) / batch_;
  result.loss_scale = scale;
  result.skipped = skipped != 0;
  if (result.skipped || !std::isfinite(result.loss)) {  // the sentinel's readings, for the culprit
    if (result.skipped)
      for (std::size_t l = 0; l < weight_readings_.size(); ++l)
        ops_.amax_bits(m_.weights[l].data(), m_.weights[l].size(), m_.sentinel.data() + weight_readings_[l]);
    std::vector<std::uint32_t> largest(watched_.size());
    ops_.download(largest.data(), m_.sentinel.data(), largest.size() * sizeof(std::uint32_t));
    for (std::size_t i = 0; i < watched_.size(); ++i) watched_[i].largest_bits = largest[i];
    result.sentinel = std::move(watched_);
  }
  if (!record_) return;
  Snapshot snapshot;
  for (std::size_t l = 0; l < layers_; ++l)
    for (std::size_t k = 0; k < 4; ++k) {
      snapshot.tensors.push_back(
          device_step::counted_record(mlp_layer_name(l), kinds[k], m_.host_readback.data() + mlp_scalar_words + (4 * l + k) * record_stride, low_));
      snapshot.tensors.back().blocks = std::move(blocks_[4 * l + k]);
    }
  add_recipe_records(snapshot, config_.recipe, result.scaling, result.block_operands);
  complete_snapshot(snapshot, t_.steps_, result.loss, result.loss_scale, result.skipped);
  result.snapshot = std::move(snapshot);
}

StepResult DeviceMlpTrainer::step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool read_loss) {
  const std::size_t layers = config_.layer_sizes.size() - 1;
  if (inputs.cols() != config_.layer_sizes.front() || static_cast<std::size_t>(inputs.rows()) != labels.size())
    throw std::invalid_argument("step: the inputs do not fit the model");
  Pass pass(*this, static_cast<int>(inputs.rows()), record);
  memory_->counter.begin_step();
  pass.fit_batch();
  pass.upload(inputs, labels);
  const bool eligible = device_step::graphable(config_, memory_->recipe, faults_, steps_);
  graphs_->run(device_step::graph_key(inputs.rows(), record), eligible, [&] {
    pass.cast_parameters_and_inputs();
    for (std::size_t l = 0; l < layers; ++l) pass.forward(l);
    pass.loss();
    for (std::size_t l = layers; l-- > 0;) pass.backward(l);
    pass.check_and_update();
  });
  pass.read_back(read_loss);
  ++steps_;
  return std::move(pass.result);
}

}  // namespace fpscope
