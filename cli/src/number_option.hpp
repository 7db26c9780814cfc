// Numbers given as option values, read whole and range-checked: nothing is clamped or wrapped.
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <string>
#include <string_view>

#include "commands.hpp"
#include "fpscope/core/printable_text.hpp"

namespace fpscope::cli {

// `text` as an integer in [min, max]; anything else (a sign where none fits, "1e3", "12abc", a
// value out of range) is a UsageError naming the option and the range.
template <std::integral T>
T parse_integer_option(std::string_view option, std::string_view text, T min, T max) {
  T value{};
  const std::string_view digits = !text.empty() && text.front() == '+' ? text.substr(1) : text;
  const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || result.ec != std::errc{} || result.ptr != digits.data() + digits.size() || value < min || value > max)
    throw UsageError(std::string(option) + " '" + printable_text(text) + "' is not a whole number from " + std::to_string(min) + " to " +
                     std::to_string(max));
  return value;
}

// `text` as a finite number > 0 that float32 holds (a learning rate, a loss scale).
inline float parse_positive_float_option(std::string_view option, std::string_view text) {
  double value = 0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || result.ec != std::errc{} || result.ptr != text.data() + text.size() || !(value > 0) ||
      !std::isfinite(static_cast<float>(value)) || static_cast<float>(value) == 0)
    throw UsageError(std::string(option) + " '" + printable_text(text) + "' is not a finite positive number that float32 holds");
  return static_cast<float>(value);
}

}  // namespace fpscope::cli
