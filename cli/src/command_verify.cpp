// `fpscope verify FUNCTION`: checks Berkeley TestFloat case lines on stdin against fpscope.
#include <fmt/core.h>

#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "hex_digits.hpp"
#include "fpscope/core/arithmetic.hpp"
#include "fpscope/core/compare.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/integral.hpp"
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

// A TestFloat operand or result type: a float format, an integer, or a boolean.
struct Type {
  enum class Kind { floating, integer, boolean } kind = Kind::floating;
  Format format{};
  int width = 0;  // bits: format width, integer width, or 1 for booleans
  bool is_signed = true;
};

std::optional<Type> parse_type(const std::string& name) {
  if (name == "f16") return Type{Type::Kind::floating, formats::fp16, 16};
  if (name == "bf16") return Type{Type::Kind::floating, formats::bf16, 16};
  if (name == "f32") return Type{Type::Kind::floating, formats::fp32, 32};
  if (name == "f64") return Type{Type::Kind::floating, formats::fp64, 64};
  if (name == "i32") return Type{Type::Kind::integer, {}, 32, true};
  if (name == "i64") return Type{Type::Kind::integer, {}, 64, true};
  if (name == "ui32") return Type{Type::Kind::integer, {}, 32, false};
  if (name == "ui64") return Type{Type::Kind::integer, {}, 64, false};
  return std::nullopt;
}

enum class Operation {
  add, sub, mul, div, sqrt, mul_add, eq, lt, le, eq_signaling, le_quiet, lt_quiet, round_to_int, convert
};

struct Function {
  Operation operation = Operation::add;
  Type in, out;
  bool round_toward_zero = false;  // the _r_minMag conversions
  int operand_count() const {
    switch (operation) {
      case Operation::sqrt: case Operation::round_to_int: case Operation::convert: return 1;
      case Operation::mul_add: return 3;
      default: return 2;
    }
  }
};

Function parse_function(const std::string& name) {
  const std::string expected =
      "expected a TestFloat function such as f16_add, f32_mulAdd, bf16_lt_quiet, f16_roundToInt or f32_to_f16 "
      "(formats f16 bf16 f32 f64; conversions also to and from i32 i64 ui32 ui64)";
  Function function;
  const auto to = name.find("_to_");
  if (to != std::string::npos) {
    std::string target = name.substr(to + 4);
    const std::string suffix = "_r_minMag";
    if (target.size() > suffix.size() && target.compare(target.size() - suffix.size(), suffix.size(), suffix) == 0) {
      function.round_toward_zero = true;
      target.resize(target.size() - suffix.size());
    }
    const auto in = parse_type(name.substr(0, to));
    const auto out = parse_type(target);
    if (!in || !out || (in->kind == Type::Kind::integer && out->kind == Type::Kind::integer))
      throw UsageError("unknown function '" + name + "': " + expected);
    function.operation = Operation::convert;
    function.in = *in;
    function.out = *out;
    return function;
  }
  const auto underscore = name.find('_');
  const auto type = underscore == std::string::npos ? std::nullopt : parse_type(name.substr(0, underscore));
  if (!type || type->kind != Type::Kind::floating) throw UsageError("unknown function '" + name + "': " + expected);
  static const std::vector<std::pair<std::string, Operation>> operations{
      {"add", Operation::add}, {"sub", Operation::sub}, {"mul", Operation::mul}, {"div", Operation::div},
      {"sqrt", Operation::sqrt}, {"mulAdd", Operation::mul_add}, {"eq", Operation::eq}, {"lt", Operation::lt},
      {"le", Operation::le}, {"eq_signaling", Operation::eq_signaling}, {"le_quiet", Operation::le_quiet},
      {"lt_quiet", Operation::lt_quiet}, {"roundToInt", Operation::round_to_int}};
  const std::string op = name.substr(underscore + 1);
  for (const auto& [text, operation] : operations) {
    if (op != text) continue;
    function.operation = operation;
    function.in = *type;
    const bool comparison = operation >= Operation::eq && operation <= Operation::lt_quiet;
    function.out = comparison ? Type{Type::Kind::boolean, {}, 1} : *type;
    return function;
  }
  throw UsageError("unknown function '" + name + "': " + expected);
}

bool parse_hex(const std::string& token, int width, std::uint64_t& value) { return parse_hex_digits(token, width, value); }

std::uint64_t evaluate(const Function& fn, const std::vector<std::uint64_t>& x, bool exact, Context& ctx) {
  Format f = fn.in.format;
  switch (fn.operation) {
    case Operation::add: return add(f, x[0], x[1], ctx);
    case Operation::sub: return sub(f, x[0], x[1], ctx);
    case Operation::mul: return mul(f, x[0], x[1], ctx);
    case Operation::div: return div(f, x[0], x[1], ctx);
    case Operation::sqrt: return fpscope::sqrt(f, x[0], ctx);
    case Operation::mul_add: return fma(f, x[0], x[1], x[2], ctx);
    case Operation::eq: return eq(f, x[0], x[1], ctx);
    case Operation::lt: return lt(f, x[0], x[1], ctx);
    case Operation::le: return le(f, x[0], x[1], ctx);
    case Operation::eq_signaling: return eq_signaling(f, x[0], x[1], ctx);
    case Operation::le_quiet: return le_quiet(f, x[0], x[1], ctx);
    case Operation::lt_quiet: return lt_quiet(f, x[0], x[1], ctx);
    case Operation::round_to_int: return round_to_integral(f, x[0], exact, ctx);
    case Operation::convert: {
      if (fn.round_toward_zero) ctx.rounding = RoundingMode::toward_zero;
      if (fn.in.kind == Type::Kind::integer) {
        const std::uint64_t v = x[0];
        if (!fn.in.is_signed) return from_unsigned(fn.out.format, v, ctx);
        const std::int64_t s = fn.in.width == 32 ? static_cast<std::int32_t>(static_cast<std::uint32_t>(v)) : static_cast<std::int64_t>(v);
        return from_signed(fn.out.format, s, ctx);
      }
      if (fn.out.kind == Type::Kind::integer) return to_integer(f, x[0], fn.out.width, fn.out.is_signed, exact, ctx);
      return convert(f, fn.out.format, x[0], ctx);
    }
  }
  return 0;
}

std::string hex(std::uint64_t value, int width) { return fmt::format("{:0{}X}", value, width == 1 ? 1 : (width + 3) / 4); }

void run_verify(const VerifyOptions& options) {
  const Function fn = parse_function(options.function);
  Context base;
  base.rounding = parse_rounding_mode(options.round);
  if (options.tininess == "before") base.tininess = Tininess::before_rounding;
  else if (options.tininess == "after") base.tininess = Tininess::after_rounding;
  else throw UsageError("unknown tininess '" + options.tininess + "': expected before or after");
  if (options.exact && options.not_exact) throw UsageError("give -exact or -notexact, not both");
  const bool exact = options.exact;
  const bool check_nans = options.check_nans || options.check_all;
  const bool check_invalid_integers = options.check_invalid_integers || options.check_all;

  std::size_t passed = 0, failed = 0, line_number = 0;
  std::string line;
  std::string report;
  while (std::getline(std::cin, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream tokens(line);
    std::vector<std::string> fields;
    for (std::string t; tokens >> t;) fields.push_back(t);
    if (fields.empty()) continue;
    const int operands = fn.operand_count();
    std::vector<std::uint64_t> x(static_cast<std::size_t>(operands));
    std::uint64_t expected = 0, expected_flags = 0;
    bool well_formed = static_cast<int>(fields.size()) == operands + 2;
    for (int i = 0; well_formed && i < operands; ++i) well_formed = parse_hex(fields[static_cast<std::size_t>(i)], fn.in.width, x[static_cast<std::size_t>(i)]);
    well_formed = well_formed && parse_hex(fields[static_cast<std::size_t>(operands)], fn.out.width, expected) &&
                  parse_hex(fields[static_cast<std::size_t>(operands + 1)], 8, expected_flags) && (expected_flags & ~0x1Fu) == 0;
    if (!well_formed) {
      // Bad input, not a failed case: one sentence, and no report (nothing on stdout).
      std::string shown;
      for (char c : line.substr(0, 60)) shown += (c >= 0x20 && c < 0x7F) ? c : '?';
      throw UsageError(fmt::format("line {}: malformed case '{}{}': expected {} operand(s), a result and flags in hex", line_number,
                                   shown, line.size() > 60 ? "..." : "", operands));
    }
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
