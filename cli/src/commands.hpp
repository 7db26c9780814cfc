// The fpscope subcommands: each registers its options on the app and runs when chosen.
#pragma once

#include <CLI/CLI.hpp>

#include "usage_error.hpp"

namespace fpscope::cli {

// Each add_* registers a subcommand whose callback does the work; errors are thrown as
// exceptions carrying one sentence, and main prints them.
void add_inspect(CLI::App& app);
void add_table(CLI::App& app);
void add_convert(CLI::App& app);
void add_verify(CLI::App& app);
void add_analyze(CLI::App& app);
void add_export(CLI::App& app);
void add_train(CLI::App& app);
void add_quantize(CLI::App& app);  // quantize and dequantize

}  // namespace fpscope::cli
