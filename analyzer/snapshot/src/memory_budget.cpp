// available_memory_bytes: /proc/meminfo, the cgroup v2 limit and RLIMIT_AS, read when asked.
#include "fpscope/snapshot/memory_budget.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace fpscope {

namespace {

// "MemAvailable:   12345678 kB" in /proc/meminfo.
std::optional<std::uint64_t> mem_available() {
  std::ifstream in("/proc/meminfo");
  if (!in.is_open()) return std::nullopt;  // no descriptor left (ulimit -n): not known
  std::string key, unit;
  std::uint64_t value = 0;
  while (in >> key >> value >> unit)
    if (key == "MemAvailable:") return value * 1024;
  return std::nullopt;
}

std::optional<std::uint64_t> read_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!in.is_open() || !(in >> text) || text == "max") return std::nullopt;
  std::istringstream parse(text);
  std::uint64_t value = 0;
  if (!(parse >> value)) return std::nullopt;
  return value;
}

// The cgroup v2 this process is in ("0::/user.slice/..." in /proc/self/cgroup): limit - usage.
std::optional<std::uint64_t> cgroup_headroom() {
  std::ifstream in("/proc/self/cgroup");
  if (!in.is_open()) return std::nullopt;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string folder = "/sys/fs/cgroup" + line.substr(3);
    const auto limit = read_number(folder + "/memory.max");
    if (!limit) return std::nullopt;
    const auto usage = read_number(folder + "/memory.current").value_or(0);
    return *limit > usage ? *limit - usage : 0;
  }
  return std::nullopt;
}

// ulimit -v less the address space already mapped (the first field of /proc/self/statm, in pages).
std::optional<std::uint64_t> address_space_headroom() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  std::ifstream in("/proc/self/statm");
  std::uint64_t pages = 0;
  if (!(in >> pages)) return std::nullopt;
  const std::uint64_t mapped = pages * 4096;
  return limit.rlim_cur > mapped ? limit.rlim_cur - mapped : 0;
}

}  // namespace

std::optional<std::uint64_t> available_memory_bytes() {
  std::optional<std::uint64_t> least;
  for (const auto candidate : {mem_available(), cgroup_headroom(), address_space_headroom()})
    if (candidate) least = least ? std::min(*least, *candidate) : *candidate;
  return least;
}

std::string byte_size_text(std::uint64_t bytes) {
  static constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 5) value /= 1024, ++unit;
  char text[32];
  std::snprintf(text, sizeof text, value < 10 ? "%.1f %s" : "%.0f %s", value, units[unit]);
  return text;
}

void check_memory_budget(std::uint64_t bytes, std::string_view what) {
  const auto available = available_memory_bytes();
  if (available && bytes > *available)
    throw MemoryBudgetError(std::string(what) + " needs about " + byte_size_text(bytes) + " of memory; " + byte_size_text(*available) +
                            " is available");
}

}  // namespace fpscope
