// Run ids: the owner of a run log.
#include "fpscope/snapshot/run_header.hpp"

#include <cstdint>
#include <random>

namespace fpscope {

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
