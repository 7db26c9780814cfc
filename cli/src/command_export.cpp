// `fpscope export RUN --csv OUT`: a run's histograms in tidy CSV, written atomically.
#include <fmt/core.h>

#include <string>

#include "commands.hpp"
#include "fpscope/analyzer/csv.hpp"
#include "fpscope/analyzer/run_log.hpp"

namespace fpscope::cli {

namespace {

struct ExportOptions {
  std::string run;
  std::string csv;
};

void run_export(const ExportOptions& options) {
  if (options.csv.empty()) throw UsageError("export needs --csv OUT");
  const RunLog log = read_run_log(options.run);
  for (const std::string& w : log.warnings) fmt::print(stderr, "fpscope: warning: {}\n", w);
  write_file_atomically(options.csv, histograms_csv(log.snapshots));
}

}  // namespace

void add_export(CLI::App& app) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* cmd = app.add_subcommand("export", "Export a run log's histograms (tidy CSV: step,tensor,kind,binade,count)");
  cmd->add_option("RUN", options->run, "the run log (.jsonl)")->required();
  cmd->add_option("--csv", options->csv, "write the CSV here (atomically: a temporary file, then rename)");
  cmd->callback([options] { run_export(*options); });
}

}  // namespace fpscope::cli
