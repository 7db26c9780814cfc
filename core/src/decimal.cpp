// Exact decimal text <-> binary floating point, on BigUint.
#include "fpscope/core/decimal.hpp"
#include "fpscope/core/e8m0.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>

#include "big_uint.hpp"
#include "fpscope/core/bits.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/printable_text.hpp"
#include "fpscope/core/round_pack.hpp"

namespace fpscope {

namespace {

using detail::BigUint;

// A decimal D * 10^e with more significant digits than this rounds like the one whose digits are
// D's first max_significant_decimal_digits followed by a single 1 (its last digit is nonzero:
// parse_number strips trailing zeros, so the digits dropped are not all zero). Both lie strictly
// inside the same interval between two numbers of this many digits, and every point where a
// rounding decision changes -- a representable value or a midpoint of any format up to binary64,
// the tininess and overflow thresholds -- has at most 767 significant digits. 1100 also covers
// the 126 bits round_pack sees, for stochastic rounding, down to 2^-1200; below that, every value
// rounds to zero or the smallest subnormal with a probability under 2^-100.
constexpr std::size_t max_significant_decimal_digits = 1100;

std::string lowercase(std::string_view text) {
  std::string result(text);
  for (char& c : result) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return result;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

[[noreturn]] void fail(std::string_view text, std::string_view why) {
  throw ParseError("'" + printable_text(text) + "' is not a number: " + std::string(why));
}

// Reads an optionally signed decimal exponent, saturating far beyond any format's range.
long long parse_exponent(std::string_view original, std::string_view digits) {
  std::size_t i = 0;
  bool negative = false;
  if (i < digits.size() && (digits[i] == '+' || digits[i] == '-')) negative = digits[i++] == '-';
  if (i == digits.size()) fail(original, "the exponent has no digits");
  long long value = 0;
  for (; i < digits.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(digits[i]))) fail(original, "unexpected character in the exponent");
    value = std::min<long long>(value * 10 + (digits[i] - '0'), 1'000'000'000'000LL);
  }
  return negative ? -value : value;
}

// The value digits * base^exponent as an exact binary significand and exponent for round_pack:
// sig (up to 127 bits, sticky jammed into bit 0 when bits were dropped) * 2^binary_exponent.
struct BinaryValue {
  u128 sig = 0;
  long long exponent = 0;
};

BinaryValue top_bits(const BigUint& value, long long exponent) {
  const int length = value.bit_length();
  if (length <= 126) return {value.bits_from(0), exponent};
  const int low = length - 126;
  const u128 sig = value.bits_from(low) | (value.any_bit_below(low) ? 1 : 0);
  return {sig, exponent + low};
}

BinaryValue decimal_to_binary(const ParsedNumber& number) {
  BigUint digits;
  for (const char c : number.digits) digits.multiply_add(10, static_cast<std::uint32_t>(c - '0'));
  if (number.exponent >= 0) {
    digits.multiply_pow10(number.exponent);
    return top_bits(digits, 0);
  }
  // digits / 10^k = digits / (5^k * 2^k): divide by 5^k with enough quotient bits.
  const long long k = -number.exponent;
  BigUint divisor(1);
  divisor.multiply_pow5(k);
  long long exponent = -k;
  const int surplus = digits.bit_length() - divisor.bit_length();
  if (surplus < 130) {
    digits.shift_left(130 - surplus);
    exponent -= 130 - surplus;
  } else {
    divisor.shift_left(surplus - 130);
    exponent += surplus - 130;
  }
  bool remainder_nonzero = false;
  const BigUint quotient = BigUint::divide(digits, divisor, remainder_nonzero);
  BinaryValue result = top_bits(quotient, exponent);
  if (remainder_nonzero) result.sig |= 1;  // the quotient has >= 129 bits: far from rounding
  return result;
}

BinaryValue hex_to_binary(const ParsedNumber& number) {
  BinaryValue result{0, number.exponent};
  bool sticky = false;
  for (const char c : number.digits) {
    const auto digit = static_cast<unsigned>(hex_value(c));
    if (result.sig >> 120 == 0) {
      result.sig = (result.sig << 4) | digit;
    } else {  // keep 121..124 leading bits, jam the rest
      sticky |= digit != 0;
      result.exponent += 4;
    }
  }
  if (sticky) result.sig |= 1;
  return result;
}

// digits and base-10 scale: value = N / 10^scale, exactly.
struct ScaledDecimal {
  BigUint numerator;
  long long scale = 0;
};

ScaledDecimal to_scaled_decimal(bool, int exponent, u128 sig) {
  ScaledDecimal result{BigUint(sig), 0};
  if (exponent >= 0) {
    result.numerator.shift_left(exponent);
  } else {
    result.numerator.multiply_pow5(-exponent);  // sig * 2^e = sig * 5^-e / 10^-e
    result.scale = -exponent;
  }
  return result;
}

std::string format_scaled(const BigUint& numerator, long long scale, bool negative) {
  std::string digits = numerator.to_decimal();
  if (scale > 0) {
    if (static_cast<long long>(digits.size()) <= scale)
      digits.insert(0, static_cast<std::size_t>(scale - static_cast<long long>(digits.size()) + 1), '0');
    digits.insert(digits.end() - static_cast<std::ptrdiff_t>(scale), '.');
    while (digits.back() == '0') digits.pop_back();
    if (digits.back() == '.') digits.pop_back();
  }
  return (negative ? "-" : "") + digits;
}

void rescale(ScaledDecimal& value, long long scale) {
  if (value.scale < scale) {
    value.numerator.multiply_pow10(scale - value.scale);
    value.scale = scale;
  }
}

}  // namespace

ParsedNumber parse_number(std::string_view text) {
  ParsedNumber number;
  number.text = std::string(text);
  if (text.empty()) fail(text, "it is empty");
  std::size_t i = 0;
  if (text[0] == '+' || text[0] == '-') {
    number.negative = text[0] == '-';
    i = 1;
  }
  const std::string_view rest = text.substr(i);
  if (rest.size() <= 8) {
    const std::string word = lowercase(rest);
    if (word == "inf" || word == "infinity") {
      number.kind = ParsedNumber::Kind::infinity;
      return number;
    }
    if (word == "nan" || word == "qnan") {
      number.kind = ParsedNumber::Kind::quiet_nan;
      return number;
    }
    if (word == "snan") {
      number.kind = ParsedNumber::Kind::signaling_nan;
      return number;
    }
  }
  // A power of two as fpscope writes them: 2^-11, 2^10.
  if (rest.size() > 2 && rest[0] == '2' && rest[1] == '^') {
    number.hex = true;
    number.digits.assign(1, '1');  // (not = "1": GCC 12 warns of a memcpy it cannot bound, -Wrestrict)
    number.exponent = parse_exponent(text, rest.substr(2));
    return number;
  }
  const auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  number.hex = rest.size() > 2 && rest[0] == '0' && lower(rest[1]) == 'x';
  std::size_t p = number.hex ? 2 : 0;
  const char exponent_mark = number.hex ? 'p' : 'e';
  bool seen_point = false, seen_digit = false;
  long long fraction_digits = 0;
  number.digits.reserve(rest.size());
  const auto is_digit = [&](char c) { return (c >= '0' && c <= '9') || (number.hex && hex_value(lower(c)) >= 0); };
  while (p < rest.size() && lower(rest[p]) != exponent_mark) {
    if (rest[p] == '.') {
      if (seen_point) fail(text, "it has two decimal points");
      seen_point = true;
      ++p;
      continue;
    }
    // A run of digits at once: numbers of millions of digits are read in linear time.
    std::size_t end = p;
    while (end < rest.size() && is_digit(rest[end])) ++end;
    if (end == p) fail(text, number.hex ? "expected a hex float such as 0x1.8p-3" : "expected a decimal such as 0.1 or 6.1e-5, a hex float, 2^k, inf or nan");
    seen_digit = true;
    if (seen_point) fraction_digits += static_cast<long long>(end - p);
    std::size_t first = p;
    if (number.digits.empty())  // leading zeros are not significant
      while (first < end && rest[first] == '0') ++first;
    if (number.hex) for (std::size_t k = first; k < end; ++k) number.digits.push_back(lower(rest[k]));
    else number.digits.append(rest.substr(first, end - first));
    p = end;
  }
  if (!seen_digit) fail(text, "it has no digits");
  long long exponent = 0;
  if (p < rest.size()) exponent = parse_exponent(text, rest.substr(p + 1));
  // Drop trailing zeros of the digit string into the exponent (keeps big numbers small).
  long long trailing = 0;
  while (!number.digits.empty() && number.digits.back() == '0') {
    number.digits.pop_back();
    ++trailing;
  }
  number.exponent = number.hex ? exponent + 4 * (trailing - fraction_digits) : exponent + trailing - fraction_digits;
  return number;
}

std::uint8_t round_number_e8m0(const ParsedNumber& number, Context& ctx) {
  // Through float32 rounded to odd: its 24 bits are more than E8M0's one significant bit plus
  // two, so rounding the odd float32 to a power of two gives what rounding the exact number
  // would, in every mode (round to odd's property: its last bit keeps whether anything was
  // dropped). Rounding to the nearest float32 first would not: 1.49999999999 would become 1.5,
  // a tie, and go up to 2.
  Context odd;
  odd.rounding = RoundingMode::odd;
  const auto bits = static_cast<std::uint32_t>(round_number(formats::fp32, number, odd));
  return e8m0::from_float(bits_float(bits), ctx);
}

std::uint64_t round_number(Format f, const ParsedNumber& number, Context& ctx) {
  switch (number.kind) {
    case ParsedNumber::Kind::infinity:
      return convert(formats::fp64, f, infinity(formats::fp64, number.negative), ctx);
    case ParsedNumber::Kind::quiet_nan:
      if (!f.has_nan()) ctx.raise(flag::invalid);  // a zero of its sign: the format has no NaN (nan.hpp)
      return signed_zero(f, number.negative) | f.quiet_nan_bits();
    case ParsedNumber::Kind::signaling_nan:
      if (!f.has_nan()) ctx.raise(flag::invalid);
      return f.flavour == Flavour::ieee ? signed_zero(f, number.negative) | f.exponent_mask() | 1
                                        : signed_zero(f, number.negative) | f.quiet_nan_bits();
    case ParsedNumber::Kind::finite: break;
  }
  if (number.digits.empty()) return signed_zero(f, number.negative);
  // Magnitudes far outside binary64's range are decided without big arithmetic: a value
  // below 2^-2000 or above 2^2000 rounds like any other value that far out.
  const long long digit_count = static_cast<long long>(number.digits.size());
  const long long magnitude = number.hex ? (number.exponent + 4 * digit_count) : (number.exponent + digit_count) * 4;
  if (magnitude > 8000) return round_pack(f, number.negative, 8000, 1, ctx);
  if (magnitude < -8000) return round_pack(f, number.negative, -8000, 1, ctx);
  if (!number.hex && number.digits.size() > max_significant_decimal_digits) {
    // Only the first digits can decide the rounding (see max_significant_decimal_digits): the rest
    // become one sticky digit, so a number of any length rounds in time linear in its length.
    ParsedNumber shortened;
    shortened.negative = number.negative;
    shortened.digits = number.digits.substr(0, max_significant_decimal_digits);
    shortened.digits += '1';
    shortened.exponent = number.exponent + static_cast<long long>(number.digits.size()) - static_cast<long long>(shortened.digits.size());
    const BinaryValue value = decimal_to_binary(shortened);
    return round_pack(f, number.negative, static_cast<int>(value.exponent), value.sig, ctx);
  }
  const BinaryValue value = number.hex ? hex_to_binary(number) : decimal_to_binary(number);
  return round_pack(f, number.negative, static_cast<int>(value.exponent), value.sig, ctx);
}

namespace {

// True when the double d is neither a point of f's grid in d's binade nor a midpoint, at
// one bit finer than f's precision (so neither are the grid, its midpoints, 2^emin and the
// tininess boundary). Then every real number that rounds to d rounds like d in f.
bool strictly_inside_grid_cell(Format f, double d) {
  const std::uint64_t bits = double_bits(d);
  const std::uint64_t biased = (bits >> 52) & 0x7FF;
  if (biased == 0 || biased == 0x7FF) return false;  // zero, subnormal double, inf, nan
  const int binade = static_cast<int>(biased) - 1023;
  const std::uint64_t sig = (bits & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
  const int quantum = (binade < f.emin() ? f.emin() : binade) - f.mantissa_bits - 1;  // finer grid
  const int shift = quantum - (binade - 52);
  if (shift <= 1) return false;  // the double is on the finer grid
  if (shift >= 64) return true;  // far below the grid: nonzero and below any midpoint
  const std::uint64_t dropped = sig & ((std::uint64_t{1} << shift) - 1);
  return dropped != 0 && dropped != (std::uint64_t{1} << (shift - 1));
}

}  // namespace

std::uint64_t round_text(Format f, std::string_view text, Context& ctx) {
  // The fast path is for the everyday number; one longer than a double's 17 digits and an exponent
  // goes straight to the exact path (from_chars would read it all once more).
  if (ctx.rounding != RoundingMode::stochastic && f.mantissa_bits <= 50 && !text.empty() && text.size() <= 64 &&
      text.find_first_of("xXpP") == std::string_view::npos) {
    std::string_view digits = text;
    if (digits.front() == '+') digits.remove_prefix(1);  // from_chars takes '-' only
    // One sign at most, then a digit or a point: "+-5" is not a number (fuzzing found the fast
    // path taking it), and "inf"/"nan" go to parse_number, which knows their spellings.
    const std::size_t body = !digits.empty() && digits.front() == '-' && digits.data() == text.data() ? 1 : 0;
    const bool plain = digits.size() > body && (std::isdigit(static_cast<unsigned char>(digits[body])) || digits[body] == '.');
    double d = 0;
    if (plain) {
      const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), d);
      if (result.ec == std::errc{} && result.ptr == digits.data() + digits.size() && strictly_inside_grid_cell(f, d))
        return convert(formats::fp64, f, double_bits(d), ctx);
    }
  }
  return round_number(f, parse_number(text), ctx);
}

std::string exact_decimal(Format f, std::uint64_t bits) {
  const bool negative = sign_of(f, bits);
  // FNUZ's one NaN is the pattern of -0: a NaN without a sign.
  if (is_nan(f, bits)) return std::string(negative && f.flavour != Flavour::fnuz ? "-" : "") + (is_signaling_nan(f, bits) ? "snan" : "nan");
  if (is_infinite(f, bits)) return negative ? "-inf" : "inf";
  if (is_zero(f, bits)) return negative ? "-0" : "0";
  const Unpacked value = unpack_finite(f, bits);
  const ScaledDecimal scaled = to_scaled_decimal(negative, value.exponent, value.significand);
  return format_scaled(scaled.numerator, scaled.scale, negative);
}

ConversionError conversion_error(Format f, std::uint64_t bits, const ParsedNumber& number) {
  // Both values as N / 10^scale on a common scale; the written one may be a hex float.
  const Unpacked stored_value = unpack_finite(f, bits);
  ScaledDecimal stored = to_scaled_decimal(false, stored_value.exponent, stored_value.significand);
  ScaledDecimal written;
  if (number.hex) {
    BigUint digits;
    for (const char c : number.digits) digits.multiply_add(16, static_cast<std::uint32_t>(hex_value(c)));
    written.numerator = digits;
    if (number.exponent >= 0) {
      written.numerator.shift_left(static_cast<int>(number.exponent));
    } else {
      written.numerator.multiply_pow5(-number.exponent);
      written.scale = -number.exponent;
    }
  } else {
    for (const char c : number.digits) written.numerator.multiply_add(10, static_cast<std::uint32_t>(c - '0'));
    if (number.exponent >= 0) written.numerator.multiply_pow10(number.exponent);
    else written.scale = -number.exponent;
  }
  const long long scale = std::max(stored.scale, written.scale);
  rescale(stored, scale);
  rescale(written, scale);
  // Signed magnitudes: compare and subtract.
  const bool stored_negative = stored_value.sign && !stored.numerator.is_zero();
  const bool written_negative = number.negative && !written.numerator.is_zero();
  BigUint difference;
  bool difference_negative = false;
  if (stored_negative == written_negative) {
    const int order = compare(stored.numerator, written.numerator);
    difference = order >= 0 ? stored.numerator : written.numerator;
    difference.subtract(order >= 0 ? written.numerator : stored.numerator);
    difference_negative = (order < 0) != stored_negative;
  } else {
    difference = stored.numerator;
    difference.add(written.numerator);
    difference_negative = stored_negative;
  }
  ConversionError error;
  error.absolute = difference.is_zero() ? "0" : format_scaled(difference, scale, difference_negative);
  // |difference| / |written| from the two numerators (on one scale, so it cancels), each as its
  // leading 64 bits times a power of two: doubles cannot hold magnitudes below binary64's range
  // (a binary64 subnormal's error, a written 1e-400), whose ratio would come out 0 or NaN.
  const auto leading = [](const BigUint& n) {
    const int low = std::max(0, n.bit_length() - 64);
    return std::pair{static_cast<double>(static_cast<std::uint64_t>(n.bits_from(low))), low};
  };
  if (written.numerator.is_zero()) {
    error.relative = difference.is_zero() ? 0.0 : INFINITY;
  } else {
    const auto [difference_leading, difference_power] = leading(difference);
    const auto [written_leading, written_power] = leading(written.numerator);
    error.relative = std::ldexp(difference_leading / written_leading, difference_power - written_power);
  }
  return error;
}

}  // namespace fpscope
