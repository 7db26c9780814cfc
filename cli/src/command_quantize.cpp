// `fpscope quantize IN.npy --format mxfp8-e4m3 ...` and `fpscope dequantize CODES.npy ...`: block
// scaling of a tensor on the command line, with what it flushed, made subnormal and saturated.
#include <fmt/core.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "block_option.hpp"
#include "commands.hpp"
#include "fpscope/analyzer/run_log.hpp"
#include "npy_option.hpp"
#include "fpscope/analyzer/block_analysis.hpp"
#include "fpscope/analyzer/npy.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"
#include "fpscope/snapshot/output_file.hpp"
#include "number_option.hpp"

namespace fpscope::cli {

namespace {

struct QuantizeOptions {
  std::string input;
  BlockOptionText block;
  std::string round = "rne";
  std::string seed = "0";
  std::string as;  // --as: the elements as codes of this format
  std::optional<std::string> out, codes, scales;
  std::optional<std::string> tensor_amax;  // NVFP4: the amax its tensor scale is made from, instead of the values' own
  bool tiles = false;                      // each block scaled by its square tile's amax (2-D block scaling)
  bool json = false;
};

std::span<const unsigned char> as_bytes(std::span<const float> values) {
  return {reinterpret_cast<const unsigned char*>(values.data()), values.size() * sizeof(float)};
}

std::string exact_float_text(float v) { return fmt::format("{} ({:a})", v, v); }

void run_quantize(const QuantizeOptions& options) {
  const BlockChoice choice = parse_block_choice(options.block);
  const bool nvfp4 = choice.format.scale == BlockFormat::Scale::e4m3_nvfp4;
  const std::optional<GivenTensorAmax> given = parse_tensor_amax(choice, options.tensor_amax);
  Context ctx;
  ctx.rounding = parse_rounding_mode(options.round);
  ctx.stochastic_seed = parse_integer_option<std::uint64_t>("--seed", options.seed, 0, std::numeric_limits<std::uint64_t>::max());

  // Every output is checked before anything is read or written.
  const std::filesystem::path input(options.input);
  std::vector<OutputTarget> outputs;
  if (options.out) outputs.push_back(resolve_output(*options.out, "--out"));
  if (options.codes) outputs.push_back(resolve_output(*options.codes, "--codes"));
  if (options.scales) outputs.push_back(resolve_output(*options.scales, "--scales"));
  check_outputs(outputs, {{input}});
  for (const OutputTarget& target : outputs) check_replaces_only(target, FileKind::npy);
  bool summary_on_stdout = true;
  for (const OutputTarget& target : outputs) summary_on_stdout = summary_on_stdout && target.kind != OutputTarget::Kind::descriptor;

  if (options.tiles && given) throw UsageError("--tiles makes NVFP4's tensor scale from the values' own amax: drop --tensor-amax");

  const NpyTensor tensor = npy_read_float32(input, parse_npy_elements(options.as));
  const BlockLayout layout = block_layout_for(choice, tensor.info.shape, options.input);
  if (options.tiles && tensor.info.shape.size() != 2)
    throw UsageError(printable_text(options.input, 200) + " has shape " + shape_text(tensor.info.shape) + ": square tiles (--tiles) need a 2-D tensor", 1);
  std::vector<std::uint8_t> codes(tensor.values.size()), scale_codes(layout.block_count());
  float tensor_scale = 1;
  BlockStatistics statistics;
  Context run = ctx;
  if (options.tiles) {
    block_quantize_square_tiles(choice.format, choice.rule, layout, tensor.values, codes, scale_codes, tensor_scale, run, &statistics, {}, 0);
  } else if (given) {
    tensor_scale = given->tensor_scale;
    block_quantize_under_tensor_scale(choice.format, choice.rule, layout, tensor.values, codes, scale_codes, tensor_scale, run, &statistics, {}, 0);
  } else {
    block_quantize(choice.format, choice.rule, layout, tensor.values, codes, scale_codes, tensor_scale, run, &statistics, {}, 0);  // every core
  }
  // NVFP4: the values' own amax (the finite values', as the tensor scale takes it) and how many
  // values it leaves out.
  const float own_amax = nvfp4 ? nvfp4_tensor_amax(tensor.values, 0) : 0.0f;
  const auto non_finite = nvfp4 ? std::ranges::count_if(tensor.values, [](float v) { return !std::isfinite(v); }) : 0;
  std::vector<float> dequantized(tensor.values.size());
  block_dequantize(choice.format, layout, codes, scale_codes, tensor_scale, dequantized);
  const QuantizationError error = quantization_error(choice.format, layout, tensor.values, codes, scale_codes, tensor_scale);

  const std::vector<std::uint64_t> scale_shape = block_scale_shape(choice, tensor.info.shape);
  // The values, codes and scales are one result: all written, or (a full disk) none replaced.
  std::vector<std::string> files;
  if (options.out) files.push_back(npy_bytes("<f4", tensor.info.shape, as_bytes(dequantized)));
  if (options.codes) files.push_back(npy_bytes("|u1", tensor.info.shape, codes));
  if (options.scales) files.push_back(npy_bytes("|u1", scale_shape, scale_codes));
  const std::vector<std::string_view> contents(files.begin(), files.end());
  write_outputs(std::span<const OutputTarget>(outputs.data(), files.size()), contents);
  if (!summary_on_stdout) return;

  const auto share = [&](std::uint64_t part) {
    return statistics.elements == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(statistics.elements);
  };
  if (options.json) {
    nlohmann::json out = block_statistics_json(statistics);
    out.update(nlohmann::json{{"input", options.input},
                              {"format", block_format_name(choice.format)},
                              {"block", choice.format.block_size},
                              {"axis", layout.axis == BlockAxis::rows ? "rows" : "cols"},
                              {"square_tiles", options.tiles},
                              {"scale_rule", choice.format.scale == BlockFormat::Scale::e8m0 ? scale_rule_name(choice.rule) : "e4m3-rne"},
                              {"rounding", rounding_mode_name(ctx.rounding)},
                              {"max_abs_error", error.max_abs},
                              {"rms_error", error.rms},
                              {"relative_rms_error", error.relative_rms() ? nlohmann::json(*error.relative_rms()) : nlohmann::json(nullptr)},
                              {"beyond_float32", error.beyond_float32},
                              {"tensor_scale", tensor_scale},
                              {"tensor_scale_from", !nvfp4 ? "none" : given ? "given amax" : "the values' amax"},
                              {"flags", describe_flags(run.flags)}});
    if (nvfp4) {
      out["tensor_amax"] = own_amax;  // the finite values'
      out["non_finite_values"] = non_finite;
    }
    if (given) out["tensor_amax_given"] = given->amax;
    fmt::print("{}\n", out.dump(2));
    return;
  }
  const int block = choice.format.block_size;
  fmt::print("{}: {} element{} in {} block{} of {} along {}{}, {} scales{}, elements rounded {}\n", printable_text(options.input, 200),
             statistics.elements, statistics.elements == 1 ? "" : "s", statistics.blocks, statistics.blocks == 1 ? "" : "s", block, layout.axis == BlockAxis::rows ? "rows" : "columns",
             options.tiles ? fmt::format(", each scaled by its {}x{} tile's amax", block, block) : std::string(),
             block_format_name(choice.format),
             choice.format.scale == BlockFormat::Scale::e8m0 ? " by the " + scale_rule_name(choice.rule) + " rule" : " (E4M3, nearest even)",
             rounding_mode_name(ctx.rounding));
  // A NaN or an infinity leaves the tensor scale to the finite values (block_format.hpp's
  // nvfp4_amax_contribution): said, as its block's NaN scale is counted.
  const std::string left_out =
      non_finite == 0 ? std::string()
                      : fmt::format(" ({} NaN or infinite value{} left out: {} block scale{} NaN)", non_finite, non_finite == 1 ? "" : "s",
                                    non_finite == 1 ? "its" : "their", non_finite == 1 ? " is" : "s are");
  if (nvfp4 && !given) fmt::print("tensor scale {}, from the values' amax {}{}\n", exact_float_text(tensor_scale), own_amax, left_out);
  if (given)
    fmt::print("tensor scale {}, from the given amax {}; the values' own amax: {}{}\n", exact_float_text(tensor_scale), given->amax,
               own_amax == given->amax ? fmt::format("{} (the same)", own_amax)
               : own_amax == 0         ? std::string("0")
                                       : fmt::format("{} ({:.3g}x the given)", own_amax, own_amax / given->amax),
               left_out);
  fmt::print("flushed to zero {} ({:.4f}%), made subnormal {} ({:.4f}%), saturated {} ({:.4f}%), NaN blocks {}, zeros {}\n",
             statistics.flushed_to_zero, share(statistics.flushed_to_zero), statistics.made_subnormal, share(statistics.made_subnormal),
             statistics.saturated, share(statistics.saturated), statistics.nan_blocks, statistics.zeros);
  if (error.compared == 0) fmt::print("error: none measured (no finite values)\n");
  else if (!error.relative_rms())
    fmt::print("error: max {:.6g}, RMS {:.6g} over {} finite value{} (all zero)\n", error.max_abs, error.rms, error.compared,
               error.compared == 1 ? "" : "s");
  else
    fmt::print("error: max {:.6g}, RMS {:.6g} ({:.4g} of the values' RMS) over {} finite value{}\n", error.max_abs, error.rms,
               *error.relative_rms(), error.compared, error.compared == 1 ? "" : "s");
  if (error.beyond_float32 > 0)
    fmt::print("beyond float32's largest: {} quantized value{} (infinities when dequantized to float32, as --out writes them{})\n",
               error.beyond_float32, error.beyond_float32 == 1 ? "" : "s",
               choice.format.scale == BlockFormat::Scale::e8m0 && choice.rule != ScaleRule::floor ? "; the floor rule saturates such values instead" : "");
}

struct DequantizeOptions {
  std::string codes;
  std::string scales;
  BlockOptionText block;
  std::optional<std::string> tensor_scale;  // NVFP4's, as quantize printed it
  std::string out;
};

std::vector<std::uint8_t> read_uint8_npy(const std::filesystem::path& path, std::vector<std::uint64_t>& shape) {
  const NpyBytes bytes = npy_read_uint8(path);
  shape = bytes.info.shape;
  return bytes.values;
}

// NVFP4's tensor scale for dequantize: required there (codes read under a forgotten one would be
// off by the whole tensor scale, 2688 / amax), refused for MX formats, which have none.
float dequantize_tensor_scale(const BlockChoice& choice, const std::optional<std::string>& text) {
  const std::string name = block_format_name(choice.format);
  if (choice.format.scale != BlockFormat::Scale::e4m3_nvfp4) {
    if (text) throw UsageError("--tensor-scale is NVFP4's; " + name + " has none (MX scales are per block)");
    return 1.0f;
  }
  if (!text) throw UsageError("nvfp4 codes need the tensor scale quantize printed for them: --tensor-scale S (1 for codes made under none)");
  return parse_positive_float32_option("--tensor-scale", *text, "as quantize printed it");
}

// Every element code a byte the format has: a wider one means codes made for another format.
void check_element_codes(const BlockChoice& choice, std::span<const std::uint8_t> codes, const std::string& path) {
  const std::uint32_t count = block_element_code_count(choice.format);
  const auto wide = std::find_if(codes.begin(), codes.end(), [count](std::uint8_t code) { return code >= count; });
  if (wide == codes.end()) return;
  throw UsageError(fmt::format("{}: element {} is 0x{:02X}, not a {}-bit {} element code (codes made for another format?)", printable_text(path, 200),
                               wide - codes.begin(), *wide, std::bit_width(count - 1), block_format_name(choice.format)),
                   1);
}

void run_dequantize(const DequantizeOptions& options) {
  const BlockChoice choice = parse_block_choice(options.block);
  const float tensor_scale = dequantize_tensor_scale(choice, options.tensor_scale);
  const std::filesystem::path codes_path(options.codes), scales_path(options.scales);
  const OutputTarget out = resolve_output(options.out, "--out");
  check_outputs({&out, 1}, {{codes_path, scales_path}});
  check_replaces_only(out, FileKind::npy);
  std::vector<std::uint64_t> shape, scale_shape;
  const std::vector<std::uint8_t> codes = read_uint8_npy(codes_path, shape);
  const std::vector<std::uint8_t> scale_codes = read_uint8_npy(scales_path, scale_shape);
  const BlockLayout layout = block_layout_for(choice, shape, options.codes);
  if (scale_shape != block_scale_shape(choice, shape))
    throw UsageError(printable_text(options.scales, 200) + " has shape " + shape_text(scale_shape) + ", but codes of shape " + shape_text(shape) +
                         " in " + block_format_name(choice.format) + " blocks of " + std::to_string(choice.format.block_size) + " need scales of shape " +
                         shape_text(block_scale_shape(choice, shape)),
                     1);
  check_element_codes(choice, codes, options.codes);
  std::vector<float> values(codes.size());
  block_dequantize(choice.format, layout, codes, scale_codes, tensor_scale, values);
  write_output(out, npy_bytes("<f4", shape, as_bytes(values)));
}

}  // namespace

void add_quantize(CLI::App& app) {
  auto options = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand("quantize", "Quantize a .npy tensor into a block-scaled format (MX, NVFP4) and say what it lost");
  cmd->add_option("IN", options->input, "a .npy tensor (float32, float16 or bfloat16)")->required();
  cmd->add_option("--as", options->as, "read the .npy elements as the codes of this format (bf16, float8_e4m3fn, float4_e2m1fn, ...), as analyze --as does");
  add_block_options(cmd, options->block);
  cmd->add_option("-r,--round", options->round, "how elements round: rne rna rz ru rd odd stochastic")->capture_default_str();
  cmd->add_option("--seed", options->seed, "seed for stochastic rounding")->capture_default_str();
  cmd->add_option("--out", options->out, "write the dequantized values (float32 .npy, the input's shape)");
  cmd->add_option("--codes", options->codes, "write the element codes (uint8 .npy, one per element, the input's shape)");
  cmd->add_option("--scales", options->scales, "write the block scale codes (uint8 .npy: E8M0, or E4M3 for nvfp4)");
  cmd->add_option("--tensor-amax", options->tensor_amax,
                  "nvfp4: make the tensor scale from this amax (a calibrated one, or an earlier step's) instead of the values' own: 2688 / amax");
  cmd->add_flag("--tiles", options->tiles,
                "2-D block scaling (a 2-D tensor): each block scaled by the amax of its square tile of BxB elements, as NVIDIA's NVFP4 recipe "
                "quantizes weights, so that rows and cols give the same codes");
  cmd->add_flag("--json", options->json, "print the summary as JSON");
  cmd->callback([options] { run_quantize(*options); });

  auto back = std::make_shared<DequantizeOptions>();
  CLI::App* de = app.add_subcommand("dequantize", "Turn element and scale codes (from quantize) back into float32 values");
  de->add_option("CODES", back->codes, "element codes (uint8 .npy)")->required();
  de->add_option("--scales", back->scales, "block scale codes (uint8 .npy)")->required();
  add_block_options(de, back->block, false);
  de->add_option("--tensor-scale", back->tensor_scale, "nvfp4 (required there): the float32 tensor scale quantize printed");
  de->add_option("--out", back->out, "the float32 values (.npy)")->required();
  de->callback([back] { run_dequantize(*back); });
}

}  // namespace fpscope::cli
