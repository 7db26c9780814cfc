// `fpscope analyze RUN_OR_NPY...`: per tensor, what a format and a loss scale would flush, make
// subnormal or overflow, and the loss scale to use -- under the one scale semantics
// (scale_semantics.hpp): recorded scales divided out, a hypothetical scale moving only gradients.
#include <fmt/core.h>
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "block_option.hpp"
#include "commands.hpp"
#include "npy_option.hpp"
#include "fpscope/analyzer/block_analysis.hpp"
#include "fpscope/analyzer/csv.hpp"
#include "fpscope/analyzer/npy.hpp"
#include "fpscope/analyzer/run_log.hpp"
#include "fpscope/analyzer/scale_semantics.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "fpscope/analyzer/culprit_diagnosis.hpp"
#include "fpscope/core/printable_text.hpp"
#include "name_column.hpp"
#include "number_option.hpp"
#include "scale_option.hpp"
#include "target_format_option.hpp"

namespace fpscope::cli {

namespace {

struct AnalyzeOptions {
  std::vector<std::string> inputs;
  std::string format;  // "": the run logs' own, else fp16 (target_format)
  std::string scale = "recorded";
  std::string as = "";
  std::string margin = "1";
  std::vector<std::string> kinds;    // only these kinds
  std::vector<std::string> tensors;  // only names matching one of these globs
  bool json = false;
  // Block-scaled formats (.npy inputs only).
  std::string block, axis = "rows", scale_rule = "floor", round = "rne";
  bool compare_scale_rules = false;
  std::optional<std::string> tensor_amax;  // nvfp4: the amax every tensor's scale is made from
  bool tiles = false;                      // block formats (.npy): each block scaled by its square tile's amax
};

struct SourcedSeries {
  std::string source;  // the file
  TensorSeries series;
};

// A per-tensor FP8 recipe's GEMM operand over every step a run log holds (StepRecord::scaling):
// exact sums of its casts' counts, and the range of its amax and of its scale.
struct Fp8OperandSummary {
  std::string source, name, operand, format;
  std::uint64_t steps = 0, elements = 0, zeros = 0, flushed_to_zero = 0, saturated = 0;
  double amax_low = 0, amax_high = 0, scale_low = 0, scale_high = 0, last_scale = 0;
};

// What the run logs among the inputs say beside their histograms.
struct RunLogFacts {
  std::vector<RunHeader> headers;
  std::vector<std::string> block_formats;  // block statistics recorded: "mxfp8-e4m3", each once
  std::vector<Fp8OperandSummary> fp8_operands;  // in the order the logs first name them
  // The steps that skipped their update, lost their loss or did not finish, with their culprits
  // where recorded.
  std::vector<std::pair<std::string, StepRecord>> bad_steps;
};

// The FP8 operands of one run log's steps, added to `into`.
void add_fp8_operands(const std::string& source, const std::vector<StepRecord>& steps, std::vector<Fp8OperandSummary>& into) {
  for (const StepRecord& step : steps)
    for (const OperandScaling& o : step.scaling) {
      auto it = std::find_if(into.begin(), into.end(), [&](const Fp8OperandSummary& f) {
        return f.source == source && f.name == o.name && f.operand == o.operand && f.format == o.format;
      });
      if (it == into.end()) {
        into.push_back({source, o.name, o.operand, o.format});
        it = std::prev(into.end());
        it->amax_low = it->amax_high = o.amax, it->scale_low = it->scale_high = o.scale;
      }
      ++it->steps;
      it->elements += o.elements, it->zeros += o.zeros, it->flushed_to_zero += o.flushed_to_zero, it->saturated += o.saturated;
      it->amax_low = std::min(it->amax_low, o.amax), it->amax_high = std::max(it->amax_high, o.amax);
      it->scale_low = std::min(it->scale_low, o.scale), it->scale_high = std::max(it->scale_high, o.scale);
      it->last_scale = o.scale;
    }
}

// A run log's (or an exported CSV's) tensors over every recorded step; a .npy file or a folder of
// them (kind `other`: what the user asks a scale about). A run log's header and the block formats
// it recorded go to `facts`.
std::vector<SourcedSeries> load(const std::string& input, NpyElements elements, std::vector<std::string>& warnings, RunLogFacts& facts) {
  const std::filesystem::path path(input);
  std::vector<SourcedSeries> out;
  if (std::filesystem::is_directory(path)) {
    for (TensorRecord& t : npy_folder_snapshot(path, elements, warnings).tensors)
      out.push_back({input, single_series(t.name, t.kind, t.histogram)});
    return out;
  }
  if (path.extension() == ".npy") {
    out.push_back({input, single_series(path.stem().string(), TensorKind::other, npy_histogram(path, elements))});
    return out;
  }
  std::vector<Snapshot> snapshots;
  if (path.extension() == ".csv") {
    snapshots = read_histograms_csv(path);
  } else {
    RunLog log = read_run_log(path);
    facts.headers.push_back(log.header);
    for (const Snapshot& snapshot : log.snapshots)
      for (const TensorRecord& t : snapshot.tensors)
        if (t.blocks) {
          const std::string name = block_format_name(t.blocks->format);
          if (std::find(facts.block_formats.begin(), facts.block_formats.end(), name) == facts.block_formats.end()) facts.block_formats.push_back(name);
        }
    add_fp8_operands(input, log.steps, facts.fp8_operands);
    for (StepRecord& step : log.steps)
      if (step.skipped || !std::isfinite(step.loss) || !step.finished) facts.bad_steps.emplace_back(input, std::move(step));
    warnings.insert(warnings.end(), log.warnings.begin(), log.warnings.end());
    snapshots = std::move(log.snapshots);
  }
  try {
    for (TensorSeries& s : tensor_series(snapshots)) out.push_back({input, std::move(s)});
  } catch (const std::overflow_error& e) {
    throw std::runtime_error(printable_text(input, 200) + ": " + e.what());
  }
  return out;
}

bool selected(const TensorSeries& s, const std::vector<TensorKind>& kinds, const std::vector<std::string>& globs) {
  if (!kinds.empty() && std::find(kinds.begin(), kinds.end(), s.kind) == kinds.end()) return false;
  if (globs.empty()) return true;
  for (const std::string& glob : globs)
    if (::fnmatch(glob.c_str(), s.name.c_str(), 0) == 0) return true;
  return false;
}

double percent(std::uint64_t part, std::uint64_t whole) { return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole); }

// "2^16", "2^10..2^16" across steps, "1".
std::string recorded_scales(const TensorSeries& s) {
  int low = 0, high = 0;
  for (std::size_t i = 0; i < s.parts.size(); ++i) {
    low = i == 0 ? s.parts[i].first : std::min(low, s.parts[i].first);
    high = i == 0 ? s.parts[i].first : std::max(high, s.parts[i].first);
  }
  const auto power = [](int k) { return k == 0 ? std::string("1") : fmt::format("2^{}", k); };
  return (low == high ? power(low) : power(low) + ".." + power(high)) + (s.scale_inexact ? "~" : "");
}

std::string advice_text(const LossScaleAdvice& advice) {
  switch (advice.kind) {
    case LossScaleAdvice::Kind::scale: return fmt::format("2^{}", advice.scale_log2);
    case LossScaleAdvice::Kind::no_scaling_needed: return "none needed";
    case LossScaleAdvice::Kind::no_gradients: return "-";
  }
  return "-";
}

// The .npy tensors among the inputs (a folder's in file-name order), named by file stem.
std::vector<std::filesystem::path> npy_inputs(const std::vector<std::string>& inputs, std::vector<std::string>& warnings) {
  std::vector<std::filesystem::path> files;
  for (const std::string& input : inputs) {
    const std::filesystem::path path(input);
    if (std::filesystem::is_directory(path)) {
      const std::vector<std::filesystem::path> folder = npy_folder_files(path, warnings);
      files.insert(files.end(), folder.begin(), folder.end());
    } else if (path.extension() == ".npy") {
      files.push_back(path);
    } else {
      throw UsageError(printable_text(input, 200) + ": not a .npy file or a folder of them", 1);
    }
  }
  return files;
}

// "2^-6..2^11", "2^3", or "-" where no block has a positive scale.
std::string scale_range_text(const std::optional<ScaleExponentRange>& range) {
  if (!range) return "-";
  return range->low == range->high ? fmt::format("2^{}", range->low) : fmt::format("2^{}..2^{}", range->low, range->high);
}

// Block statistics a run recorded (fpscope train --record-blocks: per tensor; --recipe with a
// block-scaled format: per GEMM operand, as its products saw it), summed over the recorded steps,
// for the format asked about.
void run_recorded_block_analysis(const AnalyzeOptions& options, const BlockChoice& choice) {
  if (options.compare_scale_rules)
    throw UsageError("--compare-scale-rules needs the values themselves (.npy tensors); a run log holds one rule's statistics");
  if (options.tiles) throw UsageError("--tiles needs the values themselves (.npy tensors); a run log's statistics were counted as the run blocked them");
  if (options.tensor_amax)
    throw UsageError("--tensor-amax needs the values themselves (.npy tensors); a run log's statistics were counted under each tensor's own scale");
  struct Summed {
    std::string name;
    ScaleRule rule;
    BlockStatistics statistics;
    std::uint64_t steps = 0;
  };
  std::vector<Summed> tensors, operands;
  std::vector<std::string> warnings;
  bool any_blocks = false;
  bool weight_tiles = false;  // a run's weights in square tiles (--weight-blocks 2d): one copy for both products
  const auto wanted = [&](const std::string& name) {
    return options.tensors.empty() ||
           std::any_of(options.tensors.begin(), options.tensors.end(), [&](const std::string& glob) { return ::fnmatch(glob.c_str(), name.c_str(), 0) == 0; });
  };
  const auto add = [&](std::vector<Summed>& list, const std::string& input, const std::string& name, const BlockRecord& blocks) {
    auto it = std::find_if(list.begin(), list.end(), [&](const Summed& s) { return s.name == name; });
    if (it == list.end()) it = list.insert(list.end(), Summed{name, blocks.rule, {}, 0});
    if (it->rule != blocks.rule) throw UsageError(printable_text(input, 200) + ": " + printable_text(name) + " is recorded with two scale rules", 1);
    it->statistics.merge(blocks.statistics);
    ++it->steps;
  };
  for (const std::string& input : options.inputs) {
    if (std::filesystem::path(input).extension() == ".csv")
      throw UsageError(printable_text(input, 200) + ": a CSV of exponent histograms holds no block statistics (a run log or .npy tensors do)", 1);
    RunLog log = read_run_log(std::filesystem::path(input));
    warnings.insert(warnings.end(), log.warnings.begin(), log.warnings.end());
    weight_tiles = weight_tiles || recipe_has_weight_tiles(log.header.recipe);
    for (const Snapshot& snapshot : log.snapshots) {
      for (const TensorRecord& t : snapshot.tensors) {
        if (!t.blocks) continue;
        any_blocks = true;
        if (t.blocks->format == choice.format && wanted(t.name)) add(tensors, input, t.name + " " + std::string(tensor_kind_name(t.kind)), *t.blocks);
      }
      for (const OperandBlocks& o : snapshot.block_operands) {
        any_blocks = true;
        if (o.blocks.format == choice.format && wanted(o.name)) add(operands, input, o.name + " " + o.operand, o.blocks);
      }
    }
  }
  for (const std::string& w : warnings) fmt::print(stderr, "fpscope: warning: {}\n", printable_text(w, 600));
  if (!any_blocks)
    throw UsageError("the run logs hold no block statistics: record them with fpscope train --record-blocks " + block_format_name(choice.format) +
                         ", or analyze .npy tensors",
                     1);
  if (tensors.empty() && operands.empty())
    throw UsageError("the run logs hold no block statistics of " + block_format_name(choice.format) + " in blocks of " +
                         std::to_string(choice.format.block_size) + (options.tensors.empty() ? "" : " for --tensor"),
                     1);
  const ScaleRule recorded_rule = (tensors.empty() ? operands : tensors).front().rule;
  if (options.scale_rule != "floor" && parse_scale_rule(options.scale_rule) != recorded_rule)
    throw UsageError("the run recorded the " + scale_rule_name(recorded_rule) + " rule; --scale-rule " + printable_text(options.scale_rule) +
                     " needs the values themselves (.npy tensors)");
  const auto share = [](std::uint64_t part, std::uint64_t whole) { return percent(part, whole); };
  if (options.json) {
    nlohmann::json out{{"format", block_format_name(choice.format)},
                       {"block", choice.format.block_size},
                       {"tensors", nlohmann::json::array()},
                       {"recipe_operands", nlohmann::json::array()}};
    for (const auto& [key, list] : {std::pair{"tensors", &tensors}, std::pair{"recipe_operands", &operands}})
      for (const Summed& t : *list) {
        nlohmann::json row = block_statistics_json(t.statistics);
        row["tensor"] = t.name;
        row["scale_rule"] = scale_rule_name(t.rule);
        row["recorded_steps"] = t.steps;
        out[key].push_back(std::move(row));
      }
    fmt::print("{}\n", out.dump(2));
    return;
  }
  const std::string rule_text = choice.format.scale == BlockFormat::Scale::e8m0 ? scale_rule_name(recorded_rule) + " rule" : "E4M3 scale";
  const auto rows = [&](const std::vector<Summed>& list, const char* first_column) {
    std::vector<std::string> names;
    for (const Summed& t : list) names.push_back(t.name);
    const std::size_t width = name_column_width(names, 36);
    std::string text = fmt::format("{:<{}} {:>6} {:>12} {:>9} {:>10} {:>12} {:>11} {:>14}\n", first_column, width, "steps", "values", "NaN blk",
                                   "% flushed", "% subnormal", "% saturated", "scales");
    for (const Summed& t : list) {
      const BlockStatistics& st = t.statistics;
      text += fmt::format("{:<{}} {:>6} {:>12} {:>9} {:>9.4f}% {:>11.4f}% {:>10.4f}% {:>14}\n", name_cell(t.name, width), width, t.steps, st.elements,
                          st.nan_blocks, share(st.flushed_to_zero, st.elements), share(st.made_subnormal, st.elements),
                          share(st.saturated, st.elements), scale_range_text(scale_exponent_range(choice.format, st)));
    }
    return text;
  };
  std::string table;
  if (!tensors.empty()) {
    table += fmt::format("format {}, blocks of {} along each tensor's feature axis (attention scores and probabilities: each query's keys), "
                         "as the run recorded them ({}, elements rounded to nearest even), summed over the recorded steps\n\n",
                         block_format_name(choice.format), choice.format.block_size, rule_text);
    table += rows(tensors, "tensor");
    table += "\nexact counts, recorded from each tensor's values before its cast (gradients carry the run's loss scale).\n";
  }
  if (!operands.empty()) {
    if (!table.empty()) table += "\n";
    table += fmt::format("the recipe's GEMM operands in {} (blocks of {}, {}), as its products saw them, summed over the recorded steps: each "
                         "product's copy blocked along its own reduction axis{}, elements rounded as the run says (its header names the recipe)\n\n",
                         block_format_name(choice.format), choice.format.block_size, rule_text,
                         weight_tiles ? " (the weights in square tiles: one copy both their products share)" : "");
    table += rows(operands, "operand");
    table += "\nexact counts from the quantizations the products used (gradients carry the run's loss scale).\n";
  }
  fmt::print("{}", table);
}

void run_block_analysis(const AnalyzeOptions& options) {
  const BlockChoice choice = parse_block_choice({options.format, options.block, options.axis, options.scale_rule});
  {
    std::size_t logs = 0;
    for (const std::string& input : options.inputs)
      logs += !std::filesystem::is_directory(input) && std::filesystem::path(input).extension() != ".npy";
    if (logs == options.inputs.size()) return run_recorded_block_analysis(options, choice);
    if (logs > 0) throw UsageError("analyze either .npy tensors or run logs with recorded block statistics, not both at once");
  }
  if (options.compare_scale_rules && choice.format.scale != BlockFormat::Scale::e8m0)
    throw UsageError("--compare-scale-rules compares the rules for MX (E8M0) scales; " + block_format_name(choice.format) + " has one");
  if (options.scale != "recorded" || !options.kinds.empty())
    throw UsageError("--scale and --kind apply to element formats; a block format sets its own scale per block");
  std::optional<float> tensor_scale;  // nvfp4 under a given amax
  if (const auto given = parse_tensor_amax(choice, options.tensor_amax)) tensor_scale = given->tensor_scale;
  if (options.tiles && tensor_scale) throw UsageError("--tiles makes NVFP4's tensor scale from the values' own amax: drop --tensor-amax");
  const NpyElements elements = parse_npy_elements(options.as);
  Context ctx;
  ctx.rounding = parse_rounding_mode(options.round);
  std::vector<std::string> warnings;
  const std::vector<std::filesystem::path> files = npy_inputs(options.inputs, warnings);
  for (const std::string& w : warnings) fmt::print(stderr, "fpscope: warning: {}\n", printable_text(w, 600));

  struct TensorReports {
    std::string name;
    std::vector<BlockRuleReport> reports;
  };
  std::vector<TensorReports> tensors;
  for (const auto& file : files) {
    const std::string name = file.stem().string();
    if (!options.tensors.empty() && std::none_of(options.tensors.begin(), options.tensors.end(), [&](const std::string& glob) {
          return ::fnmatch(glob.c_str(), name.c_str(), 0) == 0;
        }))
      continue;
    const NpyTensor tensor = npy_read_float32(file, elements);
    const BlockLayout layout = block_layout_for(choice, tensor.info.shape, file.string());
    if (options.tiles && tensor.info.shape.size() != 2)
      throw UsageError(printable_text(file.string(), 200) + " has shape " + shape_text(tensor.info.shape) + ": square tiles (--tiles) need 2-D tensors", 1);
    tensors.push_back({name, options.compare_scale_rules ? compare_scale_rules(choice.format, layout, tensor.values, ctx, options.tiles)
                                                         : std::vector<BlockRuleReport>{analyze_blocks(choice.format, choice.rule, layout,
                                                                                                       tensor.values, ctx, tensor_scale, options.tiles)}});
  }
  if (tensors.empty()) throw UsageError("no tensor matches --tensor in the inputs", 1);

  const auto share = [](std::uint64_t part, std::uint64_t whole) { return percent(part, whole); };
  if (options.json) {
    nlohmann::json out{{"format", block_format_name(choice.format)},
                       {"block", choice.format.block_size},
                       {"axis", choice.axis == BlockAxis::rows ? "rows" : "cols"},
                       {"square_tiles", options.tiles},
                       {"rounding", rounding_mode_name(ctx.rounding)},
                       {"tensors", nlohmann::json::array()}};
    for (const auto& t : tensors) {
      nlohmann::json rules = nlohmann::json::array();
      for (const BlockRuleReport& r : t.reports) {
        nlohmann::json row = block_statistics_json(r.statistics);
        row.update(nlohmann::json{
            {"scale_rule", choice.format.scale == BlockFormat::Scale::e8m0 ? scale_rule_name(r.rule) : "e4m3-rne"},
            {"blocks_with_another_scale_than_floor", r.blocks_differing},
            {"min_scale_exponent", r.scale_range ? nlohmann::json(r.scale_range->low) : nlohmann::json(nullptr)},
            {"max_scale_exponent", r.scale_range ? nlohmann::json(r.scale_range->high) : nlohmann::json(nullptr)},
            {"max_abs_error", r.error.max_abs},
            {"rms_error", r.error.rms},
            {"relative_rms_error", r.error.relative_rms() ? nlohmann::json(*r.error.relative_rms()) : nlohmann::json(nullptr)},
            {"beyond_float32", r.error.beyond_float32}});
        rules.push_back(std::move(row));
      }
      out["tensors"].push_back({{"tensor", t.name}, {"rules", rules}});
    }
    if (tensor_scale) {
      out["tensor_scale"] = *tensor_scale;
      out["tensor_scale_from"] = "given amax";
    }
    fmt::print("{}\n", out.dump(2));
    return;
  }
  std::string table = fmt::format("format {}, blocks of {} along {}{}, elements rounded {}{}\n\n", block_format_name(choice.format),
                                  choice.format.block_size, choice.axis == BlockAxis::rows ? "rows" : "columns",
                                  options.tiles ? fmt::format(", each scaled by its {0}x{0} tile's amax", choice.format.block_size) : std::string(),
                                  rounding_mode_name(ctx.rounding),
                                  options.compare_scale_rules                           ? ", every scale rule"
                                  : choice.format.scale == BlockFormat::Scale::e8m0 ? ", scales by the " + scale_rule_name(choice.rule) + " rule"
                                  : tensor_scale ? fmt::format(", E4M3 block scales under the tensor scale {} ({:a}) of the given amax {}", *tensor_scale,
                                                               *tensor_scale, *options.tensor_amax)
                                                                                     : ", E4M3 block scales under each tensor's float32 scale (2688 / the amax of its finite values)");
  std::vector<std::string> names;
  for (const auto& t : tensors) names.push_back(t.name);
  const std::size_t width = name_column_width(names, 28);
  table += fmt::format("{:<{}} {:<9} {:>10} {:>14} {:>9} {:>10} {:>12} {:>11} {:>12} {:>11} {:>10} {:>9}\n", "tensor", width, "rule", "values",
                       "other scale", "NaN blk", "% flushed", "% subnormal", "% saturated", "scales", "max error", "RMS error", "relative");
  for (const auto& t : tensors) {
    for (const BlockRuleReport& r : t.reports) {
      const BlockStatistics& st = r.statistics;
      table += fmt::format("{:<{}} {:<9} {:>10} {:>14} {:>9} {:>9.4f}% {:>11.4f}% {:>10.4f}% {:>12} {:>11.4g} {:>10.4g} {:>9}\n",
                           name_cell(t.name, width), width,
                           choice.format.scale == BlockFormat::Scale::e8m0 ? scale_rule_name(r.rule) : "e4m3",
                           st.elements, fmt::format("{} ({:.1f}%)", r.blocks_differing, share(r.blocks_differing, st.blocks)), st.nan_blocks,
                           share(st.flushed_to_zero, st.elements), share(st.made_subnormal, st.elements), share(st.saturated, st.elements),
                           scale_range_text(r.scale_range), r.error.max_abs, r.error.rms,
                           r.error.relative_rms() ? fmt::format("{:.4g}", *r.error.relative_rms()) : std::string("-"));
    }
  }
  table +=
      "\nexact counts from the values. other scale: blocks whose scale differs from the floor rule's (the OCP spec's). flushed: nonzero\n"
      "values that became zero; saturated: values beyond the element's largest after scaling, clamped. errors over finite values;\n"
      "relative: RMS error / RMS value (- where the values are all zero). NaN blk: blocks holding a NaN or infinity (their scale is NaN).\n";
  // Values a rule puts beyond float32 (their errors above are exact): what dequantizing them would do.
  for (const auto& t : tensors)
    for (const BlockRuleReport& r : t.reports)
      if (r.error.beyond_float32 > 0)
        table += fmt::format("{} under {}: {} quantized value{} beyond float32's largest (infinities if dequantized to float32{})\n",
                             printable_text(t.name, 200), scale_rule_name(r.rule), r.error.beyond_float32, r.error.beyond_float32 == 1 ? "" : "s",
                             r.rule != ScaleRule::floor ? "; the floor rule saturates such values instead" : "");
  fmt::print("{}", table);
}

void run_analyze(const AnalyzeOptions& options) {
  {
    bool block_format = false;
    try {
      parse_block_format(options.format);
      block_format = true;
    } catch (const UnknownNameError&) {
    }
    if (block_format) return run_block_analysis(options);
    if (options.tensor_amax) throw UsageError("--tensor-amax sets NVFP4's tensor scale: it applies with -f nvfp4");
    if (options.compare_scale_rules || options.tiles || !options.block.empty() || options.scale_rule != "floor")
      throw UsageError("--compare-scale-rules, --tiles, --block and --scale-rule apply to block-scaled formats (mxfp8-e4m3, mxfp4, nvfp4, ...)");
  }
  // A --format is checked before any input is read; without one, the run logs' own is known after.
  std::optional<TargetFormat> target;
  if (!options.format.empty()) target = target_format(options.format, {});
  const NpyElements elements = parse_npy_elements(options.as);
  const bool as_recorded = options.scale == "recorded";
  const std::optional<int> fixed_scale = as_recorded ? std::nullopt : parse_scale_log2(options.scale);
  const int margin = parse_integer_option<int>("--margin", options.margin, 0, max_margin_binades);
  std::vector<TensorKind> kinds;
  for (const std::string& k : options.kinds) {
    try {
      kinds.push_back(parse_tensor_kind(k));
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--kind: ") + e.what());
    }
  }

  std::vector<SourcedSeries> tensors;
  std::vector<std::string> warnings;
  RunLogFacts facts;
  std::size_t read = 0;
  for (const std::string& input : options.inputs)
    for (SourcedSeries& s : load(input, elements, warnings, facts)) {
      ++read;
      if (selected(s.series, kinds, options.tensors)) tensors.push_back(std::move(s));
    }
  if (tensors.empty() && read == 0)
    throw UsageError(std::string(options.inputs.size() == 1 ? "the input holds" : "the inputs hold") + " no recorded tensor (a run log of its header alone, or with steps but no snapshots)", 1);
  if (tensors.empty()) {
    std::string what = !kinds.empty() && !options.tensors.empty() ? "--kind and --tensor" : !kinds.empty() ? "--kind" : "--tensor";
    throw UsageError("no tensor matches " + what + " in the inputs", 1);
  }
  if (!target) target = target_format("", facts.headers);
  const Format format = target->format;
  const std::string format_text =
      format_name(format) + (target->reason.empty() ? std::string() : " (" + target->reason + "; --format asks about another)");

  std::vector<TensorSeries> all;
  for (const auto& t : tensors) all.push_back(t.series);
  const LossScaleAdvice common = recommend_loss_scale(all, format, margin);
  // The hypothetical loss scale: a number, the common advice (auto), or none (as recorded).
  std::optional<int> scale_log2 = fixed_scale;
  if (!as_recorded && !fixed_scale) scale_log2 = common.kind == LossScaleAdvice::Kind::scale ? common.scale_log2 : 0;

  for (const std::string& w : warnings) fmt::print(stderr, "fpscope: warning: {}\n", printable_text(w, 600));
  const auto binade_text = [](std::optional<int> b) { return b ? fmt::format("2^{}", *b) : std::string("-"); };
  if (options.json) {
    nlohmann::json out{{"format", format_name(format)},
                       {"format_chosen_by", target->chosen_by},
                       {"format_reason", target->reason},
                       {"scale_log2", scale_log2 ? nlohmann::json(*scale_log2) : nlohmann::json("recorded")},
                       {"advice", advice_text(common)},
                       {"advice_decided_by", common.decided_by},
                       {"advice_from_shadow", common.from_shadow},
                       {"block_statistics_recorded", facts.block_formats},
                       {"tensors", nlohmann::json::array()}};
    for (const auto& [source, s] : tensors) {
      const RangeReport r = analyze_series(s, format, scale_log2);
      const LossScaleAdvice own = recommend_loss_scale(s, format, margin);
      const ShiftedHistogram recorded = shifted_histogram(s, std::nullopt);
      out["tensors"].push_back({{"source", source},
                                {"tensor", s.name},
                                {"kind", tensor_kind_name(s.kind)},
                                {"captured", capture_name(s.captured)},
                                {"recorded_scale", recorded_scales(s)},
                                {"steps", s.steps},
                                {"count", r.total},
                                {"max_binade_at_scale_1", highest_binade_at_scale_one(s) ? nlohmann::json(*highest_binade_at_scale_one(s)) : nlohmann::json(nullptr)},
                                {"min_nonzero_binade_at_scale_1", lowest_binade_at_scale_one(s) ? nlohmann::json(*lowest_binade_at_scale_one(s)) : nlohmann::json(nullptr)},
                                {"zero_after_cast", r.zero + r.flushed_to_zero},
                                {"flushed_to_zero", r.flushed_to_zero},
                                {"subnormal", r.subnormal},
                                {"normal", r.normal},
                                {"overflow", r.overflow},
                                {"non_finite", r.non_finite},
                                {"estimated_near_smallest_subnormal", r.boundary_below},
                                {"estimated_near_max", r.boundary_above},
                                {"advice", advice_text(own)},
                                {"bins", sparse_bins_json(recorded.histogram)},  // as recorded
                                {"zero", recorded.histogram.zero_count()},
                                {"inf", recorded.histogram.infinity_count()},
                                {"nan", recorded.histogram.nan_count()}});
    }
    if (!facts.fp8_operands.empty()) {
      out["fp8_operands"] = nlohmann::json::array();
      for (const Fp8OperandSummary& f : facts.fp8_operands)
        out["fp8_operands"].push_back({{"source", f.source},
                                       {"tensor", f.name},
                                       {"operand", f.operand},
                                       {"format", f.format},
                                       {"steps", f.steps},
                                       {"count", f.elements},
                                       {"zeros", f.zeros},
                                       {"flushed_to_zero", f.flushed_to_zero},
                                       {"saturated", f.saturated},
                                       {"amax_min", f.amax_low},
                                       {"amax_max", f.amax_high},
                                       {"scale_min", f.scale_low},
                                       {"scale_max", f.scale_high},
                                       {"scale_last", f.last_scale}});
    }
    out["skipped_steps"] = nlohmann::json::array();
    for (const auto& [source, step] : facts.bad_steps) {
      nlohmann::json entry{{"source", source},
                           {"step", step.step},
                           {"skipped", step.skipped},
                           {"finished", step.finished},
                           {"loss", std::isfinite(step.loss) ? nlohmann::json(step.loss) : nlohmann::json(nullptr)},
                           {"loss_scale", step.loss_scale},
                           {"diagnosis", culprit_diagnosis(step)}};
      if (step.culprit) {
        const Culprit& c = *step.culprit;
        entry["culprit"] = {{"tensor", c.name}, {"kind", tensor_kind_name(c.kind)}, {"fault", culprit_fault_name(c.fault)}, {"position", c.position},
                            {"binades_too_high", binades_too_high(c)}};
      }
      out["skipped_steps"].push_back(std::move(entry));
    }
    fmt::print("{}\n", out.dump(2));
    return;
  }
  std::string table;
  if (!scale_log2)
    table += fmt::format("format {}, at the scales the values were recorded with\n", format_text);
  else
    table += fmt::format("format {}, loss scale 2^{}{} on the gradients (activations and weights as they are)\n", format_text,
                         *scale_log2, fixed_scale ? "" : " (the advice below)");
  // .npy tensors (kind other) are what the user asks a scale about: the advice is for them.
  const bool any_gradient = std::any_of(tensors.begin(), tensors.end(), [](const SourcedSeries& t) { return is_gradient(t.series.kind); });
  const bool any_other = std::any_of(tensors.begin(), tensors.end(), [](const SourcedSeries& t) { return t.series.kind == TensorKind::other; });
  table += fmt::format("advice for the {}: {}{}\n\n", any_gradient || !any_other ? "gradients" : "tensors (as if they were gradients)",
                       advice_text(common),
                       common.kind == LossScaleAdvice::Kind::scale
                           ? " (set by " + printable_text(common.decided_by) + (common.from_shadow ? ", from the run's fp32 shadow)" : ")")
                       : common.kind == LossScaleAdvice::Kind::no_scaling_needed ? " (at 2^0 nothing flushes, turns subnormal or overflows)"
                                                                                  : " (no gradients among the tensors)");
  std::vector<std::string> labels;  // name and kind, and " *" where captured as stored
  for (const auto& [source, s] : tensors)
    labels.push_back(s.name + " " + std::string(tensor_kind_name(s.kind)) + (s.captured == Capture::as_stored ? " *" : ""));
  const std::size_t width = name_column_width(labels, 40);
  table += fmt::format("{:<{}} {:>12} {:>10} {:>7} {:>8} {:>9} {:>11} {:>10} {:>12}\n", "tensor", width, "values", "recorded", "max", "min>0",
                       "% zero", "% subnormal", "% overflow", "advice");
  bool any_as_stored = false;
  std::string not_numbers;  // a line for each tensor holding infinities or NaNs
  for (const auto& [source, s] : tensors) {
    const RangeReport r = analyze_series(s, format, scale_log2);
    const LossScaleAdvice own = recommend_loss_scale(s, format, margin);
    const bool as_stored = s.captured == Capture::as_stored;
    any_as_stored = any_as_stored || as_stored;
    const std::string name = name_cell(s.name + " " + std::string(tensor_kind_name(s.kind)), as_stored ? width - 2 : width) + (as_stored ? " *" : "");
    if (r.non_finite != 0) {
      // Counted among the values and in none of the shares: said, or a tensor that overflowed
      // before any cast would read as one that only flushes.
      const ExponentHistogram& h = shifted_histogram(s, std::nullopt).histogram;
      not_numbers += fmt::format("{}: {} of its values {} infinite or NaN ({} infinit{}, {} NaN): counted in values, in none of the shares\n",
                                 name_cell(s.name + " " + std::string(tensor_kind_name(s.kind)), max_name_column), r.non_finite,
                                 r.non_finite == 1 ? "is" : "are", h.infinity_count(), h.infinity_count() == 1 ? "y" : "ies", h.nan_count());
    }
    table += fmt::format("{:<{}} {:>12} {:>10} {:>7} {:>8} {:>8.2f}% {:>10.2f}% {:>9.2f}% {:>12}\n", name, width, r.total, recorded_scales(s),
                         binade_text(highest_binade_at_scale_one(s)), binade_text(lowest_binade_at_scale_one(s)),
                         percent(r.zero + r.flushed_to_zero, r.total), percent(r.subnormal, r.total), percent(r.overflow, r.total),
                         is_gradient(s.kind) || s.kind == TensorKind::other ? advice_text(own) : "-");
  }
  table += fmt::format(
      "\nrecorded: the scale the values carried (the loss scale, for gradients read before unscaling); max and min>0 are binades at\n"
      "scale 1. % zero counts exact zeros and values the cast flushes; shares at binade granularity (values in the binade under the\n"
      "smallest subnormal count as kept, values in the top binade as not overflowing). advice: the largest 2^k keeping the\n"
      "gradient's largest binade {} below the overflow threshold; a loss scale moves only gradients.\n",
      margin == 1 ? "one binade" : fmt::format("{} binades", margin));
  if (any_as_stored)
    table += "* captured as stored (already in the low-precision format): values its cast flushed are among the zeros.\n";
  table += not_numbers;
  if (!facts.fp8_operands.empty()) {
    // The FP8 recipe's own casts of its GEMM operands, exact, every step (not only recorded ones).
    table += "\nthe recipe's FP8 GEMM operands (per-tensor scaling), over every step the log holds: exact counts of their casts\n\n";
    std::vector<std::string> operands;
    for (const Fp8OperandSummary& f : facts.fp8_operands) operands.push_back(f.name + " " + f.operand);
    const std::size_t operand_width = name_column_width(operands, 36);
    table += fmt::format("{:<{}} {:>6} {:>6} {:>12} {:>10} {:>11} {:>21} {:>21} {:>10}\n", "operand", operand_width, "format", "steps", "values",
                         "% flushed", "% saturated", "amax", "scale", "last scale");
    const auto range = [](double low, double high) { return low == high ? fmt::format("{:.4g}", low) : fmt::format("{:.4g}..{:.4g}", low, high); };
    for (const Fp8OperandSummary& f : facts.fp8_operands)
      table += fmt::format("{:<{}} {:>6} {:>6} {:>12} {:>9.4f}% {:>10.4f}% {:>21} {:>21} {:>10.4g}\n", name_cell(f.name + " " + f.operand, operand_width), operand_width,
                           printable_text(f.format, 6), f.steps, f.elements, percent(f.flushed_to_zero, f.elements), percent(f.saturated, f.elements),
                           range(f.amax_low, f.amax_high), range(f.scale_low, f.scale_high), f.last_scale);
    table += "\nflushed: nonzero values the cast made zero; saturated: values beyond the format's largest after scaling, clamped. amax:\n"
             "the largest |value| of a step (what goes into the history); scale: what the values were multiplied by before the cast.\n";
  }
  if (!facts.bad_steps.empty()) {
    // Every step the logs hold, recorded or not: the culprit is read on each. A run of consecutive
    // steps with the same culprit (a scale too high for many steps) is one line, said for its first.
    const bool one = facts.bad_steps.size() == 1;
    table += fmt::format("\n{} step{} skipped {} update, lost {} loss or did not finish; the culprit is the first tensor in execution order\n"
                         "that held a NaN, an infinity or a value past its format's largest:\n\n",
                         facts.bad_steps.size(), one ? "" : "s", one ? "its" : "their", one ? "its" : "their");
    const auto same_culprit = [](const StepRecord& a, const StepRecord& b) {
      if (a.finished != b.finished) return false;
      if (!a.culprit || !b.culprit) return !a.culprit && !b.culprit;
      return a.culprit->name == b.culprit->name && a.culprit->kind == b.culprit->kind && a.culprit->fault == b.culprit->fault &&
             a.loss_scale == b.loss_scale;
    };
    std::size_t lines = 0, i = 0;
    for (; i < facts.bad_steps.size() && lines < 20; ++lines) {
      const auto& [source, step] = facts.bad_steps[i];
      std::size_t j = i + 1;
      while (j < facts.bad_steps.size() && facts.bad_steps[j].first == source && facts.bad_steps[j].second.step == facts.bad_steps[j - 1].second.step + 1 &&
             same_culprit(facts.bad_steps[j].second, step))
        ++j;
      const std::string steps = j - i == 1 ? fmt::format("step {:>7}", step.step)
                                           : fmt::format("steps {}..{} ({} steps; the first)", step.step, facts.bad_steps[j - 1].second.step, j - i);
      table += fmt::format("{}{}: {}\n", steps, facts.headers.size() > 1 ? " (" + printable_text(source, 80) + ")" : std::string(),
                           culprit_diagnosis(step));
      i = j;
    }
    if (i < facts.bad_steps.size()) table += fmt::format("... and {} more steps (--json lists them all)\n", facts.bad_steps.size() - i);
  }
  for (const std::string& name : facts.block_formats)
    table += fmt::format("the run log{} also hold{} block statistics of {}: -f {} analyses them.\n", facts.headers.size() == 1 ? "" : "s",
                         facts.headers.size() == 1 ? "s" : "", name, name);
  fmt::print("{}", table);
}

}  // namespace

void add_analyze(CLI::App& app) {
  auto options = std::make_shared<AnalyzeOptions>();
  CLI::App* cmd = app.add_subcommand("analyze", "What a format and a loss scale would flush to zero or overflow, per tensor, and the loss scale to use");
  cmd->add_option("RUN_OR_NPY", options->inputs, "run logs (.jsonl), exported CSV (.csv), .npy files, or folders of .npy files")->required();
  cmd->add_option("-f,--format", options->format, "target format: fp16 bf16 e4m3 e5m2 tf32 eXmY, or a block-scaled format (mxfp8-e4m3, mxfp4, nvfp4, ...) for .npy tensors "
                  "(default: the format the run logs were cast to, else fp16)");
  cmd->add_option("--scale", options->scale,
                  "recorded (the values as the run scaled them), a loss scale 2^k or a power of two (moves gradients only), or auto (the advice)")
      ->capture_default_str();
  cmd->add_option("--kind", options->kinds, "only tensors of this kind (repeatable): activation, activation_gradient, weight, weight_gradient, other");
  cmd->add_option("--tensor", options->tensors, "only tensors whose name matches this glob (repeatable): 'fc*', 'h2.attn.*'");
  cmd->add_option("--as", options->as,
                  "read .npy elements as the codes of this format: bf16 bits in 2-byte elements, FP8 / FP6 / FP4 codes one per byte "
                  "(float8_e4m3fn, e5m2, float4_e2m1fn, ...: how ml_dtypes saves them)");
  cmd->add_option("--margin", options->margin, "binades to keep between the largest gradient and overflow")->capture_default_str();
  cmd->add_flag("--json", options->json, "print JSON instead of a table");
  cmd->add_option("--block", options->block, "block-scaled formats: elements per block (default: the format's)");
  cmd->add_option("--axis", options->axis, "block-scaled formats: rows or cols")->capture_default_str();
  cmd->add_option("--scale-rule", options->scale_rule, "block-scaled formats: floor (OCP), round-up, rceil, even")->capture_default_str();
  cmd->add_option("-r,--round", options->round, "block-scaled formats: how elements round")->capture_default_str();
  cmd->add_flag("--compare-scale-rules", options->compare_scale_rules,
                "block-scaled formats: every scale rule side by side (blocks whose scale differs, flushes, saturation, error)");
  cmd->add_flag("--tiles", options->tiles,
                "block-scaled formats (2-D .npy tensors): each block scaled by its square tile's amax, as NVIDIA's NVFP4 recipe scales weights");
  cmd->add_option("--tensor-amax", options->tensor_amax,
                  "nvfp4 (.npy): make every tensor's scale from this amax (a calibrated one) instead of its own: 2688 / amax");
  cmd->callback([options] { run_analyze(*options); });
}

}  // namespace fpscope::cli
