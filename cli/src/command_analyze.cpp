// `fpscope analyze RUN_OR_NPY...`: per tensor, what a format and a scale would flush, make
// subnormal or overflow, and the scale to use.
#include <fmt/core.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.hpp"
#include "number_option.hpp"
#include "scale_option.hpp"
#include "fpscope/analyzer/csv.hpp"
#include "fpscope/core/printable_text.hpp"
#include "fpscope/analyzer/npy.hpp"
#include "fpscope/analyzer/recommendation.hpp"
#include "fpscope/analyzer/run_log.hpp"
#include "fpscope/core/names.hpp"

namespace fpscope::cli {

namespace {

struct AnalyzeOptions {
  std::vector<std::string> inputs;
  std::string format = "fp16";
  std::string scale = "1";
  std::string as = "";
  std::string margin = "1";
  bool json = false;
};

struct NamedHistogram {
  std::string source;  // the file
  std::string name;    // tensor name, with its kind for run logs
  ExponentHistogram histogram;
};

// A run log's (or an exported CSV's) tensors, each merged over every recorded step; a .npy file
// or a folder of them.
std::vector<NamedHistogram> load(const std::string& input, NpyElements elements, std::vector<std::string>& warnings) {
  const std::filesystem::path path(input);
  std::vector<NamedHistogram> out;
  if (std::filesystem::is_directory(path)) {
    for (TensorRecord& t : npy_folder_snapshot(path, elements, warnings).tensors) out.push_back({input, t.name, std::move(t.histogram)});
    return out;
  }
  if (path.extension() == ".npy") {
    out.push_back({input, path.stem().string(), npy_histogram(path, elements)});
    return out;
  }
  std::vector<Snapshot> snapshots;
  if (path.extension() == ".csv") {
    snapshots = read_histograms_csv(path);
  } else {
    RunLog log = read_run_log(path);
    warnings.insert(warnings.end(), log.warnings.begin(), log.warnings.end());
    snapshots = std::move(log.snapshots);
  }
  std::map<std::string, std::size_t> index;
  for (const Snapshot& s : snapshots) {
    for (const TensorRecord& t : s.tensors) {
      const std::string name = t.name + " " + std::string(tensor_kind_name(t.kind));
      auto [it, inserted] = index.try_emplace(name, out.size());
      if (inserted) out.push_back({input, name, {}});
      try {
        out[it->second].histogram.merge(t.histogram);
      } catch (const std::overflow_error&) {
        throw std::runtime_error(printable_text(input, 200) + ": tensor " + printable_text(name) + " counts more than 2^64 - 1 values over the run");
      }
    }
  }
  return out;
}

double percent(std::uint64_t part, std::uint64_t whole) { return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole); }

void run_analyze(const AnalyzeOptions& options) {
  const Format format = parse_format(options.format);
  NpyElements elements = NpyElements::by_dtype;
  if (options.as == "bf16") elements = NpyElements::bfloat16;
  else if (!options.as.empty()) throw UsageError("--as '" + printable_text(options.as) + "' is not supported: expected bf16");
  std::optional<int> fixed_scale = parse_scale_log2(options.scale);
  const int margin = parse_integer_option<int>("--margin", options.margin, 0, max_margin_binades);

  std::vector<NamedHistogram> tensors;
  std::vector<std::string> warnings;
  for (const std::string& input : options.inputs) {
    auto loaded = load(input, elements, warnings);
    tensors.insert(tensors.end(), std::make_move_iterator(loaded.begin()), std::make_move_iterator(loaded.end()));
  }
  std::vector<ExponentHistogram> all;
  for (const auto& t : tensors) all.push_back(t.histogram);
  const int scale_log2 = fixed_scale ? *fixed_scale : recommend_common_scale(all, format, margin);

  for (const std::string& w : warnings) fmt::print(stderr, "fpscope: warning: {}\n", w);
  if (options.json) {
    nlohmann::json out{{"format", format_name(format)}, {"scale_log2", scale_log2}, {"tensors", nlohmann::json::array()}};
    for (const auto& t : tensors) {
      const RangeReport r = analyze_range(t.histogram, format, scale_log2);
      const ScaleRecommendation rec = recommend_scale(t.histogram, format, margin);
      const bool any = t.histogram.highest_binade() >= min_binade;
      out["tensors"].push_back({{"source", t.source},
                                {"tensor", t.name},
                                {"count", r.total},
                                {"max_binade", any ? nlohmann::json(t.histogram.highest_binade()) : nlohmann::json(nullptr)},
                                {"min_nonzero_binade", any ? nlohmann::json(t.histogram.lowest_binade()) : nlohmann::json(nullptr)},
                                {"zero_after_cast", r.zero + r.flushed_to_zero},
                                {"flushed_to_zero", r.flushed_to_zero},
                                {"subnormal", r.subnormal},
                                {"normal", r.normal},
                                {"overflow", r.overflow},
                                {"non_finite", r.non_finite},
                                {"estimated_near_smallest_subnormal", r.boundary_below},
                                {"estimated_near_max", r.boundary_above},
                                {"recommended_scale_log2", rec.scale_log2},
                                {"bins", sparse_bins_json(t.histogram)},
                                {"zero", t.histogram.zero_count()},
                                {"inf", t.histogram.infinity_count()},
                                {"nan", t.histogram.nan_count()}});
    }
    fmt::print("{}\n", out.dump(2));
    return;
  }
  std::string table = fmt::format("format {}, scale 2^{}{}\n\n", format_name(format), scale_log2, fixed_scale ? "" : " (recommended for all tensors)");
  table += fmt::format("{:<36} {:>12} {:>6} {:>8} {:>11} {:>11} {:>10} {:>12}\n", "tensor", "values", "max", "min>0",
                       "% zero", "% subnormal", "% overflow", "recommended");
  for (const auto& t : tensors) {
    const RangeReport r = analyze_range(t.histogram, format, scale_log2);
    const ScaleRecommendation rec = recommend_scale(t.histogram, format, margin);
    const bool any = t.histogram.highest_binade() >= min_binade;
    table += fmt::format("{:<36} {:>12} {:>6} {:>8} {:>10.2f}% {:>10.2f}% {:>9.2f}% {:>12}\n", t.name, r.total,
                         any ? fmt::format("2^{}", t.histogram.highest_binade()) : "-",
                         any ? fmt::format("2^{}", t.histogram.lowest_binade()) : "-", percent(r.zero + r.flushed_to_zero, r.total),
                         percent(r.subnormal, r.total), percent(r.overflow, r.total), fmt::format("2^{}", rec.scale_log2));
  }
  table += fmt::format("\n% zero counts exact zeros and values the cast flushes; shares at binade granularity (values in the binade\n"
                       "under the smallest subnormal count as kept, values in the top binade as not overflowing). recommended: the\n"
                       "largest 2^k keeping each tensor's largest binade {} below the overflow threshold.\n",
                       margin == 1 ? "one binade" : fmt::format("{} binades", margin));
  fmt::print("{}", table);
}

}  // namespace

void add_analyze(CLI::App& app) {
  auto options = std::make_shared<AnalyzeOptions>();
  CLI::App* cmd = app.add_subcommand("analyze", "What a format and a loss scale would flush to zero or overflow, per tensor, and the scale to use");
  cmd->add_option("RUN_OR_NPY", options->inputs, "run logs (.jsonl), exported CSV (.csv), .npy files, or folders of .npy files")->required();
  cmd->add_option("-f,--format", options->format, "target format: fp16 bf16 e4m3 e5m2 tf32 eXmY")->capture_default_str();
  cmd->add_option("--scale", options->scale, "the scale to analyse at: 2^k, a power of two, or auto (the recommended one)")->capture_default_str();
  cmd->add_option("--as", options->as, "read 2-byte .npy elements as bf16");
  cmd->add_option("--margin", options->margin, "binades to keep between the largest value and overflow")->capture_default_str();
  cmd->add_flag("--json", options->json, "print JSON instead of a table");
  cmd->callback([options] { run_analyze(*options); });
}

}  // namespace fpscope::cli
