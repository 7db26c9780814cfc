// Fuzz target: run-log lines (a header, then snapshots). Whatever parses must print and parse back equal.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fpscope/analyzer/run_log.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::size_t line_number = 0;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    try {
      if (line_number++ == 0) {
        const fpscope::RunHeader header = fpscope::parse_run_header(line, "fuzz:1");
        if (!(fpscope::parse_run_header(fpscope::run_header_line(header), "again") == header)) std::abort();
      } else {
        fpscope::Snapshot snapshot = fpscope::parse_snapshot(line, "fuzz");
        fpscope::Snapshot again = fpscope::parse_snapshot(fpscope::snapshot_line(snapshot), "again");
        // A loss not known (null, absent) reads as NaN, which == never calls equal: compare the rest.
        if (std::isnan(snapshot.loss) && std::isnan(again.loss)) snapshot.loss = again.loss = 0;
        if (!(again == snapshot)) std::abort();
      }
    } catch (const fpscope::RunLogError&) {
    }
  }
  return 0;
}
