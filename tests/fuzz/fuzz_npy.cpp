// Fuzz target: .npy headers and data, read both by dtype and as raw bfloat16.
#include "fpscope/analyzer/npy.hpp"
#include "temp_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = fuzz_input_file(data, size, ".npy");
  for (const auto elements : {fpscope::NpyElements::by_dtype, fpscope::NpyElements::bfloat16}) {
    try {
      fpscope::NpyInfo info;
      const fpscope::ExponentHistogram h = fpscope::npy_histogram(path, elements, &info);
      if (h.total_count() != info.count) std::abort();  // every element counted once
    } catch (const fpscope::NpyError&) {
    }
  }
  return 0;
}
