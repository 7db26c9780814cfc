// Colour decisions for the CLI: on for a terminal, off when piped, overridable.
#include "terminal.hpp"

#include "usage_error.hpp"
#include "fpscope/core/printable_text.hpp"

#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace fpscope::cli {

ColorChoice parse_color_choice(std::string_view text) {
  if (text == "auto") return ColorChoice::automatic;
  if (text == "always") return ColorChoice::always;
  if (text == "never") return ColorChoice::never;
  throw UsageError("unknown --color choice '" + printable_text(text) + "': expected auto, always or never");
}

bool use_color(ColorChoice choice) {
  if (choice != ColorChoice::automatic) return choice == ColorChoice::always;
  const char* no_color = std::getenv("NO_COLOR");  // https://no-color.org
  if (no_color != nullptr && *no_color != '\0') return false;
  const char* term = std::getenv("TERM");
  return isatty(STDOUT_FILENO) != 0 && !(term != nullptr && std::string(term) == "dumb");
}

}  // namespace fpscope::cli
