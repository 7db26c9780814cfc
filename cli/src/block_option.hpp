// The options that name a block-scaled layout (--format, --block, --axis, --scale-rule), read in one place.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fpscope/core/block_scaling.hpp"

namespace fpscope::cli {

struct BlockOptionText {
  std::string format;
  std::string block;  // empty: the format's own
  std::string axis = "rows";
  std::string rule = "floor";
};

struct BlockChoice {
  BlockFormat format;  // with the block size asked for
  BlockAxis axis = BlockAxis::rows;
  ScaleRule rule = ScaleRule::floor;
  bool rule_given = false;
};

// Registers -f/--format, --block, --axis and (with_rule) --scale-rule on cmd.
void add_block_options(CLI::App* cmd, BlockOptionText& text, bool with_rule = true);
// Reads them; a UsageError names the option and what it expects.
BlockChoice parse_block_choice(const BlockOptionText& text);
// --tensor-amax (NVFP4): the amax given and the tensor scale it makes (nvfp4_tensor_scale: 2688 /
// amax); nullopt where not given. A UsageError for any other block format, or a value that is not
// a finite positive float32.
struct GivenTensorAmax {
  float amax = 0;
  float tensor_scale = 1;
};
std::optional<GivenTensorAmax> parse_tensor_amax(const BlockChoice& choice, const std::optional<std::string>& text);
// A tensor of `shape` as rows x cols: the last axis is the columns, every other axis a row
// (a scalar is 1 x 1). Blocks down columns need exactly two axes; `input` names the file in the error.
BlockLayout block_layout_for(const BlockChoice& choice, const std::vector<std::uint64_t>& shape, const std::string& input);
// The shape of the scale array: the tensor's with its blocked axis divided by the block size, rounded up.
std::vector<std::uint64_t> block_scale_shape(const BlockChoice& choice, const std::vector<std::uint64_t>& shape);
// "(3, 4)" as NumPy prints a shape.
std::string shape_text(const std::vector<std::uint64_t>& shape);

}  // namespace fpscope::cli
