// The format analyze and export ask about when --format does not say (target_format_option.hpp).
#include "target_format_option.hpp"

#include <algorithm>
#include <optional>

#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"

namespace fpscope::cli {

TargetFormat target_format(const std::string& option, const std::vector<RunHeader>& run_headers) {
  if (!option.empty()) return {parse_format(option), "--format", ""};
  std::vector<std::string> cast_to;  // the formats the runs were cast to, each once
  std::vector<std::string> unknown;  // names of formats fpscope does not know, each once
  std::vector<std::string> wide;  // "float32" or "float64": what runs that cast to nothing narrower trained in, each once
  bool assumed = false;  // a log whose writer could not tell the format (RunHeader::format_assumed)
  for (const RunHeader& header : run_headers) {
    if (header.format_assumed) {
      assumed = true;
      continue;
    }
    const std::optional<Format> format = run_cast_format(header);
    if (!format) {
      try {  // a float32 (or float64) run's, or a name fpscope does not know
        if (!header.format.empty()) {
          const std::string trained_in = parse_format(header.format).exponent_bits > formats::fp32.exponent_bits ? "float64" : "float32";
          if (std::find(wide.begin(), wide.end(), trained_in) == wide.end()) wide.push_back(trained_in);
        }
      } catch (const UnknownNameError&) {
        const std::string name = "'" + printable_text(header.format) + "'";
        if (std::find(unknown.begin(), unknown.end(), name) == unknown.end()) unknown.push_back(name);
      }
      continue;
    }
    const std::string name = format_name(*format);
    if (std::find(cast_to.begin(), cast_to.end(), name) == cast_to.end()) cast_to.push_back(name);
  }
  if (cast_to.size() == 1 && wide.empty() && unknown.empty() && !assumed)
    return {parse_format(cast_to.front()), "run", run_headers.size() == 1 ? "the run's own" : "the runs' own"};
  std::string why = "the default";
  if (!unknown.empty()) {  // said first: a name fpscope cannot read is what the user has to fix
    std::string names;
    for (std::size_t i = 0; i < unknown.size(); ++i) names += (i == 0 ? "" : i + 1 == unknown.size() ? " and " : ", ") + unknown[i];
    why += std::string(run_headers.size() == 1 ? ": the run log names " : ": the run logs name ") +
           (unknown.size() == 1 ? "a format" : "formats") + " fpscope does not know, " + names;
  } else if (cast_to.size() > 1 || (!cast_to.empty() && !wide.empty())) {
    std::sort(cast_to.begin(), cast_to.end());
    for (const std::string& w : wide) cast_to.push_back(w == "float64" ? "fp64" : "fp32");
    std::string names;
    for (std::size_t i = 0; i < cast_to.size(); ++i) names += (i == 0 ? "" : i + 1 == cast_to.size() ? " and " : ", ") + cast_to[i];
    why += ": the run logs name different formats, " + names;
  } else if (assumed) {
    why += run_headers.size() == 1 ? ": the run log does not say what the run cast to" : ": a run log does not say what its run cast to";
  } else if (!wide.empty()) {
    std::sort(wide.begin(), wide.end());
    why += std::string(run_headers.size() == 1 ? ": the run trained in " : ": the runs trained in ") + wide.front() +
           (wide.size() > 1 ? " and " + wide.back() : "");
  }
  return {formats::fp16, "default", why};
}

}  // namespace fpscope::cli
