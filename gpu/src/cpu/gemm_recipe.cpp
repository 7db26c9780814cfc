// GEMM operand recipes (gemm_recipe.hpp): per-tensor FP8 scaling and block-scaled operands.
#include "fpscope/gpu/gemm_recipe.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>

#include "fpscope/core/block_scaling.hpp"
#include "fpscope/core/bulk.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"
#include "fpscope/gpu/cast_record.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "parse_choice.hpp"

namespace fpscope {

std::string gemm_recipe_name(GemmRecipe recipe) {
  switch (recipe) {
    case GemmRecipe::none: return "none";
    case GemmRecipe::fp8_delayed: return "fp8-delayed";
    case GemmRecipe::fp8_current: return "fp8-current";
    case GemmRecipe::fp8_unscaled: return "fp8-unscaled";
    case GemmRecipe::mxfp8: return "mxfp8";
    case GemmRecipe::mxfp6: return "mxfp6";
    case GemmRecipe::mxfp4: return "mxfp4";
    case GemmRecipe::nvfp4: return "nvfp4";
  }
  return "?";
}

GemmRecipe parse_gemm_recipe(std::string_view name) { return parse_choice(name, all_gemm_recipes, gemm_recipe_name, "recipe"); }

bool parse_weight_blocks(std::string_view text) {
  if (text == "1d" || text == "2d") return text == "2d";
  throw std::invalid_argument("unknown --weight-blocks '" + printable_text(text) + "': expected 1d or 2d");
}

namespace {
constexpr std::string_view weight_tiles_text = "weights in ";  // followed by the tiles' NxN
}  // namespace

bool recipe_has_weight_tiles(std::string_view description) {
  const std::size_t details = description.find(" (");
  return details != std::string_view::npos && description.find(weight_tiles_text, details) != std::string_view::npos;
}

std::string recipe_description(const RecipeConfig& config) {
  std::vector<std::string> details;
  if (per_tensor_fp8(config.recipe)) {
    details.emplace_back(config.all_e4m3 ? "e4m3" : "hybrid");
    if (config.recipe == GemmRecipe::fp8_delayed) details.push_back("history " + std::to_string(config.amax_history));
    if (config.recipe != GemmRecipe::fp8_unscaled) details.push_back("margin " + std::to_string(config.margin));
  }
  if (block_scaled(config.recipe) && config.square_weight_tiles) {
    const int block = block_format_of(config.recipe).block_size;
    details.push_back(std::string(weight_tiles_text) + std::to_string(block) + "x" + std::to_string(block) + " tiles");
  }
  if (config.recipe != GemmRecipe::none && config.gradient_rounding) details.push_back("gradients rounded " + rounding_mode_name(*config.gradient_rounding));
  if (block_scaled(config.recipe) && config.hadamard_weight_gradients) details.emplace_back("weight gradients' operands through a random Hadamard transform");
  std::string text = gemm_recipe_name(config.recipe);
  for (std::size_t i = 0; i < details.size(); ++i) text += (i == 0 ? " (" : ", ") + details[i];
  return details.empty() ? text : text + ")";
}

std::string gemm_operand_name(GemmOperand operand) {
  switch (operand) {
    case GemmOperand::input: return "input";
    case GemmOperand::weight: return "weight";
    case GemmOperand::output_gradient: return "output_gradient";
  }
  return "?";
}

Format fp8_format_of(const RecipeConfig& config, GemmOperand operand) {
  return operand == GemmOperand::output_gradient && !config.all_e4m3 ? formats::e5m2 : formats::e4m3;
}

float fp8_scale_from_amax(float amax, float fp8_max, int margin, float previous) {
  if (!(amax > 0) || !std::isfinite(amax)) return previous;
  const float scale = (fp8_max / amax) / std::ldexp(1.0f, margin);
  return std::isinf(scale) ? std::numeric_limits<float>::max() : scale;
}

float tensor_amax(const Eigen::MatrixXf& x) {
  float amax = 0;
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    const float v = std::fabs(x.data()[i]);
    if (std::isnan(v)) return std::numeric_limits<float>::quiet_NaN();
    amax = std::max(amax, v);
  }
  return amax;
}

namespace {

float largest_finite(Format f) { return static_cast<float>(largest_finite_value(f)); }

}  // namespace

float fp8_step_scale(const RecipeConfig& config, GemmOperand operand, float amax, Fp8TensorState& state) {
  const float fp8_max = largest_finite(fp8_format_of(config, operand));
  if (config.recipe == GemmRecipe::fp8_unscaled) {
    state.scale = 1.0f;
  } else if (config.recipe == GemmRecipe::fp8_current) {
    state.scale = fp8_scale_from_amax(amax, fp8_max, config.margin, state.scale);
  } else {
    // Delayed: the scale comes from the steps before this one; this step's amax joins the
    // history for the next. Before any history, the scale stays where it is (1 at the start).
    if (!state.amax_history.empty()) {
      const float history_amax = *std::max_element(state.amax_history.begin(), state.amax_history.end());
      state.scale = fp8_scale_from_amax(history_amax, fp8_max, config.margin, state.scale);
    }
    if (std::isfinite(amax)) {
      state.amax_history.push_back(amax);
      if (state.amax_history.size() > static_cast<std::size_t>(config.amax_history)) state.amax_history.erase(state.amax_history.begin());
    }
  }
  return state.scale;
}

void describe_fp8_operand(OperandScaling& record, const RecipeConfig& config, GemmOperand operand, float amax, float scale, std::uint64_t elements) {
  record.operand = gemm_operand_name(operand);
  record.format = format_name(fp8_format_of(config, operand));
  record.amax = amax;
  record.scale = scale;
  record.elements = elements;
}

Fp8Operand quantize_fp8_operand(const RecipeConfig& config, GemmOperand operand, const Eigen::MatrixXf& x, Fp8TensorState& state,
                                Context& ctx, OperandScaling& record) {
  const Format f = fp8_format_of(config, operand);
  const float amax = tensor_amax(x);
  fp8_step_scale(config, operand, amax, state);
  Fp8Operand out;
  out.values = x * state.scale;  // float32 products, one rounding each
  out.dequantize = fp8_dequantize_factor(state.scale);
  const std::span<float> values(out.values.data(), static_cast<std::size_t>(out.values.size()));
  const bool saturate = ctx.saturate;
  const RoundingMode rounding = ctx.rounding;
  ctx.saturate = true;
  ctx.rounding = operand_rounding(config, operand, rounding);
  ExponentHistogram scaled;
  CastCounts counts;
  cast_and_record(f, values, values, ctx, scaled, counts);
  ctx.saturate = saturate;
  ctx.rounding = rounding;
  describe_fp8_operand(record, config, operand, amax, state.scale, static_cast<std::uint64_t>(x.size()));
  record.zeros = static_cast<std::uint64_t>((x.array() == 0.0f).count());
  record.flushed_to_zero = counts.flushed_to_zero;
  record.saturated = counts.overflowed;
  return out;
}

Eigen::MatrixXf fp8_product(const Eigen::MatrixXf& a, bool transpose_a, float dequantize_a, const Eigen::MatrixXf& b, bool transpose_b,
                            float dequantize_b) {
  Eigen::MatrixXf c = gemm(a, transpose_a, b, transpose_b);
  c *= fp8_product_factor(dequantize_a, dequantize_b);
  return c;
}

std::size_t block_operand_index(std::vector<BlockOperandStatistics>& operands, const std::string& name, GemmOperand operand) {
  auto it = std::find_if(operands.begin(), operands.end(), [&](const BlockOperandStatistics& s) { return s.name == name && s.operand == operand; });
  if (it == operands.end()) it = operands.insert(operands.end(), {name, operand, {}});
  return static_cast<std::size_t>(it - operands.begin());
}

BlockStatistics& block_operand_statistics(std::vector<BlockOperandStatistics>& operands, const std::string& name, GemmOperand operand) {
  return operands[block_operand_index(operands, name, operand)].statistics;
}

void add_recipe_records(Snapshot& snapshot, const RecipeConfig& config, const std::vector<OperandScaling>& scaling,
                        const std::vector<BlockOperandStatistics>& block_operands) {
  snapshot.scaling = scaling;
  snapshot.block_operands.clear();
  if (!block_scaled(config.recipe)) return;
  const BlockFormat format = block_format_of(config.recipe);
  for (const BlockOperandStatistics& o : block_operands)
    snapshot.block_operands.push_back({o.name, gemm_operand_name(o.operand), BlockRecord{format, recipe_scale_rule, o.statistics}});
}

OperandScaling& new_operand_scaling(std::vector<OperandScaling>& scaling, const std::string& name) {
  scaling.emplace_back();
  scaling.back().name = name;
  return scaling.back();
}

BlockFormat block_format_of(GemmRecipe recipe) {
  switch (recipe) {
    case GemmRecipe::mxfp8: return block_formats::mxfp8_e4m3;
    case GemmRecipe::mxfp6: return block_formats::mxfp6_e2m3;
    case GemmRecipe::mxfp4: return block_formats::mxfp4;
    case GemmRecipe::nvfp4: return block_formats::nvfp4;
    default: throw std::invalid_argument("block_format_of: " + gemm_recipe_name(recipe) + " is not block-scaled");
  }
}

Eigen::MatrixXf block_scaled_operand(GemmRecipe recipe, const Eigen::MatrixXf& x, bool along_rows, Context& ctx, BlockStatistics* statistics,
                                     bool square_tiles) {
  const BlockFormat format = block_format_of(recipe);
  const BlockLayout layout = recipe_block_layout(format, static_cast<std::size_t>(x.rows()), static_cast<std::size_t>(x.cols()), along_rows);
  const std::span<const float> values(x.data(), static_cast<std::size_t>(x.size()));
  std::vector<std::uint8_t> codes(values.size()), scales(layout.block_count());
  float tensor_scale = 1;
  if (square_tiles)  // the scalar path: on the product's threads (any count gives the same bits)
    block_quantize_square_tiles(format, recipe_scale_rule, layout, values, codes, scales, tensor_scale, ctx, statistics, {}, gemm_threads());
  else block_quantize(format, recipe_scale_rule, layout, values, codes, scales, tensor_scale, ctx, statistics);
  Eigen::MatrixXf out(x.rows(), x.cols());
  block_dequantize(format, layout, codes, scales, tensor_scale, std::span<float>(out.data(), static_cast<std::size_t>(out.size())));
  return out;
}

Eigen::MatrixXf random_hadamard(const Eigen::MatrixXf& x, bool along_first_axis, std::uint16_t signs) {
  constexpr Eigen::Index run = 16;
  Eigen::MatrixXf out = x;
  const Eigen::Index length = along_first_axis ? x.rows() : x.cols(), lines = along_first_axis ? x.cols() : x.rows();
  for (Eigen::Index line = 0; line < lines; ++line)
    for (Eigen::Index first = 0; first + run <= length; first += run) {
      const auto at = [&](Eigen::Index i) -> float& { return along_first_axis ? out(first + i, line) : out(line, first + i); };
      float v[run];
      for (Eigen::Index i = 0; i < run; ++i) v[i] = (signs >> i & 1u) != 0 ? -at(i) : at(i);
      for (Eigen::Index h = 1; h < run; h *= 2)
        for (Eigen::Index i = 0; i < run; i += 2 * h)
          for (Eigen::Index j = i; j < i + h; ++j) {
            const float a = v[j], b = v[j + h];
            v[j] = a + b, v[j + h] = a - b;
          }
      for (Eigen::Index i = 0; i < run; ++i) at(i) = v[i] * 0.25f;
    }
  return out;
}

std::uint16_t hadamard_signs(std::uint64_t seed) {
  // A word far from the rounding draws' (which count up from 0).
  return static_cast<std::uint16_t>(stochastic_random(seed, ~std::uint64_t{0}) >> 48);
}

Eigen::MatrixXf recipe_block_operand(const RecipeConfig& config, GemmOperand operand, const Eigen::MatrixXf& x, bool along_rows, Context& ctx,
                                     BlockStatistics* statistics, bool weight_gradient_product) {
  const RoundingMode rounding = ctx.rounding;
  ctx.rounding = operand_rounding(config, operand, rounding);
  const bool turned = weight_gradient_product && config.hadamard_weight_gradients;
  Eigen::MatrixXf out =
      block_scaled_operand(config.recipe, turned ? random_hadamard(x, along_rows, hadamard_signs(ctx.stochastic_seed)) : x, along_rows, ctx,
                           statistics, operand == GemmOperand::weight && config.square_weight_tiles);
  ctx.rounding = rounding;
  return out;
}

}  // namespace fpscope
