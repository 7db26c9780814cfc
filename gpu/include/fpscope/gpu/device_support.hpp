// What the device backends (device_mlp.hpp, device_gpt.hpp) cannot train yet, in one place: their
// recipes refuse it with this sentence, and `--backend auto` keeps such a run on the CPU.
#pragma once

#include <string>

#include "fpscope/gpu/gemm_recipe.hpp"

namespace fpscope {

// Empty where the device backends train `recipe`; else what they lack, as a clause.
inline std::string device_backend_lacks(const RecipeConfig& recipe) {
  if (recipe.square_weight_tiles) return "the CUDA backend does not quantize weights in square tiles (--weight-blocks 2d) yet";
  if (recipe.hadamard_weight_gradients) return "the CUDA backend has no random Hadamard transform (--hadamard) yet";
  return {};
}

}  // namespace fpscope
