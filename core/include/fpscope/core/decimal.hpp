// Exact decimal text: parsing numbers of any length without double rounding, printing every digit.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"

namespace fpscope {

// A number that could not be read; what() is one sentence naming the input.
class ParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A number as written: a decimal (`-0.1`, `6.1e-5`, `65520`), a C hex float (`0x1.8p-3`), a power
// of two as fpscope writes them (`2^-11`, `-2^10`), or a
// special (`inf`, `-infinity`, `nan`, `snan`). Finite values are kept exactly as
// digits * base^exponent, so nothing is rounded before the target format is known.
struct ParsedNumber {
  enum class Kind : std::uint8_t { finite, infinity, quiet_nan, signaling_nan };
  Kind kind = Kind::finite;
  bool negative = false;
  bool hex = false;          // digits are hex and exponent is a power of 2; else decimal, power of 10
  std::string digits;        // significant digits, no leading zeros; empty for zero
  long long exponent = 0;    // value = digits * (hex ? 2 : 10)^exponent
  std::string text;          // the input, for messages
};

// Throws ParseError for anything that is not a number in one of the forms above.
ParsedNumber parse_number(std::string_view text);

// The number correctly rounded into f under ctx (flags raised as for a conversion from an
// exact value: inexact, underflow, overflow).
std::uint64_t round_number(Format f, const ParsedNumber& number, Context& ctx);

// The number correctly rounded to an E8M0 scale code (e8m0.hpp: a power of two 2^-127 .. 2^127,
// or NaN for zero, negative numbers, NaN and overflow; saturation and flags as e8m0::from_float).
// Stochastic rounding draws against the number rounded to float32 (to odd): its probability is
// the exact one to within 2^-23.
std::uint8_t round_number_e8m0(const ParsedNumber& number, Context& ctx);

// parse_number + round_number, with a fast path for the common case: the text is first read
// as the nearest binary64 (std::from_chars, correctly rounded); when that double lies strictly
// between two points of f's rounding grid and off every midpoint (checked at twice f's
// precision, which also settles tininess after rounding), the text rounds to f exactly as
// the double does, flags included. Otherwise, and always for stochastic rounding, it takes
// the exact path. Throws ParseError like parse_number.
std::uint64_t round_text(Format f, std::string_view text, Context& ctx);

// Every digit of the value that bits of f stand for: "0.1000000000000000055511151231257827021181583404541015625".
// NaNs print as "nan"/"-nan" ("snan" when signalling), infinities as "inf"/"-inf".
std::string exact_decimal(Format f, std::uint64_t bits);

// The exact difference stored - written, as a decimal string with every digit, and the
// relative error |stored - written| / |written| (an approximation; inf when written is 0).
// Preconditions: number is finite and bits is a finite value of f.
struct ConversionError {
  std::string absolute;  // signed, exact
  double relative = 0;
};
ConversionError conversion_error(Format f, std::uint64_t bits, const ParsedNumber& number);

}  // namespace fpscope
