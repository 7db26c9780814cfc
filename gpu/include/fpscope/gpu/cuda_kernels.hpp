// The CUDA backend's element-wise kernels, callable from host code that never sees a CUDA header.
// Each runs the FPSCOPE_HD math its CPU twin runs: cast_from_f32 / cast_to_f32 and
// histogram_slot_of_f32 (cast_and_record), sgd_update_element and gradient_non_finite (the update),
// activate / activation_derivative, softmax_cross_entropy_row and apply_scaler_rule
// (LossScaler::update). Matrices are column-major, as Eigen holds them in the CPU backend, so that
// element i is the same element on both sides (stochastic rounding draws word i for it). Built
// only when FPSCOPE_ENABLE_CUDA is on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "fpscope/core/context.hpp"
#include "fpscope/gpu/activation.hpp"
#include "fpscope/gpu/device_ops.hpp"
#include "fpscope/gpu/loss_scaler.hpp"
#include "fpscope/gpu/optimizer_element.hpp"

namespace fpscope::cuda {

// Device buffers the recorded cast accumulates into (device_ops.hpp's RecordSlots): 280 histogram
// slots (binades -149..127, then zero, inf, nan) and 3 outcome counts (flushed to zero, made
// subnormal, overflowed).
using CastRecordBuffers = RecordSlots;

// Rounds n float32 values (device memory) to fp16 (bf16 with `bf16`) in `mode` with default
// options, writing them as float32 into `out` (may equal `in`; null: not written) and as the
// format's 16-bit patterns into `packed` (null: not written; the cuBLAS operands), and, where
// `buffers` are given, accumulates the histogram of the values before the cast and the outcome
// counts; with CastRecordBuffers{} nothing is counted (an unrecorded cast does no histogram work).
// buffers.largest, where given, takes the step sentinel's reading of the values before the cast
// in the same pass (zeroed first, then one atomic maximum a block).
// One pass over the data (four elements a thread through 16-byte accesses where aligned);
// per-warp shared-memory histograms, zeros and outcome counts in registers, merged with one
// global atomic per nonzero bin per block. fp16 / bf16 in round-to-nearest-even use the GPU's
// conversion instruction (cast_record_element_device.cuh, held to the emulator over every
// float32 input). Stochastic
// rounding draws element i's word as stochastic_random(random.seed, random.first_word() + i), as
// the CPU's round_f32 does with ctx.stochastic_counter == random.first_word(): the same bits on
// both. Where `skip` (device) is given and *skip is not 0, nothing is done (DeviceOps::cast_unless_skipped).
void cast_and_record(const float* in, float* out, std::size_t n, bool bf16, RoundingMode mode, CastRecordBuffers buffers,
                     void* stream = nullptr, RandomWords random = {}, std::uint16_t* packed = nullptr, const int* skip = nullptr);
// DeviceOps::advance_counter: one thread.
void advance_counter(std::uint64_t* counter, std::uint64_t words, std::uint64_t words_unless_skipped, const int* skip, void* stream = nullptr);

// A linear layer's forward epilogue (device_ops.hpp's ForwardEpilogue) in one kernel: the same
// bits, bins, outcome counts and readings as DeviceOps::compose_forward_epilogue's four launches
// (tests/cuda/gpu_kernels.cu holds it to them), z read once.
void forward_epilogue(const ForwardEpilogue& e, void* stream = nullptr);

// Advances the scaler state (device memory) by one step from *found_non_finite, on the device,
// so that a training step needs no host synchronisation: *skip says whether the step is skipped,
// *step_scale (float32) the scale the step ran with, read before the state moved on.
void update_scaler(const LossScalerConfig& config, LossScalerState* state, const int* found_non_finite, int* skip, float* step_scale,
                   void* stream = nullptr);

// Number of CUDA devices (0 when there is no driver or no device).
// Devices the CUDA runtime finds; 0 with the runtime's reason in *why when it finds none.
int device_count(std::string* why = nullptr);

// --- the MLP step's other kernels (column-major matrices, as the CPU backend holds them) ---

// Histogram of n float32 values without a cast (the fp32 policy records this only) into
// buffers.histogram, and the sentinel's reading into buffers.largest, each where not null.
void record_histogram(const float* in, std::size_t n, CastRecordBuffers buffers, void* stream = nullptr);
// z (rows x cols, column-major) += bias (cols) on every row: column c's bias (the MLP's layout).
void add_bias(float* z, const float* bias, int rows, int cols, void* stream = nullptr);
// out = activate(z), element-wise (out may equal z).
void activation_forward(const float* z, float* out, std::size_t n, Activation activation, void* stream = nullptr);
// gradient *= activation_derivative(z), element-wise.
void activation_backward(const float* z, float* gradient, std::size_t n, Activation activation, void* stream = nullptr);
// Softmax cross-entropy of each row of logits (rows x cols) in float32: row_loss[r], and
// gradient = (softmax - onehot) * scale * loss_weight / rows, the scale read from the device
// state (no host sync).
void softmax_cross_entropy(const float* logits, const int* labels, int rows, int cols, const LossScalerState* state,
                           float loss_weight, float* gradient, float* row_loss, void* stream = nullptr);
// out[c] = sum over rows of m[r][c]: a warp per column, in an order fixed by `rows` (the same
// bits run after run; not the CPU's order, so not its bits).
void column_sums(const float* m, int rows, int cols, float* out, void* stream = nullptr);
// Sets *found_non_finite (device int) to 1 if any of the n values is infinite or NaN.
void find_non_finite(const float* values, std::size_t n, int* found_non_finite, void* stream = nullptr);
// w = sgd_update_element(w, g, learning_rate / *step_scale) unless *skip (device values): g still
// carries the loss scale, as on the CPU.
void sgd_update(float* w, const float* g, std::size_t n, float learning_rate, const float* step_scale, const int* skip,
                void* stream = nullptr);
// --- the optimizers: optimizer_element.hpp's rule per element, the step's settings made on the
// device from the scaler's outputs (no host synchronisation) ---

// The optimizer's settings and the partials of its clipping norm: device_ops.hpp's.
using fpscope::OptimizerSettings;
using fpscope::sum_of_squares_partials;
// partials[0 .. sum_of_squares_partials) = the float64 squares of g / *step_scale (device values),
// in sum_of_squares_partials fixed parts, each summed in a fixed order.
void sum_of_squares(const float* g, std::size_t n, const float* step_scale, double* partials, void* stream = nullptr);
// *step = the settings of this step (one thread): update number *updates + 1 at the step's scale,
// clipped where settings clip and the norm (sqrt of the partial_count partials summed in order;
// 0 partials: no clipping) passes it; *updates moves on unless *skip.
void prepare_optimizer_step(const OptimizerSettings& settings, const double* partials, int partial_count, const float* step_scale,
                            const int* skip, long long* updates, OptimizerStep* step, void* stream = nullptr);
// update_element for each of n elements unless *skip: w the master weights, first / second the
// optimizer's buffers (null where the kind keeps none), g the scaled gradients.
void optimizer_update(float* w, float* first, float* second, const float* g, std::size_t n, const OptimizerStep* step, const int* skip,
                      void* stream = nullptr);

// *out = sum of n values in order (one thread: the loss of a batch, deterministic).
void ordered_sum(const float* values, int n, float* out, void* stream = nullptr);

// --- the GPT's kernels (gpt_kernels.cu): DeviceOps' operations of the same names
// (device_ops.hpp), each thread running gpt_element.hpp's function for one element, column, row or
// feature, as the host twin (host_device_ops.cpp) runs it in a loop ---
void embed(const int* tokens, const float* token_table, const float* position_table, int vocab, int context, int width, int columns, float* x,
           void* stream = nullptr);
void embed_backward(const int* token_columns, const int* token_starts, const float* dx, int vocab, int context, int width, int columns,
                    float* token_gradient, float* position_gradient, void* stream = nullptr);
void layer_norm(const float* x, const float* gain, const float* bias, int features, int columns, float* y, float* xhat, float* rstd,
                void* stream = nullptr);
void layer_norm_backward(const float* dy, const float* gain, const float* xhat, const float* rstd, int features, int columns, float* dx, bool add,
                         void* stream = nullptr);
// `run_sums`: device scratch of features * token_runs(columns) floats.
void add_token_sums(const float* a, const float* b, int features, int columns, float* into, float* run_sums, void* stream = nullptr);
void add_row_bias(float* y, const float* bias, int features, int columns, void* stream = nullptr);
void add_into(float* x, const float* y, std::size_t n, void* stream = nullptr);
void pack_triangles(const float* full, int context, int triangles, float factor, float* packed, void* stream = nullptr);
void unpack_triangles(const float* packed, int context, int triangles, float factor, float* full, std::uint16_t* full16, bool bf16,
                      void* stream = nullptr);
void causal_softmax(const float* scores, int context, int triangles, float* probabilities, void* stream = nullptr);
void softmax_backward(const float* probabilities, const float* dprobabilities, int context, int triangles, float* dscores, void* stream = nullptr);
void cross_entropy_columns(const float* logits, const int* targets, int classes, int columns, const LossScalerState* scaler, float loss_weight,
                           float* gradient, float* losses, void* stream = nullptr);
void loss_sum(const float* losses, int n, double* sum, void* stream = nullptr);

// --- per-tensor FP8 operands (recipe_kernels.cu): DeviceOps' amax_bits and fp8_quantize, a
// thread per element running fp8_element.hpp's functions ---
void amax_bits(const float* in, std::size_t n, std::uint32_t* largest, void* stream = nullptr);
void fp8_quantize(const float* in, float* out, std::size_t n, float scale, bool e5m2, RoundingMode mode, const CastOptions& saturating,
                  RandomWords random, unsigned long long* counts, void* stream = nullptr);
// DeviceOps' block_quantize: a thread per block running block_element.hpp's function.
void block_quantize(const float* in, float* out, const BlockLayout& layout, const BlockFormat& format, ScaleRule rule, const Context& ctx,
                    RandomWords random, unsigned long long* counters, std::uint32_t* amax, void* stream = nullptr);

}  // namespace fpscope::cuda
