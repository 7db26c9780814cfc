// The --scale option's syntax, shared by analyze and export.
#pragma once

#include <optional>
#include <string>

namespace fpscope::cli {

// "2^k", a power of two such as 1024, or "auto" (nullopt). Throws UsageError otherwise.
std::optional<int> parse_scale_log2(const std::string& text);

}  // namespace fpscope::cli
