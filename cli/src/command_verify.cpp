// `fpscope verify FUNCTION`: checks Berkeley TestFloat case lines on stdin against fpscope.
#include <fmt/core.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "fpscope/snapshot/line_reader.hpp"
#include "fpscope/core/printable_text.hpp"
#include "testfloat_case.hpp"
#include "fpscope/core/bits.hpp"
#include "fpscope/core/names.hpp"

namespace fpscope::cli {

namespace {

struct VerifyOptions {
  std::string function;
  std::string round = "near_even";
  std::string tininess = "after";
  bool exact = false;
  bool not_exact = false;
  bool check_nans = false;
  bool check_invalid_integers = false;
  bool check_all = false;
};

std::string hex(std::uint64_t value, int width) { return fmt::format("{:0{}X}", value, width == 1 ? 1 : (width + 3) / 4); }

void run_verify(const VerifyOptions& options) {
  const Function fn = parse_function(options.function);
  Context base;
  base.rounding = parse_rounding_mode(options.round);
  if (options.tininess == "before") base.tininess = Tininess::before_rounding;
  else if (options.tininess == "after") base.tininess = Tininess::after_rounding;
  else throw UsageError("unknown tininess '" + printable_text(options.tininess) + "': expected before or after");
  if (options.exact && options.not_exact) throw UsageError("give -exact or -notexact, not both");
  const bool exact = options.exact;
  const bool check_nans = options.check_nans || options.check_all;
  const bool check_invalid_integers = options.check_invalid_integers || options.check_all;

  std::size_t passed = 0, failed = 0, line_number = 0;
  std::string line;
  std::string report;
  LineReader lines(std::cin, "standard input");
  for (bool newline = false; lines.next(line, newline);) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::optional<TestFloatCase> parsed = parse_case_line(fn, line, line_number);
    if (!parsed) continue;
    const std::vector<std::uint64_t>& x = parsed->operands;
    const std::uint64_t expected = parsed->expected, expected_flags = parsed->expected_flags;
    const int operands = fn.operand_count();
    Context ctx = base;
    const std::uint64_t ours = evaluate(fn, x, exact, ctx);
    bool result_ok = ours == expected;
    if (fn.out.kind == Type::Kind::floating && !check_nans && is_nan(fn.out.format, ours) && is_nan(fn.out.format, expected))
      result_ok = true;
    if (fn.out.kind == Type::Kind::integer && !check_invalid_integers && (expected_flags & flag::invalid) != 0)
      result_ok = true;
    if (result_ok && ctx.flags == expected_flags) {
      ++passed;
      continue;
    }
    ++failed;
    std::string operand_text;
    for (int i = 0; i < operands; ++i) operand_text += (i ? " " : "") + hex(x[static_cast<std::size_t>(i)], fn.in.width);
    report += fmt::format("line {}: {} {}: ours {} flags {:02X} ({}), expected {} flags {:02X} ({})\n", line_number,
                          options.function, operand_text, hex(ours, fn.out.width), ctx.flags, describe_flags(ctx.flags),
                          hex(expected, fn.out.width), expected_flags, describe_flags(static_cast<std::uint8_t>(expected_flags)));
  }
  // No case at all is a broken pipeline (an empty file, a generator that failed), not a pass.
  if (passed + failed == 0)
    throw UsageError("no test cases on standard input: expected lines of hex operands, result and flags, such as testfloat_gen " +
                         options.function + " writes",
                     1);
  fmt::print("{}{} passed, {} failed\n", report, passed, failed);
  if (failed != 0) throw UsageError(fmt::format("{} of {} cases failed", failed, passed + failed), 1);
}

}  // namespace

void add_verify(CLI::App& app) {
  auto options = std::make_shared<VerifyOptions>();
  CLI::App* cmd = app.add_subcommand("verify", "Check Berkeley TestFloat case lines on stdin (testfloat_gen output) against fpscope");
  cmd->add_option("FUNCTION", options->function, "TestFloat function: f16_add, bf16_mul, f32_mulAdd, f16_lt_quiet, f32_to_f16, f16_to_i32, ...")->required();
  cmd->add_option("--round", options->round, "rounding mode (also -rnear_even -rnear_maxMag -rminMag -rmin -rmax -rodd)")->capture_default_str();
  cmd->add_option("--tininess", options->tininess, "before or after (also -tininessbefore -tininessafter)")->capture_default_str();
  cmd->add_flag("--exact", options->exact, "round-to-integer operations raise inexact (-exact)");
  cmd->add_flag("--not-exact", options->not_exact, "they never raise inexact (-notexact, the default)");
  cmd->add_flag("--check-nans", options->check_nans, "compare NaN results bit for bit (-checkNaNs)");
  cmd->add_flag("--check-invalid-integers", options->check_invalid_integers, "compare integer results of invalid operations (-checkInvInts)");
  cmd->add_flag("--check-all", options->check_all, "both of the above (-checkAll)");
  cmd->callback([options] { run_verify(*options); });
}

}  // namespace fpscope::cli
