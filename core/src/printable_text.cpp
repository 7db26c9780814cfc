// printable_text: escaping and shortening user text for messages.
#include "fpscope/core/printable_text.hpp"

#include <cstdint>

namespace fpscope {

namespace {

void append_escaped_byte(std::string& out, unsigned char byte) {
  static constexpr char hex[] = "0123456789abcdef";
  switch (byte) {
    case '\0': out += "\\0"; return;
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    default:
      out += "\\x";
      out += hex[byte >> 4];
      out += hex[byte & 15];
  }
}

// The length of the well-formed UTF-8 sequence at text[i] (2..4), or 0 when it is not one.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  std::size_t length = 0;
  std::uint32_t code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) length = 2, code = lead & 0x1F;
  else if (lead >= 0xE0 && lead <= 0xEF) length = 3, code = lead & 0x0F;
  else if (lead >= 0xF0 && lead <= 0xF4) length = 4, code = lead & 0x07;
  else return 0;
  if (i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  const bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
  const bool surrogate = code >= 0xD800 && code <= 0xDFFF;
  const bool c1_control = code >= 0x80 && code <= 0x9F;
  if (overlong || surrogate || c1_control || code > 0x10FFFF) return 0;
  return length;
}

void append_printable(std::string& out, std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7F) {
      out += text[i++];
    } else if (const std::size_t length = byte >= 0x80 ? utf8_sequence_length(text, i) : 0; length != 0) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      append_escaped_byte(out, byte);
      ++i;
    }
  }
}

}  // namespace

std::string printable_text(std::string_view text, std::size_t max_bytes) {
  std::string out;
  if (text.size() <= max_bytes) {
    append_printable(out, text);
    return out;
  }
  std::size_t shown = max_bytes * 5 / 8;
  // Never cut a UTF-8 sequence in two.
  while (shown > 0 && (static_cast<unsigned char>(text[shown]) & 0xC0) == 0x80) --shown;
  append_printable(out, text.substr(0, shown));
  out += "... (" + std::to_string(text.size()) + " characters)";
  return out;
}

}  // namespace fpscope
