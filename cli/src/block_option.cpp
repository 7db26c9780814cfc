// The block layout options and how a tensor's shape becomes rows, columns and scales.
#include "block_option.hpp"

#include "commands.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"
#include "number_option.hpp"

namespace fpscope::cli {

void add_block_options(CLI::App* cmd, BlockOptionText& text, bool with_rule) {
  cmd->add_option("-f,--format", text.format, "block-scaled format: mxfp8-e4m3 mxfp8-e5m2 mxfp6-e2m3 mxfp6-e3m2 mxfp4 mxint8 nvfp4")->required();
  cmd->add_option("--block", text.block, "elements per block (default: the format's, 32 for MX and 16 for nvfp4)");
  cmd->add_option("--axis", text.axis, "rows (blocks along the last axis) or cols (down the columns of a 2-D tensor)")->capture_default_str();
  if (with_rule)
    cmd->add_option("--scale-rule", text.rule, "how MX scales are chosen: floor (the OCP spec's), round-up, rceil, even")->capture_default_str();
}

std::optional<GivenTensorAmax> parse_tensor_amax(const BlockChoice& choice, const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  if (choice.format.scale != BlockFormat::Scale::e4m3_nvfp4)
    throw UsageError("--tensor-amax sets NVFP4's tensor scale; " + block_format_name(choice.format) + " has none (MX scales are per block)");
  GivenTensorAmax given;
  given.amax = parse_positive_float32_option("--tensor-amax", *text, "a calibrated or earlier step's largest magnitude");
  given.tensor_scale = nvfp4_tensor_scale(float_bits(given.amax));
  return given;
}

BlockChoice parse_block_choice(const BlockOptionText& text) {
  BlockChoice choice;
  choice.format = parse_block_format(text.format);
  if (!text.block.empty()) choice.format.block_size = parse_integer_option<int>("--block", text.block, 1, 256);
  if (text.axis == "rows") choice.axis = BlockAxis::rows;
  else if (text.axis == "cols" || text.axis == "columns") choice.axis = BlockAxis::cols;
  else throw UsageError("--axis '" + printable_text(text.axis) + "': expected rows or cols");
  choice.rule = parse_scale_rule(text.rule);
  choice.rule_given = text.rule != "floor";
  if (choice.rule_given && choice.format.scale != BlockFormat::Scale::e8m0)
    throw UsageError("--scale-rule chooses MX (E8M0) scales; " + block_format_name(choice.format) +
                     "'s E4M3 block scale has one rule (nearest even, under its float32 tensor scale)");
  return choice;
}

BlockLayout block_layout_for(const BlockChoice& choice, const std::vector<std::uint64_t>& shape, const std::string& input) {
  BlockLayout layout;
  layout.axis = choice.axis;
  layout.block_size = choice.format.block_size;
  if (choice.axis == BlockAxis::cols && shape.size() != 2)
    throw UsageError(printable_text(input, 200) + " has shape " + shape_text(shape) + ": blocks down columns (--axis cols) need a 2-D tensor", 1);
  std::uint64_t rows = 1;
  for (std::size_t d = 0; d + 1 < shape.size(); ++d) rows *= shape[d];
  layout.rows = static_cast<std::size_t>(rows);
  layout.cols = shape.empty() ? 1 : static_cast<std::size_t>(shape.back());
  return layout;
}

std::vector<std::uint64_t> block_scale_shape(const BlockChoice& choice, const std::vector<std::uint64_t>& shape) {
  const std::uint64_t block = static_cast<std::uint64_t>(choice.format.block_size);
  std::vector<std::uint64_t> scales = shape.empty() ? std::vector<std::uint64_t>{1} : shape;
  std::uint64_t& blocked = choice.axis == BlockAxis::rows ? scales.back() : scales.front();
  blocked = (blocked + block - 1) / block;
  return scales;
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string text = "(";
  for (std::size_t d = 0; d < shape.size(); ++d) text += std::to_string(shape[d]) + (shape.size() == 1 ? "," : d + 1 < shape.size() ? ", " : "");
  return text + ")";
}

}  // namespace fpscope::cli
