// A count as a share of a whole, for the tables: "12.34%" at `decimals` places, "-" of nothing.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace fpscope::gui {

inline std::string share_text(std::uint64_t part, std::uint64_t whole, int decimals) {
  return whole == 0 ? std::string("-") : fmt::format("{:.{}f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole), decimals);
}

}  // namespace fpscope::gui
