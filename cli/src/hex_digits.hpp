// Hex digits to an integer, shared by the commands that read bit patterns.
#pragma once

#include <cstdint>
#include <string_view>

namespace fpscope::cli {

// Reads 1 to 16 hex digits (no prefix) into value; false on anything else, or when the value
// does not fit in `width` bits.
inline bool parse_hex_digits(std::string_view digits, int width, std::uint64_t& value) {
  if (digits.empty() || digits.size() > 16) return false;
  value = 0;
  for (const char c : digits) {
    unsigned d;
    if (c >= '0' && c <= '9') d = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f') d = static_cast<unsigned>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') d = static_cast<unsigned>(c - 'A' + 10);
    else return false;
    value = (value << 4) | d;
  }
  return width >= 64 || (value >> width) == 0;
}

}  // namespace fpscope::cli
