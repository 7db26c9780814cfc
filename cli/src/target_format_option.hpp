// The --format of analyze and export: the format their shares, advice and shading are about.
#pragma once

#include <string>
#include <vector>

#include "fpscope/core/format.hpp"
#include "fpscope/snapshot/run_header.hpp"

namespace fpscope::cli {

struct TargetFormat {
  Format format;
  // How it was chosen, for the output: "--format", "run" (the format the run logs were cast to)
  // or "default" (fp16).
  std::string chosen_by;
  std::string reason;  // for people, after the format's name: "" for --format, else why this one
};

// `option` (parse_format; "" when not given), else the format every run log among `run_headers`
// names that it was cast to (run_cast_format: a bf16 run is asked about bf16), else fp16 -- when
// there is no run log, when the runs trained in float32 or float64, when they were cast to different
// formats, when one names a format fpscope does not know (the reason names it), or when one's
// writer only assumed its format (RunHeader::format_assumed).
TargetFormat target_format(const std::string& option, const std::vector<RunHeader>& run_headers);

}  // namespace fpscope::cli
