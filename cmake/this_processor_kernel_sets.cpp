// Prints the bulk kernels' instruction sets this processor runs, as a CMake list ("generic;avx2"):
// core/CMakeLists.txt runs it for FPSCOPE_BULK_KERNELS=this-processor, with kernel_sets.hpp's rule.
#include <cstdio>

#include "kernel_sets.hpp"

int main() {
  const char* separator = "";
  for (const fpscope::KernelSet set : fpscope::kernel_sets) {
    if (!fpscope::processor_runs(set)) continue;
    std::printf("%s%s", separator, fpscope::kernel_set_name(set));
    separator = ";";
  }
  return 0;
}
