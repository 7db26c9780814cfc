// Parsing of --scale: 2^k, a power of two, or auto.
#include "scale_option.hpp"

#include <cmath>

#include "commands.hpp"

namespace fpscope::cli {

std::optional<int> parse_scale_log2(const std::string& text) {
  if (text == "auto") return std::nullopt;
  try {
    std::size_t used = 0;
    if (text.rfind("2^", 0) == 0) {
      const int k = std::stoi(text.substr(2), &used);
      if (used == text.size() - 2) return k;
    } else {
      const double value = std::stod(text, &used);
      int exponent = 0;
      if (used == text.size() && value > 0 && std::frexp(value, &exponent) == 0.5) return exponent - 1;
    }
  } catch (const std::exception&) {
  }
  throw UsageError("--scale '" + text + "' is not a power of two: expected 2^k (such as 2^10), a number such as 1024, or auto");
}

}  // namespace fpscope::cli
