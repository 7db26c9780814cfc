// The --as option's syntax, shared by analyze and quantize: how .npy elements are read.
#pragma once

#include <string>

#include "fpscope/analyzer/npy.hpp"

namespace fpscope::cli {

// A format of 16 bits or fewer by any of its names (bf16, float8_e4m3fn, e2m1, ...): the
// elements read as its codes; empty: by their dtype. Throws UsageError otherwise.
NpyElements parse_npy_elements(const std::string& as);

}  // namespace fpscope::cli
