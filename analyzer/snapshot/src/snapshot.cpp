// Names of tensor kinds.
#include "fpscope/snapshot/snapshot.hpp"
#include "fpscope/core/printable_text.hpp"

#include <array>
#include <string>

namespace fpscope {

namespace {
constexpr std::array<std::pair<TensorKind, std::string_view>, 5> kind_names{{
    {TensorKind::activation, "activation"},
    {TensorKind::activation_gradient, "activation_gradient"},
    {TensorKind::weight, "weight"},
    {TensorKind::weight_gradient, "weight_gradient"},
    {TensorKind::other, "other"},
}};
}  // namespace

std::string_view tensor_kind_name(TensorKind kind) {
  for (const auto& [k, name] : kind_names)
    if (k == kind) return name;
  return "other";
}

TensorKind parse_tensor_kind(std::string_view name) {
  for (const auto& [kind, text] : kind_names)
    if (text == name) return kind;
  throw std::invalid_argument("unknown tensor kind '" + printable_text(name) +
                              "': expected activation, activation_gradient, weight, weight_gradient or other");
}

std::string_view capture_name(Capture capture) { return capture == Capture::before_cast ? "before_cast" : "as_stored"; }

Capture parse_capture(std::string_view name) {
  if (name == "before_cast") return Capture::before_cast;
  if (name == "as_stored") return Capture::as_stored;
  throw std::invalid_argument("unknown capture '" + printable_text(name) + "': expected before_cast or as_stored");
}

}  // namespace fpscope
