#include "npy_option.hpp"

#include "usage_error.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"

namespace fpscope::cli {

NpyElements parse_npy_elements(const std::string& as) {
  if (as.empty()) return NpyElements::by_dtype;
  Format f;
  try {
    f = parse_format(as);
  } catch (const UnknownNameError& e) {
    throw UsageError("--as '" + printable_text(as) + "': " + e.what());
  }
  if (f.width() > 16)
    throw UsageError("--as " + printable_text(as) + ": .npy codes are of formats of 16 bits or fewer (" + format_name(f) + " has " +
                     std::to_string(f.width()) + "); float32 and float64 are read by their dtype without --as");
  return NpyElements{f};
}

}  // namespace fpscope::cli
