// A CUDA error inside the engine's kernels module is an exception that says where and what, never
// an exit of the process (fpscope train loads this code with dlopen and must end with its own
// sentence and a whole log). Provoked by a launch of zero blocks (column sums of no columns): the
// runtime refuses it as an invalid configuration where a device answers, and every launch fails
// where none does, so this runs on every machine.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "fpscope/gpu/cuda_kernels.hpp"

int main() {
  try {
    fpscope::cuda::column_sums(nullptr, 0, 0, nullptr);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.rfind("CUDA error in ", 0) == 0 && what.find("kernels.cu:") != std::string::npos) {
      std::printf("ok: %s\n", what.c_str());
      return 0;
    }
    std::printf("FAIL: the exception does not say where: %s\n", what.c_str());
    return 1;
  }
  std::printf("FAIL: a launch of zero blocks raised nothing\n");
  return 1;
}
