// The culprit rule: the first reading with a fault, in the order the step made its tensors.
#include "fpscope/snapshot/culprit.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "fpscope/core/hd.hpp"
#include "fpscope/core/printable_text.hpp"

namespace fpscope {

namespace {
constexpr std::uint32_t infinity_magnitude_bits = 0x7F800000u;
}

std::string_view culprit_fault_name(CulpritFault fault) {
  switch (fault) {
    case CulpritFault::nan: return "nan";
    case CulpritFault::infinity: return "inf";
    case CulpritFault::overflow: return "overflow";
  }
  return "?";
}

CulpritFault parse_culprit_fault(std::string_view name) {
  for (const CulpritFault f : {CulpritFault::nan, CulpritFault::infinity, CulpritFault::overflow})
    if (culprit_fault_name(f) == name) return f;
  throw std::invalid_argument("'" + printable_text(name) + "' is not a culprit's fault (nan, inf or overflow)");
}

std::optional<CulpritFault> reading_fault(std::uint32_t largest_bits, double format_largest) {
  if (largest_bits > infinity_magnitude_bits) return CulpritFault::nan;
  if (largest_bits == infinity_magnitude_bits) return CulpritFault::infinity;
  if (static_cast<double>(bits_float(largest_bits)) > format_largest) return CulpritFault::overflow;
  return std::nullopt;
}

std::optional<Culprit> find_culprit(std::span<const SentinelReading> readings, const std::string& format, double format_largest) {
  for (std::size_t i = 0; i < readings.size(); ++i) {
    const SentinelReading& r = readings[i];
    if (const std::optional<CulpritFault> fault = reading_fault(r.largest_bits, format_largest)) {
      // What leads to it: the gradients before a gradient, the rest before anything else.
      const SentinelReading* upstream = nullptr;
      for (std::size_t j = 0; j < i; ++j)
        if (is_gradient(readings[j].kind) == is_gradient(r.kind) && (upstream == nullptr || readings[j].largest_bits > upstream->largest_bits))
          upstream = &readings[j];
      Culprit c;
      c.name = r.name;
      c.kind = r.kind;
      c.fault = *fault;
      c.format = format;
      c.format_largest = format_largest;
      if (*fault != CulpritFault::nan) c.largest = static_cast<double>(bits_float(r.largest_bits));
      c.position = static_cast<std::int64_t>(i);
      if (upstream != nullptr) {
        c.upstream = upstream->name;
        c.upstream_kind = upstream->kind;
        c.upstream_largest = static_cast<double>(bits_float(upstream->largest_bits));
      }
      return c;
    }
  }
  return std::nullopt;
}

void count_culprit(Culprit& culprit, const Snapshot& snapshot) {
  for (const TensorRecord& t : snapshot.tensors) {
    if (t.name != culprit.name || t.kind != culprit.kind) continue;
    culprit.nan_count = t.histogram.nan_count();
    culprit.infinity_count = t.histogram.infinity_count();
    culprit.overflow_count = t.cast ? t.cast->overflowed : 0;
    return;
  }
}

}  // namespace fpscope
