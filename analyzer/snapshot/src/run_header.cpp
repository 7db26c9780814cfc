// Run ids (the owner of a run log) and the format a run cast to.
#include "fpscope/snapshot/run_header.hpp"

#include <cstdint>
#include <random>

#include "fpscope/core/names.hpp"

namespace fpscope {

std::optional<Format> run_cast_format(const RunHeader& header) {
  if (header.format.empty() || header.format_assumed) return std::nullopt;
  try {
    const Format format = parse_format(header.format);
    if (format.exponent_bits >= formats::fp32.exponent_bits && format.mantissa_bits >= formats::fp32.mantissa_bits) return std::nullopt;
    return format;
  } catch (const UnknownNameError&) {
    return std::nullopt;
  }
}

bool run_cast_to(const RunHeader& header, const std::string& name) { return !header.format_assumed && header.format == name; }

std::string new_run_id() {
  std::random_device source;
  static constexpr char hex[] = "0123456789abcdef";
  std::string id;
  for (int word = 0; word < 4; ++word) {
    const std::uint32_t bits = source();
    for (int shift = 28; shift >= 0; shift -= 4) id += hex[(bits >> shift) & 15];
  }
  return id;
}

}  // namespace fpscope
