// The GPT's shape, named apart from the model (gpt.hpp) so that the training config
// (training_config.hpp's TrainingConfig) can hold one.
#pragma once

#include <string>
#include <string_view>

namespace fpscope {

// The decoder's shape. `context` is the sequence length a step trains on; `vocab` the number of
// token ids (256: bytes).
struct GptShape {
  int layers = 2;
  int width = 64;
  int heads = 4;
  int context = 32;
  int vocab = 256;
  friend bool operator==(const GptShape&, const GptShape&) = default;
};

inline constexpr int max_gpt_width = 1 << 14;
inline constexpr int max_gpt_layers = 256;
inline constexpr int max_gpt_context = 1 << 14;
inline constexpr int max_gpt_vocab = 1 << 20;

// Whether a --model text names a GPT ("gpt" or "gpt:..."), not an MLP's layer sizes.
bool names_gpt(std::string_view model);
// "gpt" (the defaults above) or "gpt:layers=4,width=256,heads=4,context=128" with any of the keys
// layers, width, heads, context, vocab, each at most once; width a multiple of heads. Throws
// std::invalid_argument with one sentence naming the text.
GptShape parse_gpt_shape(std::string_view text);
// The inverse, every key: "gpt:layers=4,width=256,heads=4,context=128,vocab=256".
std::string gpt_shape_name(const GptShape& shape);

}  // namespace fpscope
