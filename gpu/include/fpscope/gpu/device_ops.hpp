// What a device backend's step is made of: memory, products and kernels, behind one interface, so
// that each model's step logic (device_mlp.cpp, device_gpt.cpp: which tensor is cast when, which
// product reads what, what is recorded where) is written once and runs on two implementations -- the CUDA one (cuBLAS and
// our kernels, in the module libfpscope_cuda.so) and a host twin (host_device_ops.hpp) that runs
// every kernel's FPSCOPE_HD math on the host. The twin lets the tests hold the device step to the
// CPU backend on a machine without a GPU, and the device tests hold each kernel to its twin.
//
// Every pointer is device memory from allocate(); the caller never reads it but through download().
// Work is queued in order on one stream; download() waits for it.
#pragma once

#include <math.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/cast.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/hd.hpp"
#include "fpscope/gpu/activation.hpp"
#include "fpscope/gpu/loss_scaler.hpp"
#include "fpscope/gpu/optimizer_element.hpp"

namespace fpscope {

// Where a recorded cast accumulates: 280 histogram slots (binades -149..127, then zero, inf, nan)
// and 3 outcome counts (flushed to zero, made subnormal, overflowed). Null: nothing is counted.
// `largest`, where not null, takes the step sentinel's reading of the values before the cast:
// their largest magnitude_bits (0 for none), as amax_bits would write it, in the cast's own pass.
struct RecordSlots {
  unsigned long long* histogram = nullptr;
  unsigned long long* counts = nullptr;
  std::uint32_t* largest = nullptr;
};

// Where a kernel's stochastic-rounding words come from: element i draws word first_word() + i,
// first_word() = *counter + first -- `counter` a device word, the run's count of the words drawn
// before the step (null reads as 0), `first` the words the step drew before this launch -- so that
// a step queues the same launches with the same arguments every step (nothing the host must know
// of the counter's value), and the counter moves on on the device (DeviceOps::advance_counter).
struct RandomWords {
  std::uint64_t seed = 0;
  const std::uint64_t* counter = nullptr;
  std::uint64_t first = 0;
  FPSCOPE_HD std::uint64_t first_word() const { return (counter != nullptr ? *counter : 0) + first; }
};
// ctx's rounding and options, drawing random's words: the context block_quantize runs in.
FPSCOPE_HD inline Context drawing(Context ctx, const RandomWords& random) {
  ctx.stochastic_seed = random.seed;
  ctx.stochastic_counter = random.first_word();
  return ctx;
}

// One operand of a product: float32 values, or the format's 16-bit patterns of the same values
// (read where the product is a 16-bit one), `ld` apart per column, `stride` apart per batch entry,
// `group_stride` apart per group.
struct DeviceOperand {
  const float* f32 = nullptr;
  const std::uint16_t* p16 = nullptr;
  int ld = 0;
  std::size_t stride = 0;
  std::size_t group_stride = 0;
};

// C (m x n) = alpha op(A) op(B) (+ C where `accumulate`), column-major as cuBLAS: op(A) is m x k, op(B)
// k x n; `groups` x `batch` products, product (g, e)'s operands g group strides and e strides on
// (a sequence's heads: groups the sequences, batch the heads). `sixteen`: the operands' 16-bit
// patterns are read (bf16 where `bf16`, else fp16), else their float32 values; float32 output and
// accumulation either way. `alpha` multiplies each accumulated sum once, rounded to float32 (an
// FP8 recipe's dequantization factor; 1 elsewhere, which changes nothing).
struct ProductCall {
  bool transpose_a = false, transpose_b = false;
  int m = 0, n = 0, k = 0;
  DeviceOperand a, b;
  float* c = nullptr;
  int ldc = 0;
  std::size_t stride_c = 0, group_stride_c = 0;
  int batch = 1;
  int groups = 1;
  float alpha = 1.0f;
  bool accumulate = false;
  bool sixteen = false;
  bool bf16 = false;
};

// A linear layer's forward epilogue on its product z (rows x cols, column-major), in this order:
// z += the bias (bias[c] per column where `bias_per_column`, the MLP's batch x features; else
// bias[r] per row, the GPT's features x tokens); z cast in place into fp16 (bf16 where `bf16`) in
// `mode` (drawing z_random's words), recorded into z_slots, its 16-bit patterns into
// z16 where not null; then, where `activate`, a = activation(z) (the cast z) as float32 into `a`
// where not null, cast (drawing a_random's words) and recorded into a_slots, its
// rounded values into a_rounded and its 16-bit patterns into a16 where not null (a_rounded may be
// `a`). DeviceOps::forward_epilogue's composition is the rule: the MLP's hidden layers (bias per
// column, the activation's float32 kept, its patterns for the next product, unrecorded), its
// last layer (no activation), the GPT's mlp.fc (bias per row, GELU, mlp.gelu recorded and rounded
// in place).
struct ForwardEpilogue {
  float* z = nullptr;
  const float* bias = nullptr;
  int rows = 0, cols = 0;
  bool bias_per_column = true;
  bool bf16 = false;
  RoundingMode mode = RoundingMode::nearest_even;
  RecordSlots z_slots;
  RandomWords z_random;
  std::uint16_t* z16 = nullptr;
  bool activate = false;
  Activation activation = Activation::relu;
  float* a = nullptr;
  RecordSlots a_slots;
  RandomWords a_random;
  float* a_rounded = nullptr;
  std::uint16_t* a16 = nullptr;
  FPSCOPE_HD std::size_t count() const { return static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols); }
  // An activation needs somewhere to go: `a` or a_rounded.
  void check() const {
    if (activate && a == nullptr && a_rounded == nullptr) throw std::logic_error("forward_epilogue: an activation with neither a nor a_rounded to hold it");
  }
};

// How many of a device trainer's steps ran as a graph (step_graphs.hpp): captured, then replayed.
struct StepGraphStatistics {
  std::int64_t captured = 0;
  std::int64_t replayed = 0;
};

// The settings a run gives its optimizer (OptimizerConfig's, and the learning rate).
struct OptimizerSettings {
  OptimizerKind kind = OptimizerKind::sgd;
  float learning_rate = 0, momentum = 0, beta1 = 0, beta2 = 0, epsilon = 0, weight_decay = 0;
  float clip_grad_norm = 0;  // 0: no clipping
};
// Partials per parameter of the unscaled gradients' sum of squares: partial b sums the float64
// squares of elements b * threads + t + k * partials * threads over t's grid-stride loop, then the
// threads' sums by a halving tree (the CUDA kernel's blocks; the host twin keeps its order).
inline constexpr int sum_of_squares_partials = 64;
inline constexpr int sum_of_squares_threads = 256;

// A step's optimizer settings from the scaler's outputs (the step's scale) and, where the run
// clips, the norm from `partial_count` partials summed in order; `updates` applied so far.
FPSCOPE_HD inline OptimizerStep prepared_optimizer_step(const OptimizerSettings& s, const double* partials, int partial_count, float step_scale,
                                                        long long updates) {
  double sum = 0;
  for (int i = 0; i < partial_count; ++i) sum += partials[i];
  const double norm = sqrt(sum);
  const bool clip = partial_count > 0 && clips(s.clip_grad_norm, norm);
  return optimizer_step(s.kind, s.learning_rate, step_scale, s.momentum, s.beta1, s.beta2, s.epsilon, s.weight_decay, updates + 1, clip,
                        clip ? clipping_coefficient(s.clip_grad_norm, norm) : 1.0f);
}

// The batch's columns grouped by token, for embed_backward: `columns` lists token 0's columns in
// order, then token 1's, ...; token v's run from starts[v] to starts[v + 1] (vocab + 1 of them).
inline void group_columns_by_token(const std::vector<int>& tokens, int vocab, std::vector<int>& columns, std::vector<int>& starts) {
  starts.assign(static_cast<std::size_t>(vocab) + 1, 0);
  for (const int v : tokens) ++starts[static_cast<std::size_t>(v) + 1];
  for (std::size_t v = 0; v < static_cast<std::size_t>(vocab); ++v) starts[v + 1] += starts[v];
  std::vector<int> next(starts.begin(), starts.end() - 1);
  columns.resize(tokens.size());
  for (std::size_t n = 0; n < tokens.size(); ++n) columns[static_cast<std::size_t>(next[static_cast<std::size_t>(tokens[n])]++)] = static_cast<int>(n);
}

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;
  virtual std::string_view name() const = 0;  // "cuda", or "host twin"

  // --- memory ---
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* device) = 0;
  virtual void upload(void* device, const void* host, std::size_t bytes) = 0;  // returns when `host` may change
  virtual void download(void* host, const void* device, std::size_t bytes) = 0;  // after all work queued
  virtual void zero(void* device, std::size_t bytes) = 0;
  virtual void copy(void* to, const void* from, std::size_t bytes) = 0;

  // --- casts (cuda_kernels.hpp's cast_and_record) ---
  // n float32 values rounded to fp16 (bf16 where `bf16`) in `mode` (element i drawing word
  // random.first_word() + i), as float32 into `out` (may be `in`; null: not written) and as 16-bit
  // patterns into `packed` (null: not written), recorded into `slots` where given.
  virtual void cast(const float* in, float* out, std::uint16_t* packed, std::size_t n, bool bf16, RoundingMode mode, RecordSlots slots,
                    RandomWords random) = 0;
  // As cast into `out`, nothing packed or recorded, done only where *skip (device) is 0: fp16-pure's
  // re-cast of the parameters its update changed, queued whether or not the step skips.
  virtual void cast_unless_skipped(const float* in, float* out, std::size_t n, bool bf16, RoundingMode mode, RandomWords random, const int* skip) = 0;
  // *counter += words, plus words_unless_skipped where *skip is 0 (all device words): the step's
  // last launch, moving the run's stochastic counter past what the step drew.
  virtual void advance_counter(std::uint64_t* counter, std::uint64_t words, std::uint64_t words_unless_skipped, const int* skip) = 0;
  // The histogram of n values into slots.histogram (null: none), and their reading into
  // slots.largest (null: none), no cast (the fp32 policy).
  virtual void record_histogram(const float* in, std::size_t n, RecordSlots slots) = 0;

  // --- products ---
  virtual void product(const ProductCall& call) = 0;

  // --- per-tensor FP8 operands (fp8_element.hpp) ---
  // *largest = the largest magnitude_bits of n values (0 for none).
  virtual void amax_bits(const float* in, std::size_t n, std::uint32_t* largest) = 0;
  // n values cast(fl32(x * scale)) into E4M3 (E5M2 where `e5m2`) with saturation in `mode`
  // (`saturating`: the run's options, saturation on), as float32 into `out` (may be `in`); element
  // i draws word random.first_word() + i. counts[0] += the zeros of `in`, counts[1] += those flushed
  // to zero, counts[2] += those saturated.
  virtual void fp8_quantize(const float* in, float* out, std::size_t n, float scale, bool e5m2, RoundingMode mode, const CastOptions& saturating,
                            RandomWords random, unsigned long long* counts) = 0;

  // --- block-scaled operands (block_element.hpp) ---
  // The layout's row-major values at `in` quantized in `format` by `rule` in ctx's mode and options
  // (ctx's seed and counter are random's: element i draws word random.first_word() + i) and
  // dequantized into `out` (may be `in`; null: only the statistics),
  // block_quantize's and block_dequantize's bits; the statistics added to `counters`
  // (block_counter_count words). NVFP4's tensor scale comes from the whole tensor's amax, found in
  // `amax` (one word). Precondition: format.block_size <= device_block_size_limit.
  virtual void block_quantize(const float* in, float* out, const BlockLayout& layout, const BlockFormat& format, ScaleRule rule, const Context& ctx,
                              RandomWords random, unsigned long long* counters, std::uint32_t* amax) = 0;

  // --- the GPT's layers (gpt_element.hpp; features x tokens, column-major) ---
  // x[:, n] = token_table[tokens[n], :] + position_table[n % context, :] (tables vocab x width and
  // context x width, column-major).
  virtual void embed(const int* tokens, const float* token_table, const float* position_table, int vocab, int context, int width, int columns,
                     float* x) = 0;
  // Each token's column of dx added to its token's row and its position's row, token by token in
  // order, given the columns grouped by token (gpt_element.hpp's add_token_row_gradient).
  virtual void embed_backward(const int* token_columns, const int* token_starts, const float* dx, int vocab, int context, int width, int columns,
                              float* token_gradient, float* position_gradient) = 0;
  // y = LayerNorm(x) per column, xhat and rstd (one per column) kept.
  virtual void layer_norm(const float* x, const float* gain, const float* bias, int features, int columns, float* y, float* xhat, float* rstd) = 0;
  virtual void layer_norm_backward(const float* dy, const float* gain, const float* xhat, const float* rstd, int features, int columns, float* dx,
                                   bool add) = 0;
  // into[f] += sum over columns of a[f, n] (times b[f, n] where b is given), in the CPU's order
  // (gpt_element.hpp: token_run_sum, add_run_sums).
  virtual void add_token_sums(const float* a, const float* b, int features, int columns, float* into) = 0;
  // y[f, n] += bias[f].
  virtual void add_row_bias(float* y, const float* bias, int features, int columns) = 0;
  // x += y over n values.
  virtual void add_into(float* x, const float* y, std::size_t n) = 0;
  // out = activate(z); gradient *= activation_derivative(z) (activation.hpp).
  virtual void activation_forward(const float* z, float* out, std::size_t n, Activation activation) = 0;
  virtual void activation_backward(const float* z, float* gradient, std::size_t n, Activation activation) = 0;
  // `triangles` keys x queries matrices (context x context each, column-major, one after another)
  // times `factor`, their causal part packed (query j's keys 0..j at triangle_start(j)).
  virtual void pack_triangles(const float* full, int context, int triangles, float factor, float* packed) = 0;
  // The inverse, zero above each diagonal: as float32 into `full` and as 16-bit patterns into
  // `full16` (bf16 where `bf16`; each null where not wanted; the values must be the format's).
  virtual void unpack_triangles(const float* packed, int context, int triangles, float factor, float* full, std::uint16_t* full16,
                                bool bf16) = 0;
  virtual void causal_softmax(const float* scores, int context, int triangles, float* probabilities) = 0;
  virtual void softmax_backward(const float* probabilities, const float* dprobabilities, int context, int triangles, float* dscores) = 0;
  // Per column of logits (classes x columns): its loss, and its gradient (softmax - onehot) times
  // the scaler's scale (read on the device) times loss_weight / columns.
  virtual void cross_entropy_columns(const float* logits, const int* targets, int classes, int columns, const LossScalerState* scaler,
                                     float loss_weight, float* gradient, float* losses) = 0;
  // *sum = the n losses summed in float64 in gpt_element.hpp's order (a block of threads' tree).
  virtual void loss_sum(const float* losses, int n, double* sum) = 0;

  // --- the MLP's layers (batch x features, column-major as Eigen holds them; cuda_kernels.hpp's) ---
  // z[r, c] += bias[c].
  virtual void add_column_bias(float* z, const float* bias, int rows, int cols) = 0;
  // out[c] = the sum of column c: a warp's 32 lanes each down every 32nd row, then a shuffle tree
  // (the kernel's order, which the twin follows).
  virtual void column_sums(const float* m, int rows, int cols, float* out) = 0;
  // Per row of logits (rows x cols): its loss, and its gradient times the scaler's scale times
  // loss_weight / rows (softmax_cross_entropy_row, `rows` apart).
  virtual void cross_entropy_rows(const float* logits, const int* labels, int rows, int cols, const LossScalerState* scaler, float loss_weight,
                                  float* gradient, float* row_loss) = 0;
  // *out = the n values summed in order in float64, then rounded to float32.
  virtual void ordered_sum(const float* values, int n, float* out) = 0;

  // --- a linear layer's forward epilogue (ForwardEpilogue) ---
  // The composition below: the bias add, the cast, the activation and its cast, one call each.
  // The CUDA backend makes it in one kernel, held to this composition on the device
  // (tests/cuda/gpu_kernels.cu); the host twin runs the composition itself.
  virtual void forward_epilogue(const ForwardEpilogue& e) { compose_forward_epilogue(e); }
  void compose_forward_epilogue(const ForwardEpilogue& e) {
    e.check();
    if (e.bias_per_column) add_column_bias(e.z, e.bias, e.rows, e.cols);
    else add_row_bias(e.z, e.bias, e.rows, e.cols);
    cast(e.z, e.z, e.z16, e.count(), e.bf16, e.mode, e.z_slots, e.z_random);
    if (!e.activate) return;
    // The activation's float32 goes to `a`, or straight to a_rounded where `a` is not kept.
    float* const activated = e.a != nullptr ? e.a : e.a_rounded;
    activation_forward(e.z, activated, e.count(), e.activation);
    cast(activated, e.a_rounded, e.a16, e.count(), e.bf16, e.mode, e.a_slots, e.a_random);
  }

  // --- a step's launches as one graph (CUDA Graphs) ---
  // Where begin_capture() returns true, the launches queued until end_capture(key) are kept, not
  // run: end_capture makes a graph of them, kept under `key` (in place of any kept there), and runs
  // it once; replay(key) runs it again -- the same launches with the same arguments, reading device
  // memory as it is then. Nothing may be uploaded, downloaded, made or given back in between.
  // abandon_capture() ends a capture that failed, keeping nothing. A backend without graphs
  // returns false and the caller keeps the launches itself (StepGraphOps).
  virtual bool begin_capture() { return false; }
  virtual void end_capture(std::uint64_t /*key*/) {}
  virtual void abandon_capture() {}
  virtual void replay(std::uint64_t /*key*/) {}
  virtual void forget_graphs() {}

  // --- the step's end (cuda_kernels.hpp's) ---
  virtual void find_non_finite(const float* values, std::size_t n, int* found) = 0;
  virtual void update_scaler(const LossScalerConfig& config, LossScalerState* state, const int* found, int* skip, float* step_scale) = 0;
  virtual void sgd_update(float* w, const float* g, std::size_t n, float learning_rate, const float* step_scale, const int* skip) = 0;
  virtual void sum_of_squares(const float* g, std::size_t n, const float* step_scale, double* partials) = 0;
  virtual void prepare_optimizer_step(const OptimizerSettings& settings, const double* partials, int partial_count, const float* step_scale,
                                      const int* skip, long long* updates, OptimizerStep* step) = 0;
  virtual void optimizer_update(float* w, float* first, float* second, const float* g, std::size_t n, const OptimizerStep* step,
                                const int* skip) = 0;
};

}  // namespace fpscope
