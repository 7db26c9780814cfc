// Parsing of --scale: 2^k, a power of two, or auto.
#include "scale_option.hpp"

#include <fmt/core.h>

#include <charconv>
#include <cmath>

#include "fpscope/analyzer/range_analysis.hpp"
#include "fpscope/core/printable_text.hpp"

#include "usage_error.hpp"

namespace fpscope::cli {

std::optional<int> parse_scale_log2(const std::string& text) {
  if (text == "auto") return std::nullopt;
  int k = 0;
  bool parsed = false;
  if (text.rfind("2^", 0) == 0) {
    const char* first = text.data() + 2;
    const char* last = text.data() + text.size();
    if (first != last && *first == '+') ++first;
    const auto result = std::from_chars(first, last, k);
    parsed = first != last && result.ec == std::errc{} && result.ptr == last;
    if (result.ec == std::errc::result_out_of_range) k = max_scale_log2 + 1, parsed = true;
  } else {
    double value = 0;
    const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
    int exponent = 0;
    parsed = !text.empty() && result.ec == std::errc{} && result.ptr == text.data() + text.size() && value > 0 &&
             std::isfinite(value) && std::frexp(value, &exponent) == 0.5;
    k = exponent - 1;
  }
  if (!parsed)
    throw UsageError("--scale '" + printable_text(text) + "' is not a power of two: expected 2^k (such as 2^10), a number such as 1024, or auto");
  if (k < -max_scale_log2 || k > max_scale_log2)
    throw UsageError(fmt::format("--scale '{}' is out of range: k in 2^k must be from -{} to {} (beyond, every binade is outside every format)",
                                 printable_text(text), max_scale_log2, max_scale_log2));
  return k;
}

}  // namespace fpscope::cli
