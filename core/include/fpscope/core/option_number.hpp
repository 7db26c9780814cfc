// Numbers given as option values, read whole and range-checked: nothing is clamped or wrapped.
// Each throws std::invalid_argument with one sentence naming the option, the text and the range.
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fpscope/core/printable_text.hpp"

namespace fpscope {

// `text` as an integer in [min, max]; anything else (a sign where none fits, "1e3", "12abc", a
// value out of range, nothing at all) is refused.
template <std::integral T>
T parse_integer_option(std::string_view option, std::string_view text, T min, T max) {
  T value{};
  const std::string_view digits = !text.empty() && text.front() == '+' ? text.substr(1) : text;
  const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || result.ec != std::errc{} || result.ptr != digits.data() + digits.size() || value < min || value > max)
    throw std::invalid_argument(std::string(option) + " '" + printable_text(text) + "' is not a whole number from " + std::to_string(min) +
                                " to " + std::to_string(max));
  return value;
}

// `text` as a finite number > 0 that float32 holds (a learning rate, a loss scale).
inline float parse_positive_float_option(std::string_view option, std::string_view text) {
  double value = 0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || result.ec != std::errc{} || result.ptr != text.data() + text.size() || !(value > 0) ||
      !std::isfinite(static_cast<float>(value)) || static_cast<float>(value) == 0)
    throw std::invalid_argument(std::string(option) + " '" + printable_text(text) + "' is not a finite positive number that float32 holds");
  return static_cast<float>(value);
}

// `text` as a finite positive float32, exactly: a decimal (rounded to the nearest float32, so the
// shortest digits fpscope prints give back the same bits) or a C hex float ("0x1.5p+9").
// Anything else is refused, saying `what` the value should be.
inline float parse_positive_float32_option(std::string_view option, std::string_view text, std::string_view what) {
  float value = 0;
  bool whole = false;
  if (text.size() > 2 && (text.substr(0, 2) == "0x" || text.substr(0, 2) == "0X")) {
    // from_chars reads hex floats without their prefix.
    const auto hex = std::from_chars(text.data() + 2, text.data() + text.size(), value, std::chars_format::hex);
    whole = hex.ec == std::errc{} && hex.ptr == text.data() + text.size();
  } else {
    const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
    whole = !text.empty() && result.ec == std::errc{} && result.ptr == text.data() + text.size();
  }
  if (!whole || !(value > 0) || !std::isfinite(value))
    throw std::invalid_argument(std::string(option) + " '" + printable_text(text) + "' is not a finite positive float32 (" +
                                std::string(what) + ")");
  return value;
}

}  // namespace fpscope
