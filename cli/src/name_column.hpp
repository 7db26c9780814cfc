// The first column of analyze's tables: tensor names shown whole, however long (HuggingFace
// names run to 50 characters and differ only at their ends).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/core/printable_text.hpp"

namespace fpscope::cli {

// Widest a name column grows before names are abbreviated.
inline constexpr std::size_t max_name_column = 96;

// `text` made printable, at most `width` bytes: whole when it fits, else abbreviated from the left
// ("...h.11.attn.c_attn activation_gradient"), where long names repeat their common start, so
// that the layer and the kind at the end always show.
inline std::string name_cell(std::string_view text, std::size_t width) {
  std::string shown = printable_text(text, text.size());
  if (shown.size() <= width) return shown;
  std::size_t from = shown.size() - (width - 3);
  while (from < shown.size() && (static_cast<unsigned char>(shown[from]) & 0xC0) == 0x80) ++from;  // never half a UTF-8 sequence
  return "..." + shown.substr(from);
}

// A column as wide as the longest of `texts` (made printable), from `least` to max_name_column.
inline std::size_t name_column_width(const std::vector<std::string>& texts, std::size_t least) {
  std::size_t width = least;
  for (const std::string& t : texts) width = std::max(width, printable_text(t, t.size()).size());
  return std::min(width, max_name_column);
}

}  // namespace fpscope::cli
