// TestFloat case lines: function names, case parsing, evaluation through the core emulator.
#include "testfloat_case.hpp"
#include "fpscope/core/printable_text.hpp"

#include <fmt/core.h>

#include <sstream>

#include "usage_error.hpp"
#include "fpscope/core/arithmetic.hpp"
#include "fpscope/core/compare.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/integral.hpp"
#include "hex_digits.hpp"

namespace fpscope::cli {

namespace {

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

}  // namespace

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
      throw UsageError("unknown function '" + printable_text(name) + "': " + expected);
    function.operation = Operation::convert;
    function.in = *in;
    function.out = *out;
    return function;
  }
  const auto underscore = name.find('_');
  const auto type = underscore == std::string::npos ? std::nullopt : parse_type(name.substr(0, underscore));
  if (!type || type->kind != Type::Kind::floating) throw UsageError("unknown function '" + printable_text(name) + "': " + expected);
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
  throw UsageError("unknown function '" + printable_text(name) + "': " + expected);
}

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

std::optional<TestFloatCase> parse_case_line(const Function& fn, std::string_view line, std::size_t line_number) {
  std::istringstream tokens{std::string(line)};
  std::vector<std::string> fields;
  for (std::string t; tokens >> t;) fields.push_back(t);
  if (fields.empty()) return std::nullopt;
  const int operands = fn.operand_count();
  TestFloatCase c;
  c.operands.resize(static_cast<std::size_t>(operands));
  bool well_formed = static_cast<int>(fields.size()) == operands + 2;
  for (int i = 0; well_formed && i < operands; ++i)
    well_formed = parse_hex_digits(fields[static_cast<std::size_t>(i)], fn.in.width, c.operands[static_cast<std::size_t>(i)]);
  well_formed = well_formed && parse_hex_digits(fields[static_cast<std::size_t>(operands)], fn.out.width, c.expected) &&
                parse_hex_digits(fields[static_cast<std::size_t>(operands + 1)], 8, c.expected_flags) && (c.expected_flags & ~0x1Fu) == 0;
  if (well_formed) return c;
  // Bad input, not a failed case: one sentence.
  std::string shown;
  for (char ch : line.substr(0, 60)) shown += (ch >= 0x20 && ch < 0x7F) ? ch : '?';
  throw UsageError(fmt::format("line {}: malformed case '{}{}': expected {} operand(s), a result and flags in hex", line_number, shown,
                               line.size() > 60 ? "..." : "", operands), 1);
}

}  // namespace fpscope::cli
