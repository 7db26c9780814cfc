// The GPT's step on DeviceOps (device_gpt.hpp). Its structure follows gpt_pass.hpp's run() line by
// line -- the same tensors stored, cast and recorded in the same order -- with each of the
// attention's per-head products made for every sequence and head in one grouped call, and the
// triangles kept packed as the CPU keeps them (cast, recorded and softmaxed packed; unpacked into
// keys x queries squares for the products).
#include "fpscope/gpu/device_gpt.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "recorded_blocks.hpp"
#include "device_step.hpp"
#include "step_graphs.hpp"
#include "fpscope/gpu/gpt_element.hpp"

namespace fpscope {

using device_step::Buffer;

namespace {

// Where gpt_pass.hpp's Index puts each block's parameters (a linear layer's bias right after its weight).
struct Index {
  static constexpr int tokens = 0, positions = 1, per_block = 12;
  enum Block : int { ln1_gain, ln1_bias, qkv_weight, qkv_bias, proj_weight, proj_bias, ln2_gain, ln2_bias, fc_weight, fc_bias, mlp_proj_weight, mlp_proj_bias };
  static int block(int layer, Block which) { return 2 + per_block * layer + which; }
  static int final_gain(int layers) { return 2 + per_block * layers; }
};

// Each block's stored tensors, in the order the forward pass makes them (gpt.hpp lists them).
constexpr const char* block_tensors[] = {"ln1", "attn.qkv", "attn.scores", "attn.softmax", "attn.context", "attn.proj",
                                         "residual1", "ln2", "mlp.fc", "mlp.gelu", "mlp.proj", "residual2"};

std::string full_name(int block, const char* name) { return gpt_tensor_name(block, name); }

using device_step::record_stride;
constexpr std::size_t scalar_words = 3;                    // the loss (float64), the step's scale (float32), skip (int)

}  // namespace

struct DeviceGptTrainer::Memory {
  // Per parameter, gpt_parameters' order: master weights, the step's low-precision copies (and their
  // 16-bit patterns, low precision only), gradients; the optimizer's state.
  std::vector<Buffer<float>> master, copy, gradient;
  std::vector<Buffer<std::uint16_t>> copy16;
  std::vector<std::size_t> sizes;
  device_step::Optimizer optimizer;
  Buffer<int> found_non_finite;
  Buffer<LossScalerState> scaler;
  Buffer<unsigned long long> readback;  // scalar_words, then record_stride per recorded tensor
  std::vector<unsigned long long> host_readback;
  // The recorded tensors in the snapshot's order (each activation, then its gradient; then each
  // weight, then its gradient), and each one's place in it by kind and name.
  std::vector<std::pair<std::string, TensorKind>> records;
  std::unordered_map<std::string, std::size_t> record_of[4];
  // The step sentinel's readings, one per recorded tensor's cast in execution order (a stored
  // tensor of the residual stream is cast twice: room for every cast is made when sizing).
  Buffer<std::uint32_t> sentinel;
  device_step::StochasticCounter counter;  // the next random word's index, as GptTrainer's ctx

  // Sized for one batch.
  int batch = 0;
  Buffer<int> tokens, targets, token_columns, token_starts;  // the batch's columns grouped by token (embed_backward)
  struct Block {
    Buffer<float> ln1, xhat1, rstd1, qkv, probabilities, context, ln2, xhat2, rstd2, fc, gelu;
    Buffer<std::uint16_t> ln1_16, qkv16, context16, ln2_16, gelu16;
  };
  std::vector<Block> blocks;
  Buffer<float> x, y, final_ln, xhat_f, rstd_f, logits, dlogits, losses;
  Buffer<std::uint16_t> final16, dlogits16;
  Buffer<float> dx, dnorm, dwide, dcontext, dqkv;
  Buffer<std::uint16_t> dx16, dwide16, dcontext16, dqkv16;
  Buffer<float> full_a, full_b, scores, dprobabilities, dscores;
  Buffer<std::uint16_t> full16;
  Buffer<float> padded_triangles;  // --record-blocks: an attention triangle laid out for its blocks
  // Under a recipe: its quantizer (device_step.hpp); room for two quantized operands (or an FP8
  // dy); each linear layer's FP8 input and weight from its forward product to its backward ones,
  // with their dequantization factors, by FP8 slot (gpt_recipe_slot).
  device_step::DeviceRecipe recipe;
  Buffer<float> operand_a, operand_b;
  std::unordered_map<std::size_t, Buffer<float>> fp8_operands;
  std::unordered_map<std::size_t, float> fp8_dequantize;
  device_step::BlockRecorder block_recorder;  // --record-blocks

  void size_for(DeviceOps& ops, const GptShape& shape, int sequences, bool low, bool record_blocks) {
    const std::size_t N = static_cast<std::size_t>(sequences) * static_cast<std::size_t>(shape.context), D = static_cast<std::size_t>(shape.width);
    const std::size_t T = static_cast<std::size_t>(shape.context), triangles = static_cast<std::size_t>(sequences) * static_cast<std::size_t>(shape.heads);
    const std::size_t packed = triangles * triangle_start(shape.context), squares = triangles * T * T, V = static_cast<std::size_t>(shape.vocab);
    const auto f = [&](std::size_t n) { return Buffer<float>(ops, n); };
    const auto h = [&](std::size_t n) { return Buffer<std::uint16_t>(ops, low ? n : 0); };
    blocks.clear();
    for (int l = 0; l < shape.layers; ++l)
      blocks.push_back(Block{f(D * N), f(D * N), f(N), f(3 * D * N), f(packed), f(D * N), f(D * N), f(D * N), f(N), f(4 * D * N), f(4 * D * N),
                             h(D * N), h(3 * D * N), h(D * N), h(D * N), h(4 * D * N)});
    tokens = Buffer<int>(ops, N);
    targets = Buffer<int>(ops, N);
    token_columns = Buffer<int>(ops, N);
    token_starts = Buffer<int>(ops, V + 1);
    x = f(D * N), y = f(D * N), final_ln = f(D * N), xhat_f = f(D * N), rstd_f = f(N), logits = f(V * N), dlogits = f(V * N), losses = f(N);
    final16 = h(D * N), dlogits16 = h(V * N);
    dx = f(D * N), dnorm = f(D * N), dwide = f(4 * D * N), dcontext = f(D * N), dqkv = f(3 * D * N);
    dx16 = h(D * N), dwide16 = h(4 * D * N), dcontext16 = h(D * N), dqkv16 = h(3 * D * N);
    full_a = f(squares), full_b = f(squares), scores = f(packed), dprobabilities = f(packed), dscores = f(packed);
    full16 = h(squares);
    padded_triangles = f(record_blocks ? squares : 0);
    if (recipe.active()) {  // the largest operand: mlp.fc's output gradient, mlp.proj's input, or their weights
      operand_a = f(std::max(4 * D * N, 4 * D * D)), operand_b = f(std::max(4 * D * N, 4 * D * D));
      fp8_operands.clear();
    }
    batch = sequences;
  }
};

DeviceGptTrainer::DeviceGptTrainer(const GptShape& shape, const TrainingConfig& config, std::unique_ptr<DeviceOps> ops)
    : shape_(shape),
      config_(config),
      ops_(with_step_graphs(std::move(ops), config.step_graphs)),
      graphs_(static_cast<StepGraphOps*>(ops_.get())),
      memory_(std::make_unique<Memory>()),
      layout_(gpt_parameters(shape)) {
  if (!ops_) throw std::invalid_argument("a device GPT needs its device's operations");
  if (shape.width % shape.heads != 0) throw std::invalid_argument("a GPT's width must be a multiple of its heads");
  Memory& m = *memory_;
  DeviceOps& device = *ops_;
  m.recipe = device_step::DeviceRecipe(device, config, per_tensor_fp8(config.recipe.recipe) ? gpt_recipe_slots(shape) : 0);
  const bool low = config.precision != Precision::fp32;
  for (const GptParameter& p : layout_) {
    const std::size_t n = static_cast<std::size_t>(p.rows) * static_cast<std::size_t>(p.cols);
    m.master.emplace_back(device, n);
    m.copy.emplace_back(device, n);
    m.copy16.emplace_back(device, low ? n : 0);
    m.gradient.emplace_back(device, n);
    m.sizes.push_back(n);
  }
  m.optimizer = device_step::Optimizer(device, config.optimizer, m.sizes);
  if (config.record_blocks) m.block_recorder = device_step::BlockRecorder(device);
  m.found_non_finite = Buffer<int>(device, 1);
  m.scaler = Buffer<LossScalerState>(device, 1);
  // The records, in the order GptTrainer's snapshot lists them.
  const auto add = [&](const std::string& name, TensorKind kind) {
    m.record_of[static_cast<int>(kind)][name] = m.records.size();
    m.records.emplace_back(name, kind);
  };
  std::vector<std::string> stored{"embed"};
  for (int l = 0; l < shape.layers; ++l)
    for (const char* name : block_tensors) stored.push_back(full_name(l, name));
  stored.emplace_back("ln_f");
  stored.emplace_back("head");
  for (const std::string& name : stored) {
    add(name, TensorKind::activation);
    add(name, TensorKind::activation_gradient);
  }
  for (const GptParameter& p : layout_)
    if (!p.recorded.empty()) {
      add(p.recorded, TensorKind::weight);
      add(p.recorded, TensorKind::weight_gradient);
    }
  m.readback = Buffer<unsigned long long>(device, scalar_words + m.records.size() * record_stride);
  m.host_readback.resize(m.readback.size());
  m.sentinel = Buffer<std::uint32_t>(device, 2 * m.records.size());
  m.counter = device_step::StochasticCounter(device, config.seed);
  // GptTrainer's initial state (fp16-pure's weights rounded, and the random words that took).
  const GptTrainer reference(shape, config);
  restore(reference.state());
}

DeviceGptTrainer::~DeviceGptTrainer() = default;

void DeviceGptTrainer::inject(const FaultInjection& fault) {
  check_gpt_fault(shape_, fault);
  faults_.push_back(fault);
}

LossScalerState DeviceGptTrainer::scaler_state() const { return device_step::scaler_state(*ops_, memory_->scaler.data()); }

void DeviceGptTrainer::reconfigure_scaler(const LossScalerConfig& config) {
  device_step::reconfigure_scaler(*ops_, memory_->scaler.data(), config_.scaler, config);
  graphs_->forget();  // the scaler's launch takes its rule by value
}

StepGraphStatistics DeviceGptTrainer::graph_statistics() const { return graphs_->statistics(); }

TrainerState DeviceGptTrainer::position() const {
  return device_step::position_of(steps_, scaler_state(), memory_->counter.value(*ops_), memory_->recipe.fp8());
}

TrainerState DeviceGptTrainer::state() const {
  const Memory& m = *memory_;
  TrainerState s;
  s.steps = steps_;
  for (std::size_t p = 0; p < layout_.size(); ++p) {
    Eigen::MatrixXf w(layout_[p].rows, layout_[p].cols);
    ops_->download(w.data(), m.master[p].data(), m.master[p].bytes());
    s.weights.push_back(std::move(w));
  }
  s.biases.assign(layout_.size(), Eigen::VectorXf());  // every parameter is in `weights`, as GptTrainer's
  s.scaler = scaler_state();
  s.stochastic_counter = m.counter.value(*ops_);
  s.optimizer = m.optimizer.state(*ops_);
  s.fp8 = m.recipe.fp8();
  return s;
}

void DeviceGptTrainer::restore(const TrainerState& state) {
  Memory& m = *memory_;
  check_gpt_state(shape_, state, m.recipe.fp8().size());
  m.recipe.restore_fp8(state.fp8);
  for (std::size_t p = 0; p < layout_.size(); ++p) ops_->upload(m.master[p].data(), state.weights[p].data(), m.master[p].bytes());
  m.optimizer.restore(*ops_, state.optimizer);
  ops_->upload(m.scaler.data(), &state.scaler, sizeof(LossScalerState));
  steps_ = state.steps;
  m.counter.restore(*ops_, state.stochastic_counter);
}

// One step's phases on the device, in gpt_pass.hpp's order: the same tensors cast and recorded in
// the same order, so the same random words. Its fields name the shape as gpt_pass.hpp does: B
// sequences of T tokens (N in all), width D, H heads of dh, L blocks, vocabulary V.
struct DeviceGptTrainer::Pass {
  // Where tensor `name` of `kind` records on a recorded step (nowhere otherwise), and how its
  // values block (--record-blocks): a stored tensor along its features (n / tokens of them), an
  // attention triangle along each query's keys, a weight as the CPU backend blocks it.
  // The sentinel reads it, recorded step or not, under `name` and `kind` where `watched`.
  struct Into {
    RecordSlots slots;
    std::size_t record = 0;
    enum class Layout : std::uint8_t { none, stored, triangles, weight } layout = Layout::none;
    std::size_t rows = 0, cols = 0;
    bool watched = false;
    std::string name;
    TensorKind kind = TensorKind::other;
  };

  Pass(DeviceGptTrainer& trainer, int sequences, bool record);
  // The batch's tokens, targets and columns grouped by token (for embed_backward).
  void upload(const std::vector<int>& tokens, const std::vector<int>& labels);
  // The step's copies of the parameters (the recorded ones recorded as weights).
  void cast_parameters();
  // The embeddings, block l, the final LayerNorm, the tied head and the loss (its gradient carries
  // the loss scale, read on the device).
  void embed();
  void block_forward(int l);
  void head_and_loss();
  // The head's backward and the final LayerNorm's, block l's, the embeddings'.
  void head_backward();
  void block_backward(int l);
  void embed_backward();
  // The faults, the weight gradients' casts (recorded) and check, the scaler, the update unless
  // skipped: all on the device; fp16-pure's re-rounding of the weights after an update.
  void check_and_update();
  // One read-back: the scalars, and the records of a recorded step into its snapshot.
  void read_back(bool read_loss);

  Into slots(TensorKind kind, const std::string& name, Into::Layout how) const;
  Into stored(TensorKind kind, int block, const char* name) const;
  Into activation(int block, const char* name) const { return stored(TensorKind::activation, block, name); }
  Into gradient(int block, const char* name) const { return stored(TensorKind::activation_gradient, block, name); }
  Into weight_record(TensorKind kind, std::size_t p) const;
  // The cast of n values into the run's format (float32 into `out`, 16-bit into `packed`, each
  // where not null), taking n random words; the fp32 policy only records (and copies). Block
  // statistics are made from the values before their cast, on the device (the packed attention
  // triangles blocked along each query's keys: device_step.hpp).
  void cast(const float* in, float* out, std::uint16_t* packed16, std::size_t n, const Into& into);
  // The slots a cast of `into` records into, the sentinel's reading among them where it watches
  // the tensor (in the order the casts are made).
  RecordSlots cast_slots(const Into& into);
  static DeviceOperand operand(const Buffer<float>& f, const Buffer<std::uint16_t>& h, std::size_t offset, int ld, std::size_t stride = 0) {
    return DeviceOperand{f.data() + offset, h.data() == nullptr ? nullptr : h.data() + offset, ld, stride};
  }
  // C = op(A) op(B): 16-bit operands in low precision unless `float32` (operands that are not the
  // format's values), `batch` products over the heads.
  void product(bool ta, bool tb, int rows, int cols, int k, DeviceOperand a, DeviceOperand b, float* c, int ldc, bool accumulate = false,
               int batch = 1, std::size_t stride_c = 0, bool float32 = false);
  // Per sequence and head (B x H products, one call): A, B and C at their bases plus a sequence's
  // and a head's strides -- a head's rows of qkv or of the context (dh rows apart), its keys x
  // queries square. float32 operands where `float32`.
  void heads_product(bool ta, bool tb, int rows, int cols, int k, DeviceOperand a, std::size_t a_sequence, DeviceOperand b, std::size_t b_sequence,
                     float* c, int ldc, std::size_t c_head, std::size_t c_sequence, bool float32 = false);
  DeviceOperand weight(int p) const {
    return operand(m.copy[static_cast<std::size_t>(p)], m.copy16[static_cast<std::size_t>(p)], 0, layout[static_cast<std::size_t>(p)].rows);
  }
  // Under a recipe, a block's linear layers (attn.qkv, attn.proj, mlp.fc, mlp.proj) multiply
  // the float32 operands it makes (DeviceRecipe) as GptTrainer's hooks make them, each just before
  // its product, as the CPU's pass draws their random words. Their inputs and weights are float32
  // values of the run's format already (cast in place, or the weights' copies).
  void recipe_product(bool ta, bool tb, int rows, int cols, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc, float alpha);
  void block_operand(const std::string& name, GemmOperand operand, const float* x, int rows, int cols, bool along_first_axis, float* device);
  // An FP8 operand (rows x cols values at x) into its slot's buffer (kept for the backward), its factor returned.
  std::pair<float*, float> fp8_operand(int block, const char* linear, GemmOperand operand, const float* x, int rows, int cols);
  std::pair<const float*, float> fp8_kept(int block, const char* linear, GemmOperand operand) const;
  // y (out x N) = W x + b (block `block`'s layer `name` under a recipe); W x alone where not
  // `add_bias` (the caller's epilogue adds it).
  void linear(int p, DeviceOperand x, int in, int out, float* y, int block, const char* name, bool add_bias = true);
  // linear, then y's cast (recorded as block's activation `name`, its patterns into y16 where not
  // null), and where `gelu` is given GELU of the cast y rounded into `gelu` (recorded as
  // `gelu_name`, its patterns into gelu16): in one epilogue (ForwardEpilogue) where nothing reads y
  // between the steps -- in low precision, without a recipe or block records.
  void linear_cast(int p, DeviceOperand x, int in, int out, float* y, std::uint16_t* y16, int block, const char* name, float* gelu = nullptr,
                   std::uint16_t* gelu16 = nullptr, const char* gelu_name = nullptr);
  // Its backward from dy (out x N): the bias's and W's gradients, and x's (in x N) into dx.
  void linear_backward(int p, DeviceOperand x, int in, int out, DeviceOperand dy, float* dx, int block, const char* name);
  // A LayerNorm's backward from dnorm: its gain's and bias's gradients, the input's into dx.
  void norm_backward(int gain, const Buffer<float>& xhat, const Buffer<float>& rstd, bool add);
  // The residual stream's gradient below block `below`: recorded as its residual2's and (the same
  // values, rounded again) its mlp.proj's, the operand of that layer's backward; the embeddings' below the first.
  void residual_gradient(int below);

  DeviceGptTrainer& trainer;
  const TrainingConfig& config;
  const std::vector<GptParameter>& layout;
  Memory& m;
  DeviceOps& ops;
  const bool record, low, bf16;
  const int B, T, D, H, dh, L, V, N;
  const std::size_t ND, TT, VN;
  const std::size_t packed;        // the attention triangles' values, B x H of them
  const int triangles;
  const std::size_t qkv_sequence;  // one sequence's columns of qkv
  const std::size_t head;
  std::vector<SentinelReading> watched;  // the sentinel's tensors in execution order, read back when wanted
  std::vector<std::pair<std::size_t, std::size_t>> weight_readings;  // (parameter, its place in `watched`)
  const float inverse_sqrt;
  const GemmRecipe recipe;
  unsigned long long* records;
  std::vector<std::optional<BlockRecord>> blocks;
  StepResult result;
};

DeviceGptTrainer::Pass::Pass(DeviceGptTrainer& trainer, int sequences, bool record)
    : trainer(trainer),
      config(trainer.config_),
      layout(trainer.layout_),
      m(*trainer.memory_),
      ops(*trainer.ops_),
      record(record),
      low(trainer.config_.precision != Precision::fp32),
      bf16(trainer.config_.precision == Precision::bf16),
      B(sequences),
      T(trainer.shape_.context),
      D(trainer.shape_.width),
      H(trainer.shape_.heads),
      dh(D / H),
      L(trainer.shape_.layers),
      V(trainer.shape_.vocab),
      N(B * T),
      ND(static_cast<std::size_t>(N) * static_cast<std::size_t>(D)),
      TT(static_cast<std::size_t>(T) * static_cast<std::size_t>(T)),
      VN(static_cast<std::size_t>(V) * static_cast<std::size_t>(N)),
      packed(static_cast<std::size_t>(B) * static_cast<std::size_t>(H) * triangle_start(T)),
      triangles(B * H),
      qkv_sequence(static_cast<std::size_t>(T) * 3 * static_cast<std::size_t>(D)),
      head(static_cast<std::size_t>(dh)),
      inverse_sqrt(1.0f / std::sqrt(static_cast<float>(dh))),
      recipe(trainer.memory_->recipe.recipe()),
      records(trainer.memory_->readback.data() + scalar_words),
      blocks(record && trainer.config_.record_blocks ? trainer.memory_->records.size() : 0) {}

void DeviceGptTrainer::Pass::upload(const std::vector<int>& tokens, const std::vector<int>& labels) {
  if (m.batch != B) m.size_for(ops, trainer.shape_, B, low, config.record_blocks.has_value());
  ops.upload(m.tokens.data(), tokens.data(), m.tokens.bytes());
  ops.upload(m.targets.data(), labels.data(), m.targets.bytes());
  std::vector<int> token_columns, token_starts;
  group_columns_by_token(tokens, V, token_columns, token_starts);
  ops.upload(m.token_columns.data(), token_columns.data(), m.token_columns.bytes());
  ops.upload(m.token_starts.data(), token_starts.data(), m.token_starts.bytes());
  if (record) ops.zero(records, (m.readback.size() - scalar_words) * sizeof(unsigned long long));
}

DeviceGptTrainer::Pass::Into DeviceGptTrainer::Pass::slots(TensorKind kind, const std::string& name, Into::Layout how) const {
  Into into;
  into.watched = true, into.name = name, into.kind = kind;
  if (!record) return into;
  into.record = m.record_of[static_cast<int>(kind)].at(name);
  into.slots = device_step::record_slots(records + into.record * record_stride);
  into.layout = how;
  return into;
}

DeviceGptTrainer::Pass::Into DeviceGptTrainer::Pass::stored(TensorKind kind, int block, const char* name) const {
  const bool triangle = std::string_view(name) == "attn.scores" || std::string_view(name) == "attn.softmax";
  return slots(kind, full_name(block, name), triangle ? Into::Layout::triangles : Into::Layout::stored);
}

DeviceGptTrainer::Pass::Into DeviceGptTrainer::Pass::weight_record(TensorKind kind, std::size_t p) const {
  if (layout[p].recorded.empty()) return Into{};
  Into into = slots(kind, layout[p].recorded, Into::Layout::weight);
  into.rows = static_cast<std::size_t>(layout[p].rows), into.cols = static_cast<std::size_t>(layout[p].cols);
  return into;
}

RecordSlots DeviceGptTrainer::Pass::cast_slots(const Into& into) {
  // The sentinel's reading of a watched tensor, made by its cast (or its histogram's pass).
  RecordSlots slots = into.slots;
  if (into.watched && config.sentinel && watched.size() < m.sentinel.size()) {
    slots.largest = m.sentinel.data() + watched.size();
    watched.push_back({into.name, into.kind, 0});
  }
  return slots;
}

void DeviceGptTrainer::Pass::cast(const float* in, float* out, std::uint16_t* packed16, std::size_t n, const Into& into) {
  const RecordSlots slots = cast_slots(into);
  if (!blocks.empty() && into.layout != Into::Layout::none) {
    const BlockRecording& b = *config.record_blocks;
    if (into.layout == Into::Layout::triangles) {
      blocks[into.record] = device_step::triangle_block_record(ops, m.block_recorder, b, in, T, n / triangle_start(T), m.padded_triangles.data());
    } else if (into.layout == Into::Layout::weight) {
      blocks[into.record] = m.block_recorder.record(ops, b, in, into.rows, into.cols, weight_features(into.cols));
    } else {
      blocks[into.record] = m.block_recorder.record(ops, b, in, n / static_cast<std::size_t>(N), static_cast<std::size_t>(N), FeatureAxis::first);
    }
  }
  if (low) {
    ops.cast(in, out, packed16, n, bf16, config.rounding, slots, m.counter.draw(n));
    return;
  }
  if (slots.histogram != nullptr || slots.largest != nullptr) ops.record_histogram(in, n, slots);
  if (out != nullptr && out != in) ops.copy(out, in, n * sizeof(float));
}

void DeviceGptTrainer::Pass::product(bool ta, bool tb, int rows, int cols, int k, DeviceOperand a, DeviceOperand b, float* c, int ldc, bool accumulate,
                                     int batch, std::size_t stride_c, bool float32) {
  ProductCall call;
  call.transpose_a = ta, call.transpose_b = tb, call.m = rows, call.n = cols, call.k = k, call.a = a, call.b = b, call.c = c, call.ldc = ldc;
  call.accumulate = accumulate, call.batch = batch, call.stride_c = stride_c, call.sixteen = low && !float32, call.bf16 = bf16;
  ops.product(call);
}

void DeviceGptTrainer::Pass::heads_product(bool ta, bool tb, int rows, int cols, int k, DeviceOperand a, std::size_t a_sequence, DeviceOperand b,
                                           std::size_t b_sequence, float* c, int ldc, std::size_t c_head, std::size_t c_sequence, bool float32) {
  ProductCall call;
  a.group_stride = a_sequence, b.group_stride = b_sequence;
  call.transpose_a = ta, call.transpose_b = tb, call.m = rows, call.n = cols, call.k = k, call.a = a, call.b = b, call.c = c, call.ldc = ldc;
  call.stride_c = c_head, call.group_stride_c = c_sequence, call.batch = H, call.groups = B, call.sixteen = low && !float32, call.bf16 = bf16;
  ops.product(call);
}

void DeviceGptTrainer::Pass::recipe_product(bool ta, bool tb, int rows, int cols, int k, const float* a, int lda, const float* b, int ldb, float* c,
                                            int ldc, float alpha) {
  device_step::DeviceRecipe::product(ops, ta, tb, rows, cols, k, a, lda, b, ldb, c, ldc, alpha);
}

void DeviceGptTrainer::Pass::block_operand(const std::string& name, GemmOperand operand, const float* x, int rows, int cols, bool along_first_axis,
                                           float* device) {
  m.recipe.block_operand(ops, operand, x, rows, cols, along_first_axis, block_operand_index(result.block_operands, name, operand),
                         m.counter, device);
}

std::pair<float*, float> DeviceGptTrainer::Pass::fp8_operand(int block, const char* linear, GemmOperand operand, const float* x, int rows, int cols) {
  const std::size_t slot = gpt_recipe_slot(block, linear, operand), n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  Buffer<float>& buffer = m.fp8_operands[slot];
  if (buffer.size() != n) buffer = Buffer<float>(ops, n);
  const float factor = m.recipe.fp8_operand(ops, operand, x, n, slot, new_operand_scaling(result.scaling, full_name(block, linear)),
                                            m.counter, buffer.data());
  m.fp8_dequantize[slot] = factor;
  return {buffer.data(), factor};
}

std::pair<const float*, float> DeviceGptTrainer::Pass::fp8_kept(int block, const char* linear, GemmOperand operand) const {
  const std::size_t slot = gpt_recipe_slot(block, linear, operand);
  return {m.fp8_operands.at(slot).data(), m.fp8_dequantize.at(slot)};
}

void DeviceGptTrainer::Pass::linear(int p, DeviceOperand x, int in, int out, float* y, int block, const char* name, bool add_bias) {
  if (recipe == GemmRecipe::none) {
    product(false, false, out, N, in, weight(p), x, y, out);
  } else if (per_tensor_fp8(recipe)) {
    const auto [input, input_factor] = fp8_operand(block, name, GemmOperand::input, x.f32, in, N);
    const auto [w, weight_factor] = fp8_operand(block, name, GemmOperand::weight, m.copy[static_cast<std::size_t>(p)].data(), out, in);
    recipe_product(false, false, out, N, in, w, out, input, in, y, out, fp8_product_factor(weight_factor, input_factor));
  } else {  // W x reduces over W's columns and x's rows
    const std::string full = full_name(block, name);
    block_operand(full, GemmOperand::input, x.f32, in, N, true, m.operand_a.data());
    block_operand(full, GemmOperand::weight, m.copy[static_cast<std::size_t>(p)].data(), out, in, false, m.operand_b.data());
    recipe_product(false, false, out, N, in, m.operand_b.data(), out, m.operand_a.data(), in, y, out, 1.0f);
  }
  if (add_bias) ops.add_row_bias(y, m.copy[static_cast<std::size_t>(p) + 1].data(), out, N);
}

void DeviceGptTrainer::Pass::linear_cast(int p, DeviceOperand x, int in, int out, float* y, std::uint16_t* y16, int block, const char* name,
                                         float* gelu, std::uint16_t* gelu16, const char* gelu_name) {
  const std::size_t n = static_cast<std::size_t>(out) * static_cast<std::size_t>(N);
  if (!low || recipe != GemmRecipe::none || !blocks.empty()) {  // y is read between the steps (the fp32 policy, a recipe, block records)
    linear(p, x, in, out, y, block, name);
    cast(y, y, y16, n, activation(block, name));
    if (gelu == nullptr) return;
    ops.activation_forward(y, gelu, n, Activation::gelu);
    cast(gelu, gelu, gelu16, n, activation(block, gelu_name));
    return;
  }
  linear(p, x, in, out, y, block, name, false);
  ForwardEpilogue e;
  e.z = y, e.bias = m.copy[static_cast<std::size_t>(p) + 1].data(), e.rows = out, e.cols = N, e.bias_per_column = false;
  e.bf16 = bf16, e.mode = config.rounding;
  e.z_slots = cast_slots(activation(block, name)), e.z16 = y16;
  e.z_random = m.counter.draw(n);
  if (gelu != nullptr) {
    e.activate = true, e.activation = Activation::gelu, e.a_rounded = gelu, e.a16 = gelu16;
    e.a_slots = cast_slots(activation(block, gelu_name));
    e.a_random = m.counter.draw(n);
  }
  ops.forward_epilogue(e);
}

void DeviceGptTrainer::Pass::linear_backward(int p, DeviceOperand x, int in, int out, DeviceOperand dy, float* dx, int block, const char* name) {
  ops.add_token_sums(dy.f32, nullptr, out, N, m.gradient[static_cast<std::size_t>(p) + 1].data());
  float* const dw = m.gradient[static_cast<std::size_t>(p)].data();
  if (recipe == GemmRecipe::none) {
    product(false, true, out, in, N, dy, x, dw, out);
    product(true, false, in, N, out, weight(p), dy, dx, in);
  } else if (per_tensor_fp8(recipe)) {  // the forward's FP8 input and weight, the FP8 dy for both
    const std::size_t n = static_cast<std::size_t>(out) * static_cast<std::size_t>(N);
    const float dy_factor = m.recipe.fp8_operand(ops, GemmOperand::output_gradient, dy.f32, n, gpt_recipe_slot(block, name, GemmOperand::output_gradient),
                                                 new_operand_scaling(result.scaling, full_name(block, name)), m.counter,
                                                 m.operand_a.data());
    const auto [input, input_factor] = fp8_kept(block, name, GemmOperand::input);
    const auto [w, weight_factor] = fp8_kept(block, name, GemmOperand::weight);
    recipe_product(false, true, out, in, N, m.operand_a.data(), out, input, in, dw, out, fp8_product_factor(dy_factor, input_factor));
    recipe_product(true, false, in, N, out, w, out, m.operand_a.data(), out, dx, in, fp8_product_factor(weight_factor, dy_factor));
  } else {
    const std::string full = full_name(block, name);
    // dy x^T reduces over the tokens: both along their second axis.
    block_operand(full, GemmOperand::output_gradient, dy.f32, out, N, false, m.operand_a.data());
    block_operand(full, GemmOperand::input, x.f32, in, N, false, m.operand_b.data());
    recipe_product(false, true, out, in, N, m.operand_a.data(), out, m.operand_b.data(), in, dw, out, 1.0f);
    // W^T dy reduces over W's rows and dy's: both along their first axis.
    block_operand(full, GemmOperand::output_gradient, dy.f32, out, N, true, m.operand_a.data());
    block_operand(full, GemmOperand::weight, m.copy[static_cast<std::size_t>(p)].data(), out, in, true, m.operand_b.data());
    recipe_product(true, false, in, N, out, m.operand_b.data(), out, m.operand_a.data(), out, dx, in, 1.0f);
  }
}

void DeviceGptTrainer::Pass::norm_backward(int gain, const Buffer<float>& xhat, const Buffer<float>& rstd, bool add) {
  ops.add_token_sums(m.dnorm.data(), xhat.data(), D, N, m.gradient[static_cast<std::size_t>(gain)].data());
  ops.add_token_sums(m.dnorm.data(), nullptr, D, N, m.gradient[static_cast<std::size_t>(gain) + 1].data());
  ops.layer_norm_backward(m.dnorm.data(), m.copy[static_cast<std::size_t>(gain)].data(), xhat.data(), rstd.data(), D, N, m.dx.data(), add);
}

void DeviceGptTrainer::Pass::residual_gradient(int below) {
  if (below < 0) {
    cast(m.dx.data(), m.dx.data(), nullptr, ND, gradient(-1, "embed"));
    return;
  }
  cast(m.dx.data(), m.dx.data(), nullptr, ND, gradient(below, "residual2"));
  cast(m.dx.data(), m.dx.data(), m.dx16.data(), ND, gradient(below, "mlp.proj"));
}

void DeviceGptTrainer::Pass::cast_parameters() {
  if (recipe != GemmRecipe::none) m.recipe.begin_step(ops);
  for (std::size_t p = 0; p < layout.size(); ++p) {
    Into into = weight_record(TensorKind::weight, p);
    // A skipped step leaves the weights as it cast them: read_back reads them, where it skipped.
    if (into.watched && config.sentinel && watched.size() < m.sentinel.size()) {
      weight_readings.emplace_back(p, watched.size());
      watched.push_back({into.name, into.kind, 0});
    }
    into.watched = false;
    cast(m.master[p].data(), m.copy[p].data(), low ? m.copy16[p].data() : nullptr, m.master[p].size(), into);
  }
}

void DeviceGptTrainer::Pass::embed() {
  ops.embed(m.tokens.data(), m.copy[Index::tokens].data(), m.copy[Index::positions].data(), V, T, D, N, m.x.data());
  cast(m.x.data(), m.x.data(), nullptr, ND, activation(-1, "embed"));
}

void DeviceGptTrainer::Pass::block_forward(int l) {
  Memory::Block& c = m.blocks[static_cast<std::size_t>(l)];
  const auto p = [&](Index::Block which) { return Index::block(l, which); };
  const auto param = [&](Index::Block which) { return m.copy[static_cast<std::size_t>(p(which))].data(); };
  ops.layer_norm(m.x.data(), param(Index::ln1_gain), param(Index::ln1_bias), D, N, c.ln1.data(), c.xhat1.data(), c.rstd1.data());
  cast(c.ln1.data(), c.ln1.data(), c.ln1_16.data(), ND, activation(l, "ln1"));
  linear_cast(p(Index::qkv_weight), operand(c.ln1, c.ln1_16, 0, D), D, 3 * D, c.qkv.data(), c.qkv16.data(), l, "attn.qkv");
  // Attention: each sequence's and head's keys x queries scores K^T Q (q, k, v at rows 0, D, 2D of qkv).
  heads_product(true, false, T, T, dh, operand(c.qkv, c.qkv16, D, 3 * D, head), qkv_sequence, operand(c.qkv, c.qkv16, 0, 3 * D, head), qkv_sequence,
                m.full_a.data(), T, TT, H * TT);
  ops.pack_triangles(m.full_a.data(), T, triangles, inverse_sqrt, m.scores.data());
  cast(m.scores.data(), m.scores.data(), nullptr, packed, activation(l, "attn.scores"));
  ops.causal_softmax(m.scores.data(), T, triangles, c.probabilities.data());
  cast(c.probabilities.data(), c.probabilities.data(), nullptr, packed, activation(l, "attn.softmax"));
  ops.unpack_triangles(c.probabilities.data(), T, triangles, 1.0f, low ? nullptr : m.full_a.data(), low ? m.full16.data() : nullptr, bf16);
  // context (dh x T per head) = V P
  heads_product(false, false, dh, T, T, operand(c.qkv, c.qkv16, 2 * D, 3 * D, head), qkv_sequence, operand(m.full_a, m.full16, 0, T, TT), H * TT,
                c.context.data(), D, head, T * D);
  cast(c.context.data(), c.context.data(), c.context16.data(), ND, activation(l, "attn.context"));
  linear(p(Index::proj_weight), operand(c.context, c.context16, 0, D), D, D, m.y.data(), l, "attn.proj");
  cast(m.y.data(), m.y.data(), nullptr, ND, activation(l, "attn.proj"));
  ops.add_into(m.x.data(), m.y.data(), ND);
  cast(m.x.data(), m.x.data(), nullptr, ND, activation(l, "residual1"));
  ops.layer_norm(m.x.data(), param(Index::ln2_gain), param(Index::ln2_bias), D, N, c.ln2.data(), c.xhat2.data(), c.rstd2.data());
  cast(c.ln2.data(), c.ln2.data(), c.ln2_16.data(), ND, activation(l, "ln2"));
  linear_cast(p(Index::fc_weight), operand(c.ln2, c.ln2_16, 0, D), D, 4 * D, c.fc.data(), nullptr, l, "mlp.fc", c.gelu.data(), c.gelu16.data(),
              "mlp.gelu");
  linear(p(Index::mlp_proj_weight), operand(c.gelu, c.gelu16, 0, 4 * D), 4 * D, D, m.y.data(), l, "mlp.proj");
  cast(m.y.data(), m.y.data(), nullptr, ND, activation(l, "mlp.proj"));
  ops.add_into(m.x.data(), m.y.data(), ND);
  cast(m.x.data(), m.x.data(), nullptr, ND, activation(l, "residual2"));
}

void DeviceGptTrainer::Pass::head_and_loss() {
  const auto final_gain = static_cast<std::size_t>(Index::final_gain(L));
  ops.layer_norm(m.x.data(), m.copy[final_gain].data(), m.copy[final_gain + 1].data(), D, N, m.final_ln.data(), m.xhat_f.data(), m.rstd_f.data());
  cast(m.final_ln.data(), m.final_ln.data(), m.final16.data(), ND, activation(-1, "ln_f"));
  // The tied head: logits (vocab x tokens) = the token table (vocab x width) times ln_f.
  product(false, false, V, N, D, weight(Index::tokens), operand(m.final_ln, m.final16, 0, D), m.logits.data(), V);
  cast(m.logits.data(), m.logits.data(), nullptr, VN, activation(-1, "head"));
  ops.cross_entropy_columns(m.logits.data(), m.targets.data(), V, N, m.scaler.data(), config.loss_weight, m.dlogits.data(), m.losses.data());
  ops.loss_sum(m.losses.data(), N, reinterpret_cast<double*>(m.readback.data()));
}

void DeviceGptTrainer::Pass::head_backward() {
  for (std::size_t p = 0; p < layout.size(); ++p) ops.zero(m.gradient[p].data(), m.gradient[p].bytes());
  cast(m.dlogits.data(), m.dlogits.data(), m.dlogits16.data(), VN, gradient(-1, "head"));
  const DeviceOperand dlogits = operand(m.dlogits, m.dlogits16, 0, V), final_ln = operand(m.final_ln, m.final16, 0, D);
  product(false, true, V, D, N, dlogits, final_ln, m.gradient[Index::tokens].data(), V, true);  // added to the zeros, as the CPU's +=
  product(true, false, D, N, V, weight(Index::tokens), dlogits, m.dnorm.data(), D);
  cast(m.dnorm.data(), m.dnorm.data(), nullptr, ND, gradient(-1, "ln_f"));
  norm_backward(Index::final_gain(L), m.xhat_f, m.rstd_f, false);
  residual_gradient(L - 1);
}

void DeviceGptTrainer::Pass::block_backward(int l) {
  Memory::Block& c = m.blocks[static_cast<std::size_t>(l)];
  const auto p = [&](Index::Block which) { return Index::block(l, which); };
  const DeviceOperand dx = operand(m.dx, m.dx16, 0, D);
  linear_backward(p(Index::mlp_proj_weight), operand(c.gelu, c.gelu16, 0, 4 * D), 4 * D, D, dx, m.dwide.data(), l, "mlp.proj");
  cast(m.dwide.data(), m.dwide.data(), nullptr, 4 * ND, gradient(l, "mlp.gelu"));
  ops.activation_backward(c.fc.data(), m.dwide.data(), 4 * ND, Activation::gelu);
  cast(m.dwide.data(), m.dwide.data(), m.dwide16.data(), 4 * ND, gradient(l, "mlp.fc"));
  linear_backward(p(Index::fc_weight), operand(c.ln2, c.ln2_16, 0, D), D, 4 * D, operand(m.dwide, m.dwide16, 0, 4 * D), m.dnorm.data(), l, "mlp.fc");
  cast(m.dnorm.data(), m.dnorm.data(), nullptr, ND, gradient(l, "ln2"));
  norm_backward(p(Index::ln2_gain), c.xhat2, c.rstd2, true);
  cast(m.dx.data(), m.dx.data(), nullptr, ND, gradient(l, "residual1"));
  cast(m.dx.data(), m.dx.data(), m.dx16.data(), ND, gradient(l, "attn.proj"));
  linear_backward(p(Index::proj_weight), operand(c.context, c.context16, 0, D), D, D, dx, m.dcontext.data(), l, "attn.proj");
  cast(m.dcontext.data(), m.dcontext.data(), m.dcontext16.data(), ND, gradient(l, "attn.context"));
  // Attention backward, per sequence over the heads: through the values (dV = dout P^T, dP = V^T dout) ...
  ops.unpack_triangles(c.probabilities.data(), T, triangles, 1.0f, low ? nullptr : m.full_a.data(), low ? m.full16.data() : nullptr, bf16);
  const DeviceOperand dout = operand(m.dcontext, m.dcontext16, 0, D, head), v = operand(c.qkv, c.qkv16, 2 * D, 3 * D, head);
  heads_product(false, true, dh, T, T, dout, T * D, operand(m.full_a, m.full16, 0, T, TT), H * TT, m.dqkv.data() + 2 * D, 3 * D, head, qkv_sequence);
  heads_product(true, false, T, T, dh, v, qkv_sequence, dout, T * D, m.full_b.data(), T, TT, H * TT);
  ops.pack_triangles(m.full_b.data(), T, triangles, 1.0f, m.dprobabilities.data());
  cast(m.dprobabilities.data(), m.dprobabilities.data(), nullptr, packed, gradient(l, "attn.softmax"));
  // ... through the softmax ...
  ops.softmax_backward(c.probabilities.data(), m.dprobabilities.data(), T, triangles, m.dscores.data());
  cast(m.dscores.data(), m.dscores.data(), nullptr, packed, gradient(l, "attn.scores"));
  // ... and through the scores (dQ = K dS, dK = Q dS^T; dS scaled by 1/sqrt(dh) is not a value of
  // the format in general, so these products read float32 operands).
  ops.unpack_triangles(m.dscores.data(), T, triangles, inverse_sqrt, m.full_b.data(), nullptr, bf16);
  const DeviceOperand ds = operand(m.full_b, Buffer<std::uint16_t>{}, 0, T, TT);
  heads_product(false, false, dh, T, T, operand(c.qkv, Buffer<std::uint16_t>{}, D, 3 * D, head), qkv_sequence, ds, H * TT, m.dqkv.data(), 3 * D, head,
                qkv_sequence, true);
  heads_product(false, true, dh, T, T, operand(c.qkv, Buffer<std::uint16_t>{}, 0, 3 * D, head), qkv_sequence, ds, H * TT, m.dqkv.data() + D, 3 * D,
                head, qkv_sequence, true);
  cast(m.dqkv.data(), m.dqkv.data(), m.dqkv16.data(), 3 * ND, gradient(l, "attn.qkv"));
  linear_backward(p(Index::qkv_weight), operand(c.ln1, c.ln1_16, 0, D), D, 3 * D, operand(m.dqkv, m.dqkv16, 0, 3 * D), m.dnorm.data(), l, "attn.qkv");
  cast(m.dnorm.data(), m.dnorm.data(), nullptr, ND, gradient(l, "ln1"));
  norm_backward(p(Index::ln1_gain), c.xhat1, c.rstd1, true);
  residual_gradient(l - 1);
}

void DeviceGptTrainer::Pass::embed_backward() {
  ops.embed_backward(m.token_columns.data(), m.token_starts.data(), m.dx.data(), V, T, D, N, m.gradient[Index::tokens].data(),
                     m.gradient[Index::positions].data());
  if (recipe != GemmRecipe::none) m.recipe.finish_step(ops, result.scaling, result.block_operands);
}

void DeviceGptTrainer::Pass::check_and_update() {
  for (const FaultInjection& fault : trainer.faults_)
    for (std::size_t p = 0; p < layout.size(); ++p)
      if (fault.step == trainer.steps_ && layout[p].recorded == fault.tensor) {
        const float bad = fault.value == FaultInjection::Value::nan ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
        ops.upload(m.gradient[p].data(), &bad, sizeof bad);
      }
  ops.zero(m.found_non_finite.data(), sizeof(int));
  // The sentinel reads the weight gradients in the order the backward makes them, the last layer's
  // first (GptTrainer's order), though they are cast in the parameters' order.
  std::vector<std::size_t> reading_of(layout.size(), 0);
  if (config.sentinel)
    for (std::size_t p = layout.size(); p-- > 0;)
      if (!layout[p].recorded.empty() && watched.size() < m.sentinel.size()) {
        reading_of[p] = watched.size();
        watched.push_back({layout[p].recorded, TensorKind::weight_gradient, 0});
      }
  for (std::size_t p = 0; p < layout.size(); ++p) {
    Into into = weight_record(TensorKind::weight_gradient, p);
    if (into.watched && config.sentinel) {
      ops.amax_bits(m.gradient[p].data(), m.gradient[p].size(), m.sentinel.data() + reading_of[p]);
      into.watched = false;  // read above, in its place
    }
    cast(m.gradient[p].data(), m.gradient[p].data(), nullptr, m.gradient[p].size(), into);
    ops.find_non_finite(m.gradient[p].data(), m.gradient[p].size(), m.found_non_finite.data());
  }
  float* step_scale = reinterpret_cast<float*>(m.readback.data() + 1);
  int* skip = reinterpret_cast<int*>(m.readback.data() + 2);
  ops.update_scaler(config.scaler, m.scaler.data(), m.found_non_finite.data(), skip, step_scale);
  std::vector<float*> parameters;
  std::vector<const float*> gradients;
  for (std::size_t p = 0; p < layout.size(); ++p) parameters.push_back(m.master[p].data()), gradients.push_back(m.gradient[p].data());
  m.optimizer.update(ops, config.learning_rate, parameters, gradients, m.sizes, step_scale, skip);
  // fp16-pure rounds the updated weights again, as GptTrainer does after an update only: the casts
  // are queued either way and read the skip flag on the device (so do the words they take).
  if (config.precision == Precision::fp16_pure)
    for (std::size_t p = 0; p < layout.size(); ++p)
      ops.cast_unless_skipped(m.master[p].data(), m.master[p].data(), m.master[p].size(), bf16, config.rounding,
                              m.counter.draw_unless_skipped(m.master[p].size()), skip);
  m.counter.finish_step(ops, skip);
}

void DeviceGptTrainer::Pass::read_back(bool read_loss) {
  result.loss = std::numeric_limits<double>::quiet_NaN();
  result.loss_scale = std::numeric_limits<double>::quiet_NaN();
  if (!record && !read_loss) return;
  const std::size_t words = record ? m.readback.size() : scalar_words;
  ops.download(m.host_readback.data(), m.readback.data(), words * sizeof(unsigned long long));
  double loss_sum = 0;
  float scale = 0;
  int skipped = 0;
  std::memcpy(&loss_sum, m.host_readback.data(), sizeof loss_sum);
  std::memcpy(&scale, m.host_readback.data() + 1, sizeof scale);
  std::memcpy(&skipped, m.host_readback.data() + 2, sizeof skipped);
  result.loss = loss_sum / static_cast<double>(N);
  result.loss_scale = scale;
  result.skipped = skipped != 0;
  if (result.skipped || !std::isfinite(result.loss)) {  // the sentinel's readings, for the culprit
    if (result.skipped)
      for (const auto& [p, place] : weight_readings) ops.amax_bits(m.master[p].data(), m.master[p].size(), m.sentinel.data() + place);
    std::vector<std::uint32_t> largest(watched.size());
    ops.download(largest.data(), m.sentinel.data(), largest.size() * sizeof(std::uint32_t));
    for (std::size_t i = 0; i < watched.size(); ++i) watched[i].largest_bits = largest[i];
    result.sentinel = std::move(watched);
  }
  if (!record) return;
  Snapshot snapshot;
  for (std::size_t r = 0; r < m.records.size(); ++r) {
    snapshot.tensors.push_back(
        device_step::counted_record(m.records[r].first, m.records[r].second, m.host_readback.data() + scalar_words + r * record_stride, low));
    if (!blocks.empty()) snapshot.tensors.back().blocks = std::move(blocks[r]);
  }
  add_recipe_records(snapshot, config.recipe, result.scaling, result.block_operands);
  complete_snapshot(snapshot, trainer.steps_, result.loss, result.loss_scale, result.skipped);
  result.snapshot = std::move(snapshot);
}

StepResult DeviceGptTrainer::step(const Eigen::MatrixXf& inputs, const std::vector<int>& labels, bool record, bool read_loss) {
  const std::vector<int> tokens = gpt_batch_tokens(shape_, inputs, labels);
  Pass pass(*this, static_cast<int>(inputs.rows()), record);
  memory_->counter.begin_step();
  pass.upload(tokens, labels);
  const bool eligible = device_step::graphable(config_, memory_->recipe, faults_, steps_);
  graphs_->run(device_step::graph_key(inputs.rows(), record), eligible, [&] {
    pass.cast_parameters();
    pass.embed();
    for (int l = 0; l < shape_.layers; ++l) pass.block_forward(l);
    pass.head_and_loss();
    pass.head_backward();
    for (int l = shape_.layers; l-- > 0;) pass.block_backward(l);
    pass.embed_backward();
    pass.check_and_update();
  });
  pass.read_back(read_loss);
  ++steps_;
  return std::move(pass.result);
}

}  // namespace fpscope
