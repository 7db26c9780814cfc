// One way the engine reads a named choice (activation, precision, optimizer, recipe): the choice
// whose name is `name`, or std::invalid_argument naming the text and listing every name.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fpscope/core/printable_text.hpp"

namespace fpscope {

template <typename Choice, std::size_t N, typename Name>
Choice parse_choice(std::string_view name, const Choice (&choices)[N], Name name_of, const char* what) {
  std::string expected;
  for (std::size_t i = 0; i < N; ++i) {
    if (name_of(choices[i]) == name) return choices[i];
    expected += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + name_of(choices[i]);
  }
  throw std::invalid_argument(std::string("unknown ") + what + " '" + printable_text(name) + "': expected " + expected);
}

}  // namespace fpscope
