// The next step's cast of the parameters, made by the update that writes them while they are in
// cache (MlpTrainer::next_weight_cast_made, GptTrainer::next_cast_made): the rule for when it may,
// and the cast of one range -- the same rounding of the same values the step would make.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "fpscope/core/bulk.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/gpu/gemm.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "fpscope/gpu/training_config.hpp"

namespace fpscope {

// Whether an update may make the next step's cast: mixed precision (fp16-pure casts its master
// weights after the update instead) without a recipe (whose products make their own operands),
// in a rounding mode that draws no random words (stochastic rounding's are drawn by position in
// the step's order), after a step that did not record (a recorded step casts its weights itself
// to record them: making a cast every recorded step would only throw it away).
inline bool update_makes_next_cast(const TrainingConfig& config, RoundingMode rounding, bool recorded) {
  return config.precision != Precision::fp32 && config.precision != Precision::fp16_pure && !recorded &&
         rounding != RoundingMode::stochastic && config.recipe.recipe == GemmRecipe::none;
}

// Whether that cast makes bf16 bits for the products (else rounded values): where the products
// go to the bf16 kernels, whose operands are bf16 bits, and the values are read by nothing else.
inline bool next_cast_as_bits(Format f) { return f == formats::bf16 && gemm_has_bf16_products(); }

// The cast of values [begin, begin + values.size()) of a parameter the update just wrote: into
// `operand`'s bits where it is given (started with ProductOperand::start_bits), else rounded into
// `copy` (the parameter's low-precision copy, at the same offsets). Returns the flags it raised.
inline std::uint8_t make_next_cast(Format f, std::span<const float> values, std::size_t begin, ProductOperand* operand, float* copy,
                                   const Context& ctx) {
  Context context = ctx;
  context.flags = 0;
  if (operand != nullptr) {
    f32_to_bits(f, values, operand->piece_bits(begin, values.size()), context);
    operand->scan_bits(begin, values.size());
  } else {
    round_f32(f, values, std::span<float>(copy + begin, values.size()), context);
  }
  return context.flags;
}

}  // namespace fpscope
