// Terminal helpers for the CLI: whether to colour, and ANSI colours for bit fields.
#pragma once

#include <string>
#include <string_view>

namespace fpscope::cli {

enum class ColorChoice { automatic, always, never };

ColorChoice parse_color_choice(std::string_view text);
// True when colours should be written to stdout.
bool use_color(ColorChoice choice);

struct Palette {
  bool enabled = false;
  std::string sign() const { return enabled ? "\033[31m" : ""; }      // red
  std::string exponent() const { return enabled ? "\033[32m" : ""; }  // green
  std::string mantissa() const { return enabled ? "\033[34m" : ""; }  // blue
  std::string heading() const { return enabled ? "\033[1m" : ""; }
  std::string reset() const { return enabled ? "\033[0m" : ""; }
};

}  // namespace fpscope::cli
