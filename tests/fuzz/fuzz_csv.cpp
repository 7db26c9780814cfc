// Fuzz target: tidy histogram CSV. Whatever reads must write and read back equal.
#include <cstdlib>
#include <fstream>

#include "fpscope/analyzer/csv.hpp"
#include "temp_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = fuzz_input_file(data, size, ".csv");
  try {
    const std::vector<fpscope::Snapshot> snapshots = fpscope::read_histograms_csv(path);
    { std::ofstream(path, std::ios::binary | std::ios::trunc) << fpscope::histograms_csv(snapshots); }
    if (!(fpscope::read_histograms_csv(path) == snapshots)) std::abort();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
