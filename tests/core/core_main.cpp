// The core suite's main: says which bulk kernels run, and skips (status 77, a sentence) when a run
// forces kernels this processor cannot run or this build left out, rather than quietly testing the
// generic ones again.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fpscope/core/bulk.hpp"

int main(int argc, char** argv) {
  if (const char* forced = std::getenv("FPSCOPE_BULK_ISA")) {
    if (const std::string why = fpscope::bulk_isa_unavailable(forced); !why.empty()) {
      std::printf("skipped: FPSCOPE_BULK_ISA=%s, and %s\n", forced, why.c_str());
      return 77;
    }
  }
  std::printf("bulk kernels: %.*s\n", static_cast<int>(fpscope::bulk_kernel_isa().size()), fpscope::bulk_kernel_isa().data());
  doctest::Context context(argc, argv);
  return context.run();
}
