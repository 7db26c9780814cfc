// Numbers given as the CLI's option values: core's readers (option_number.hpp), their refusals
// as usage errors.
#pragma once

#include <concepts>
#include <stdexcept>
#include <string_view>

#include "commands.hpp"
#include "fpscope/core/option_number.hpp"

namespace fpscope::cli {

template <std::integral T>
T parse_integer_option(std::string_view option, std::string_view text, T min, T max) {
  try {
    return fpscope::parse_integer_option<T>(option, text, min, max);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

inline float parse_positive_float_option(std::string_view option, std::string_view text) {
  try {
    return fpscope::parse_positive_float_option(option, text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

inline float parse_positive_float32_option(std::string_view option, std::string_view text, std::string_view what) {
  try {
    return fpscope::parse_positive_float32_option(option, text, what);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

}  // namespace fpscope::cli
