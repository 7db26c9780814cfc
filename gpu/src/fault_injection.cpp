// Parsing VALUE@LAYER:STEP.
#include "fpscope/gpu/fault_injection.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "fpscope/core/printable_text.hpp"
#include "fpscope/gpu/training_config.hpp"

namespace fpscope {

namespace {
template <typename Int>
bool parse_whole(std::string_view text, Int& value) {
  const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && result.ec == std::errc{} && result.ptr == text.data() + text.size();
}

// VALUE@WHERE:STEP split, the value and the step read; WHERE left to the caller.
FaultInjection parse_value_and_step(std::string_view text, std::string_view& where) {
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
  if (!parse_whole(text.substr(colon + 1), fault.step) || fault.step < 0)
    throw std::invalid_argument(quoted + ": the step must be a whole number >= 0");
  where = text.substr(at + 1, colon - at - 1);
  return fault;
}

}  // namespace

FaultInjection parse_fault_injection(std::string_view text, int layer_count) {
  std::string_view layer;
  FaultInjection fault = parse_value_and_step(text, layer);
  if (layer.substr(0, 2) == "fc") layer.remove_prefix(2);
  if (!parse_whole(layer, fault.layer) || fault.layer < 1 || fault.layer > layer_count)
    throw std::invalid_argument("--inject '" + printable_text(text) + "': the layer must be fc1 .. fc" + std::to_string(layer_count));
  return fault;
}

FaultInjection parse_fault_injection(std::string_view text, std::span<const std::string> tensors) {
  std::string_view tensor;
  FaultInjection fault = parse_value_and_step(text, tensor);
  if (std::find(tensors.begin(), tensors.end(), tensor) == tensors.end()) {
    std::string some;
    for (std::size_t i = 0; i < tensors.size() && i < 6; ++i) some += (i > 0 ? ", " : "") + tensors[i];
    throw std::invalid_argument("--inject '" + printable_text(text) + "': the tensor must be a weight the model records (" + some +
                                (tensors.size() > 6 ? ", ..." : "") + ")");
  }
  fault.layer = 0;
  fault.tensor = std::string(tensor);
  return fault;
}

std::string fault_value_name(FaultInjection::Value value) { return value == FaultInjection::Value::nan ? "nan" : "inf"; }

std::string describe(const FaultInjection& fault) {
  const std::string where = fault.tensor.empty() ? mlp_layer_name(static_cast<std::size_t>(fault.layer) - 1) : fault.tensor;
  return fault_value_name(fault.value) + "@" + where + ":" + std::to_string(fault.step);
}

}  // namespace fpscope
