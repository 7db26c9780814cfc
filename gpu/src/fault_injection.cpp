// Parsing VALUE@LAYER:STEP.
#include "fpscope/gpu/fault_injection.hpp"
#include "fpscope/core/printable_text.hpp"

#include <charconv>
#include <stdexcept>

namespace fpscope {

namespace {
template <typename Int>
bool parse_whole(std::string_view text, Int& value) {
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && result.ec == std::errc{} && result.ptr == text.data() + text.size();
}
}  // namespace

FaultInjection parse_fault_injection(std::string_view text, int layer_count) {
  const std::string quoted = "--inject '" + printable_text(text) + "'";
  const auto at = text.find('@');
  const auto colon = text.rfind(':');
  if (at == std::string_view::npos || colon == std::string_view::npos || colon < at)
    throw std::invalid_argument(quoted + " is not VALUE@LAYER:STEP, such as nan@fc2:100");
  FaultInjection fault;
  const std::string_view value = text.substr(0, at);
  if (value == fault_value_name(FaultInjection::Value::nan)) fault.value = FaultInjection::Value::nan;
  else if (value == fault_value_name(FaultInjection::Value::infinity)) fault.value = FaultInjection::Value::infinity;
  else throw std::invalid_argument(quoted + ": the value must be nan or inf");
  std::string_view layer = text.substr(at + 1, colon - at - 1);
  if (layer.substr(0, 2) == "fc") layer.remove_prefix(2);
  if (!parse_whole(layer, fault.layer) || fault.layer < 1 || fault.layer > layer_count)
    throw std::invalid_argument(quoted + ": the layer must be fc1 .. fc" + std::to_string(layer_count));
  if (!parse_whole(text.substr(colon + 1), fault.step) || fault.step < 0)
    throw std::invalid_argument(quoted + ": the step must be a whole number >= 0");
  return fault;
}

std::string fault_value_name(FaultInjection::Value value) { return value == FaultInjection::Value::nan ? "nan" : "inf"; }

std::string describe(const FaultInjection& fault) {
  return fault_value_name(fault.value) + "@fc" + std::to_string(fault.layer) + ":" + std::to_string(fault.step);
}

}  // namespace fpscope
