// Memory checked before it is asked for: sizes a user or a file chose are refused in one sentence
// rather than ending in std::bad_alloc (or the OOM killer) with a half-written output.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fpscope {

class MemoryBudgetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What this process can still allocate: the least of the system's MemAvailable, what the
// cgroup's memory.max leaves, and the address-space limit (ulimit -v) less what is mapped.
// nullopt where none of them can be read.
std::optional<std::uint64_t> available_memory_bytes();

// Throws MemoryBudgetError "WHAT needs about 7.2 GiB of memory; 3.1 GiB is available" when
// `bytes` exceeds available_memory_bytes().
void check_memory_budget(std::uint64_t bytes, std::string_view what);

// "7.2 GiB", "512 MiB", "12 KiB", "100 bytes".
std::string byte_size_text(std::uint64_t bytes);

}  // namespace fpscope
