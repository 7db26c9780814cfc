// TestFloat case lines: the function names testfloat_gen writes, parsing a case, evaluating it with fpscope.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"

namespace fpscope::cli {

// A TestFloat operand or result type: a float format, an integer, or a boolean.
struct Type {
  enum class Kind { floating, integer, boolean } kind = Kind::floating;
  Format format{};
  int width = 0;  // bits: format width, integer width, or 1 for booleans
  bool is_signed = true;
};

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

// "f16_add", "f32_to_i64_r_minMag", ...; throws UsageError naming the text.
Function parse_function(const std::string& name);

// One case: operands, the expected result and flags, as testfloat_gen writes them in hex.
struct TestFloatCase {
  std::vector<std::uint64_t> operands;
  std::uint64_t expected = 0;
  std::uint64_t expected_flags = 0;
};
// nullopt for a blank line; throws UsageError ("line N: malformed case ...") for anything else
// that is not operand_count() operands, a result and flags, each in hex and of its width.
std::optional<TestFloatCase> parse_case_line(const Function& fn, std::string_view line, std::size_t line_number);

// fpscope's result for the operands (flags into ctx).
std::uint64_t evaluate(const Function& fn, const std::vector<std::uint64_t>& x, bool exact, Context& ctx);

}  // namespace fpscope::cli
