// The core suite's main: says which bulk kernels run, and skips (status 77, a sentence) when a run
// forces kernels this processor cannot run, rather than quietly testing the generic ones again.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include "fpscope/core/bulk.hpp"

int main(int argc, char** argv) {
  if (const char* forced = std::getenv("FPSCOPE_BULK_ISA")) {
    if (!fpscope::bulk_isa_supported(forced)) {
      std::printf("skipped: FPSCOPE_BULK_ISA=%s, and this processor cannot run the %s kernels\n", forced, forced);
      return 77;
    }
  }
  std::printf("bulk kernels: %.*s\n", static_cast<int>(fpscope::bulk_kernel_isa().size()), fpscope::bulk_kernel_isa().data());
  doctest::Context context(argc, argv);
  return context.run();
}
