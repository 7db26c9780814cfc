// `fpscope export RUN (--csv|--svg|--png) OUT`: a run's histograms as tidy CSV, or plotted.
#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>

#include "commands.hpp"
#include "number_option.hpp"
#include "fpscope/analyzer/csv.hpp"
#include "fpscope/analyzer/plot.hpp"
#include "fpscope/analyzer/png.hpp"
#include "fpscope/analyzer/run_log.hpp"
#include "fpscope/analyzer/scale_semantics.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"
#include "fpscope/snapshot/output_file.hpp"
#include "scale_option.hpp"
#include "target_format_option.hpp"

namespace fpscope::cli {

namespace {

struct ExportOptions {
  std::string run;
  std::optional<std::string> csv;  // exactly one of the six: where to write
  std::optional<std::string> blocks_csv;
  std::optional<std::string> steps_csv;
  std::optional<std::string> scaling_csv;
  std::optional<std::string> svg;
  std::optional<std::string> png;
  std::string plot = "histogram";
  std::string tensor;
  std::string kind;
  std::string format;  // "": the run's own, else fp16 (target_format)
  std::string scale = "recorded";
  std::string binades;  // LO..HI, the plot's x-axis at least
};

// --binades LO..HI: whole binades of float32, LO below HI.
std::pair<int, int> parse_binades(const std::string& text) {
  const std::size_t dots = text.find("..");
  const auto bad = [&] {
    return UsageError("--binades '" + printable_text(text) + "' is not LO..HI with " + std::to_string(min_binade) + " <= LO < HI <= " +
                      std::to_string(max_binade));
  };
  if (dots == std::string::npos) throw bad();
  try {
    const int lo = parse_integer_option<int>("--binades", text.substr(0, dots), min_binade, max_binade);
    const int hi = parse_integer_option<int>("--binades", text.substr(dots + 2), min_binade, max_binade);
    if (lo >= hi) throw bad();
    return {lo, hi};
  } catch (const UsageError&) {
    throw bad();
  }
}

// The tensor to plot: named by --tensor/--kind, else the first activation gradient, else the
// first tensor of the run.
std::pair<std::string, TensorKind> choose_tensor(const RunLog& log, const ExportOptions& options) {
  std::optional<TensorKind> kind;
  if (!options.kind.empty()) {
    try {
      kind = parse_tensor_kind(options.kind);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  const TensorRecord* fallback = nullptr;
  for (const Snapshot& s : log.snapshots) {
    for (const TensorRecord& t : s.tensors) {
      if ((options.tensor.empty() || t.name == options.tensor) && (!kind || t.kind == *kind)) {
        if (!options.tensor.empty() || kind || t.kind == TensorKind::activation_gradient) return {t.name, t.kind};
        if (fallback == nullptr) fallback = &t;
      }
    }
  }
  if (fallback != nullptr) return {fallback->name, fallback->kind};
  throw UsageError("the run log " + printable_text(options.run, 200) + " has no recorded tensor" +
                       (options.tensor.empty() ? std::string() : " named '" + printable_text(options.tensor) + "'") +
                       (options.kind.empty() ? std::string() : " of kind " + options.kind),
                   options.tensor.empty() && options.kind.empty() ? 1 : 2);  // the input's lack, or a name asked for
}

void run_export(const ExportOptions& options) {
  // The outputs by their flags, each with the kind of file it writes (and so the only kind it
  // replaces): exactly one given.
  struct Output {
    const char* flag;
    const std::optional<std::string>* path;
    FileKind kind;
  };
  const Output flags[] = {{"--csv", &options.csv, FileKind::csv},           {"--blocks-csv", &options.blocks_csv, FileKind::csv},
                          {"--steps-csv", &options.steps_csv, FileKind::csv}, {"--scaling-csv", &options.scaling_csv, FileKind::csv},
                          {"--svg", &options.svg, FileKind::svg},           {"--png", &options.png, FileKind::png}};
  const auto given = std::count_if(std::begin(flags), std::end(flags), [](const Output& flag) { return flag.path->has_value(); });
  if (given != 1)
    throw UsageError("export needs exactly one of --csv OUT, --blocks-csv OUT, --steps-csv OUT, --scaling-csv OUT, --svg OUT or --png OUT");
  const Output output = *std::find_if(std::begin(flags), std::end(flags), [](const Output& flag) { return flag.path->has_value(); });
  if (options.plot != "histogram" && options.plot != "heatmap")
    throw UsageError("unknown --plot '" + printable_text(options.plot) + "': expected histogram or heatmap");
  // A --format is checked before the run log is read; without one, the run's own is known after.
  std::optional<TargetFormat> target;
  if (!options.format.empty()) target = target_format(options.format, {});
  const std::optional<std::pair<int, int>> binades =
      options.binades.empty() ? std::nullopt : std::optional<std::pair<int, int>>(parse_binades(options.binades));
  // As recorded, or at a hypothetical loss scale (which moves gradients only).
  const std::optional<int> scale = options.scale == "recorded" ? std::nullopt : parse_scale_log2(options.scale);
  if (!scale && options.scale != "recorded") throw UsageError("export needs --scale recorded or a fixed loss scale such as 2^10");
  // The output is resolved and checked (its folder exists, it is not the run log, it replaces
  // only an earlier file of its kind) before the run log is even read.
  const OutputTarget out = resolve_output(**output.path, output.flag);
  check_outputs({&out, 1}, {{std::filesystem::path(options.run)}});
  check_replaces_only(out, output.kind);
  const RunLog log = read_run_log(options.run);
  for (const std::string& w : log.warnings) fmt::print(stderr, "fpscope: warning: {}\n", w);
  if (options.blocks_csv) {
    const bool any = std::any_of(log.snapshots.begin(), log.snapshots.end(), [](const Snapshot& s) {
      return !s.block_operands.empty() ||
             std::any_of(s.tensors.begin(), s.tensors.end(), [](const TensorRecord& t) { return t.blocks.has_value(); });
    });
    if (!any)
      throw UsageError(options.run + " holds no block statistics: record them with fpscope train --record-blocks FORMAT (or train with a "
                                     "block-scaled --recipe, whose GEMM operands' statistics it records)",
                       1);
    write_output(out, block_statistics_csv(log.snapshots));
    return;
  }
  if (options.csv) {
    write_output(out, histograms_csv(log.snapshots));
    return;
  }
  if (options.steps_csv) {
    write_output(out, steps_csv(log.steps));
    return;
  }
  if (options.scaling_csv) {
    const bool any = std::any_of(log.steps.begin(), log.steps.end(), [](const StepRecord& s) { return !s.scaling.empty(); });
    if (!any) throw UsageError(options.run + " holds no FP8 scaling: it comes from fpscope train with a per-tensor FP8 --recipe (fp8-delayed, fp8-current, fp8-unscaled)", 1);
    write_output(out, scaling_csv(log.steps));
    return;
  }
  const auto [name, kind] = choose_tensor(log, options);
  // The tensor's steps, each moved by the one scale semantics (its recorded scale divided out,
  // a hypothetical loss scale applied if it is a gradient); the plot then draws them at 2^0.
  std::vector<std::pair<std::int64_t, ExponentHistogram>> steps;
  std::vector<Snapshot> chosen;
  std::uint64_t clamped = 0;
  bool as_stored = false;
  for (const Snapshot& s : log.snapshots)
    for (const TensorRecord& t : s.tensors)
      if (t.name == name && t.kind == kind) {
        const ShiftedHistogram moved = shift_histogram(t.histogram, shift_of_part(kind, scale_log2_of(t.scale).log2, scale));
        steps.emplace_back(s.step, moved.histogram);
        clamped += moved.clamped;
        as_stored = as_stored || t.captured == Capture::as_stored;
        Snapshot one = s;
        one.tensors = {t};
        chosen.push_back(std::move(one));
      }
  std::optional<ShiftedHistogram> merged;
  try {
    const std::vector<TensorSeries> series = tensor_series(chosen);
    merged = shifted_histogram(series.front(), scale);
  } catch (const std::overflow_error& e) {
    throw std::runtime_error(printable_text(options.run, 200) + ": " + e.what());
  }
  if (!target) target = target_format("", {log.header});
  PlotOptions plot;
  plot.format = target->format;
  if (target->chosen_by == "default") plot.format_note = target->reason;  // not the run's: said why
  plot.title = name + " " + std::string(tensor_kind_name(kind)) +
               (options.plot == "histogram" ? fmt::format(", {} steps merged", steps.size()) : "");
  plot.scale_text = !scale ? std::string("the values as recorded (with the scales the run gave them)")
                    : loss_scale_multiplies(kind) ? fmt::format("at loss scale 2^{} (the recorded scale divided out)", *scale)
                                                  : std::string("a loss scale does not move these values");
  plot.binades = binades;
  if (as_stored) plot.note = "captured as stored: values the cast flushed are among the zeros";
  if (clamped > 0) plot.note += (plot.note.empty() ? "" : "; ") + std::to_string(clamped) + " values outside float32's binades drawn at its ends";
  const std::string svg = options.plot == "histogram" ? histogram_svg(merged->histogram, plot) : heatmap_svg(steps, plot);
  if (options.svg) write_output(out, svg);
  else write_svg_as_png(svg, out);
}

}  // namespace

void add_export(CLI::App& app) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* cmd = app.add_subcommand("export", "Export a run log as tidy CSV (histograms, block statistics, steps, FP8 scaling) or a histogram as an SVG or PNG plot against a format's range");
  cmd->add_option("RUN", options->run, "the run log (.jsonl)")->required();
  cmd->add_option_function<std::string>("--csv", [options](const std::string& path) { options->csv = path; },
                                        "write step,tensor,kind,binade,count here (- for standard output)");
  cmd->add_option_function<std::string>("--blocks-csv", [options](const std::string& path) { options->blocks_csv = path; },
                                        "write the recorded block statistics, step,tensor,kind,format,block,rule,series,bin,count, here");
  cmd->add_option_function<std::string>("--steps-csv", [options](const std::string& path) { options->steps_csv = path; },
                                        "write every step's step,loss,loss_scale,skipped here");
  cmd->add_option_function<std::string>("--scaling-csv", [options](const std::string& path) { options->scaling_csv = path; },
                                        "write a per-tensor FP8 recipe's step,tensor,operand,format,amax,scale,elements,zeros,flushed_to_zero,"
                                        "saturated here");
  cmd->add_option_function<std::string>("--svg", [options](const std::string& path) { options->svg = path; }, "write a plot here");
  cmd->add_option_function<std::string>("--png", [options](const std::string& path) { options->png = path; },
                                        "write the plot as a PNG (twice the SVG's size) here");
  cmd->add_option("--plot", options->plot, "histogram (all steps merged) or heatmap (steps x binades)")->capture_default_str();
  cmd->add_option("--tensor", options->tensor, "tensor to plot (default: the first activation gradient)");
  cmd->add_option("--binades", options->binades,
                  "LO..HI: the x-axis spans at least these binades, so that two plots share it (a before/after pair)");
  cmd->add_option("--kind", options->kind, "its kind: activation, activation_gradient, weight, weight_gradient");
  cmd->add_option("-f,--format", options->format, "format whose range shades the plot (default: the format the run was cast to, else fp16)");
  cmd->add_option("--scale", options->scale, "recorded (the values as the run scaled them) or a loss scale 2^k (moves gradients only)")->capture_default_str();
  cmd->callback([options] { run_export(*options); });
}

}  // namespace fpscope::cli
