// Text from a user or a file, made safe to quote inside a one-line error message.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fpscope {

// `text` as a message may show it: control characters (NUL, newline, ESC, DEL, U+0080..U+009F)
// and bytes that are not UTF-8 written as \0, \n, \t, \xNN, so a message stays one line and never
// drives the terminal; longer than `max_bytes`, shown by its start and its length
// ("1111... (3000000 characters)").
std::string printable_text(std::string_view text, std::size_t max_bytes = 64);

}  // namespace fpscope
