// GEMM operand recipes: how the engine's matrix products see their operands when the run trains
// with FP8 or a block-scaled format. Everything else in the step (outputs, activations, the loss,
// the update) follows the precision policy (training_config.hpp); only the GEMM inputs change.
//
//   fp8-delayed   per-tensor FP8 scaling from an amax history (NVIDIA Transformer Engine's
//                 DelayedScaling: scale = (FP8_MAX / max(history)) / 2^margin, the history holding
//                 the amax of the operand's previous steps; scale 1 before there is one)
//   fp8-current   per-tensor FP8 scaling from the operand's own amax this step (TE's
//                 Float8CurrentScaling, torchao float8's dynamic scaling)
//   fp8-unscaled  FP8 operands with no scale (always 1): what a plain cast to FP8 does, the
//                 baseline the scaled recipes are for
//   mxfp8, mxfp6, mxfp4, nvfp4
//                 block scaling along each GEMM's reduction axis (OCP MX v1.0: blocks of 32 with an
//                 E8M0 scale by the floor rule; NVFP4: blocks of 16, E4M3 scales, a float32 tensor
//                 scale), elements in the run's rounding mode; with square_weight_tiles, the
//                 weights in square tiles of the block size, quantized once for both their products
//
// FP8 formats: "hybrid" (TE's default) casts inputs and weights to E4M3 and output gradients to
// E5M2; "e4m3" casts all three to E4M3. Casts saturate (TE and the OCP FP8 "SAT" conversion).
//
// Arithmetic (the definition the tests hold it to): an FP8 operand is q = cast(fl32(x * s)); a
// product C = A B is accumulated in float32 from the FP8 values (each product exact in float32)
// and then multiplied by fl32(fl32(1/s_A) * fl32(1/s_B)), as cuBLASLt applies its A and B scales
// to the accumulator. A block-scaled operand is its dequantized float32 values (exact: element
// times a power of two, or NVFP4's scale product), and the product is accumulated in float32.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/core/block_format.hpp"
#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/cast.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/snapshot/snapshot.hpp"

namespace fpscope {

enum class GemmRecipe : std::uint8_t { none, fp8_delayed, fp8_current, fp8_unscaled, mxfp8, mxfp6, mxfp4, nvfp4 };
inline constexpr GemmRecipe all_gemm_recipes[] = {GemmRecipe::none,  GemmRecipe::fp8_delayed, GemmRecipe::fp8_current, GemmRecipe::fp8_unscaled,
                                                  GemmRecipe::mxfp8, GemmRecipe::mxfp6,       GemmRecipe::mxfp4,       GemmRecipe::nvfp4};
std::string gemm_recipe_name(GemmRecipe recipe);
// "none", "fp8-delayed", ...; throws std::invalid_argument listing every name.
GemmRecipe parse_gemm_recipe(std::string_view name);
inline bool per_tensor_fp8(GemmRecipe r) {
  return r == GemmRecipe::fp8_delayed || r == GemmRecipe::fp8_current || r == GemmRecipe::fp8_unscaled;
}
inline bool block_scaled(GemmRecipe r) { return r != GemmRecipe::none && !per_tensor_fp8(r); }

struct RecipeConfig {
  GemmRecipe recipe = GemmRecipe::none;
  bool all_e4m3 = false;   // FP8: E4M3 for output gradients too (default: E5M2 for them)
  int amax_history = 16;   // fp8-delayed: steps of amax kept, 1 ..= 1024
  int margin = 0;          // FP8: the scale is divided by 2^margin, 0 ..= 32
  // Block-scaled: weights scaled by square tiles of the block size (16 x 16 for NVFP4: NVIDIA's
  // NVFP4 recipe, Transformer Engine's 2-D quantization) instead of blocks along each product's
  // reduction axis: quantized once a step, the same values for the forward product and the
  // input gradient's (block_quantize_square_tiles).
  bool square_weight_tiles = false;
  // How the output gradients' elements round, where not as the run's other casts (NVIDIA's
  // NVFP4 recipe: stochastically, inputs and weights to nearest even); unset, the run's mode.
  std::optional<RoundingMode> gradient_rounding;
  // Block-scaled: the weight gradient's two operands go through a 16-point random Hadamard
  // transform along its reduction axis before they are quantized (NVIDIA's NVFP4 recipe;
  // random_hadamard below): outliers spread over their run of 16, the product unchanged in exact
  // arithmetic.
  bool hadamard_weight_gradients = false;
  friend bool operator==(const RecipeConfig&, const RecipeConfig&) = default;
};
// --weight-blocks: "1d" (false) or "2d" (true: square_weight_tiles); throws std::invalid_argument
// naming the text otherwise.
bool parse_weight_blocks(std::string_view text);

// "fp8-delayed (hybrid, history 16, margin 0)", "mxfp4", "none": the run log header's words.
std::string recipe_description(const RecipeConfig& config);
// Whether a run log header's recipe (recipe_description's text) quantized the weights in square
// tiles, one copy both their products share (--weight-blocks 2d).
bool recipe_has_weight_tiles(std::string_view description);

// The operands of layer l's three products: the forward's input and weight, the backward's
// output gradient.
enum class GemmOperand : std::uint8_t { input, weight, output_gradient };
std::string gemm_operand_name(GemmOperand operand);

// The FP8 format an operand is cast to under `config`.
Format fp8_format_of(const RecipeConfig& config, GemmOperand operand);

// One operand's per-tensor FP8 scale and amax history (part of the training state).
struct Fp8TensorState {
  float scale = 1.0f;
  std::vector<float> amax_history;  // oldest first, at most RecipeConfig::amax_history long
  friend bool operator==(const Fp8TensorState&, const Fp8TensorState&) = default;
};

// Transformer Engine's scale update: (fp8_max / amax) / 2^margin in float32 where amax is finite
// and positive (FLT_MAX where that overflows), else the previous scale.
float fp8_scale_from_amax(float amax, float fp8_max, int margin, float previous);

// max |x| (NaN where x holds one).
float tensor_amax(const Eigen::MatrixXf& x);

// An FP8 operand: cast(x * scale) as float32 values, and the factor 1/scale its products carry.
struct Fp8Operand {
  Eigen::MatrixXf values;
  float dequantize = 1.0f;
};

// The scale an FP8 operand is cast with this step, its state moved on: 1 (unscaled); from `amax`,
// the operand's own this step (current); from the history of earlier steps, `amax` then joining it
// where finite (delayed; the scale stays where it is before there is a history).
float fp8_step_scale(const RecipeConfig& config, GemmOperand operand, float amax, Fp8TensorState& state);
// What an FP8 operand's products are multiplied by: 1/scale in float32.
inline float fp8_dequantize_factor(float scale) { return 1.0f / scale; }
// A quantization's record but for its counts: operand, format, amax, scale, element count.
void describe_fp8_operand(OperandScaling& record, const RecipeConfig& config, GemmOperand operand, float amax, float scale, std::uint64_t elements);
// The options an FP8 operand is cast with: the run's, saturating.
inline CastOptions fp8_cast_options(const Context& ctx) {
  CastOptions options = CastOptions::from(ctx);
  options.saturate = true;
  return options;
}

// Casts x for a product under a per-tensor FP8 recipe: picks the scale (current: from x's own
// amax; delayed: from `state`'s history, then appends x's amax to it), multiplies, casts with
// saturation in operand_rounding's mode, and returns the FP8 values with what the cast did.
Fp8Operand quantize_fp8_operand(const RecipeConfig& config, GemmOperand operand, const Eigen::MatrixXf& x, Fp8TensorState& state,
                                Context& ctx, OperandScaling& record);

// What a product of two FP8 operands is multiplied by after its float32 accumulation: the product
// of their dequantization factors, one float32 rounding.
inline float fp8_product_factor(float dequantize_a, float dequantize_b) { return dequantize_a * dequantize_b; }

// C = A B (or with A / B transposed) from two FP8 operands: float32 accumulation of the FP8
// values, then each sum times fp8_product_factor (one rounding per element).
Eigen::MatrixXf fp8_product(const Eigen::MatrixXf& a, bool transpose_a, float dequantize_a, const Eigen::MatrixXf& b, bool transpose_b,
                            float dequantize_b);

// The block format of a block-scaled recipe.
BlockFormat block_format_of(GemmRecipe recipe);

// How a recipe blocks a column-major rows x cols matrix (column-major R x C is row-major C x R:
// blocks along the first axis run along that row-major matrix's rows), and the rule that picks
// its scales (the OCP MX spec's; NVFP4 has its own).
inline BlockLayout recipe_block_layout(const BlockFormat& format, std::size_t rows, std::size_t cols, bool along_rows) {
  return BlockLayout{cols, rows, along_rows ? BlockAxis::rows : BlockAxis::cols, format.block_size};
}
inline constexpr ScaleRule recipe_scale_rule = ScaleRule::floor;

// x quantized and dequantized under a block-scaled recipe, blocks along its rows (`along_rows`:
// each block runs down a column, across rows, i.e. along the first axis) or along its columns;
// `square_tiles`: each block scaled by its square tile's amax (the values then the same either
// way). `statistics` (optional) gets the quantization's counts merged in.
Eigen::MatrixXf block_scaled_operand(GemmRecipe recipe, const Eigen::MatrixXf& x, bool along_rows, Context& ctx,
                                     BlockStatistics* statistics = nullptr, bool square_tiles = false);

// The rounding mode an operand's elements take under `config`: output gradients
// config.gradient_rounding where set, everything else the run's.
inline RoundingMode operand_rounding(const RecipeConfig& config, GemmOperand operand, RoundingMode run) {
  return operand == GemmOperand::output_gradient && config.gradient_rounding ? *config.gradient_rounding : run;
}

// The random Hadamard transform of NVIDIA's NVFP4 recipe (arXiv 2509.25149; Transformer Engine's
// RHT of the weight gradient's inputs): every run of 16 consecutive values along an axis (a
// column's rows, or a row's columns), v, becomes H diag(s) v / 4 -- H the 16 x 16 Sylvester
// Hadamard matrix (H[i][j] = (-1)^popcount(i & j)), s the signs (bit i set: s_i = -1), 1/4 making
// it orthogonal, so that two operands turned alike keep their dot products. In float32, as the
// fast Walsh-Hadamard transform computes it: the signs, then four stages of sums and differences
// (pairs 1, 2, 4, 8 apart, each value once rounded), then the exact quarter. A run shorter than 16
// at the axis's end is left as it is. (TE turns bf16 values on tensor cores: the same transform,
// other roundings.)
Eigen::MatrixXf random_hadamard(const Eigen::MatrixXf& x, bool along_first_axis, std::uint16_t signs);
// A run's 16 signs, drawn from its seed (one word of its stochastic stream's family, apart from
// the words rounding draws).
std::uint16_t hadamard_signs(std::uint64_t seed);

// Operand `operand` of a product under a block-scaled recipe: block_scaled_operand along its rows
// or columns, the weights in square tiles where config says so, the weight gradient's operands
// (`weight_gradient_product`) through random_hadamard along the blocked axis first where config
// says so (signs from ctx's seed), the elements rounded as operand_rounding says (the run's
// stochastic counter and flags go on in ctx either way).
Eigen::MatrixXf recipe_block_operand(const RecipeConfig& config, GemmOperand operand, const Eigen::MatrixXf& x, bool along_rows, Context& ctx,
                                     BlockStatistics* statistics = nullptr, bool weight_gradient_product = false);

// What a block-scaled recipe's quantizations did to one operand of layer `name` in one step (both
// products it feeds, each blocked along its own reduction axis, summed).
struct BlockOperandStatistics {
  std::string name;
  GemmOperand operand = GemmOperand::input;
  BlockStatistics statistics;
};

// A recorded step's recipe records in its snapshot: the FP8 operands' scaling, and the
// block-scaled operands' statistics with the recipe's format and scale rule. Every backend's
// recorded step goes through here.
void add_recipe_records(Snapshot& snapshot, const RecipeConfig& config, const std::vector<OperandScaling>& scaling,
                        const std::vector<BlockOperandStatistics>& block_operands);

// The statistics of (name, operand) in a step's list, added at its end the first time: every
// backend's step records its block-scaled operands through here.
BlockStatistics& block_operand_statistics(std::vector<BlockOperandStatistics>& operands, const std::string& name, GemmOperand operand);
// The same entry's place in the list.
std::size_t block_operand_index(std::vector<BlockOperandStatistics>& operands, const std::string& name, GemmOperand operand);
// A new FP8 quantization's record for layer `name`, at the end of a step's list (one per
// quantize_fp8_operand, in the step's order).
OperandScaling& new_operand_scaling(std::vector<OperandScaling>& scaling, const std::string& name);

}  // namespace fpscope
