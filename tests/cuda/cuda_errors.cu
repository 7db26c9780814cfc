// A CUDA error inside the engine's kernels module is an exception that says where and what, never
// an exit of the process (fpscope train loads this code with dlopen and must end with its own
// sentence and a whole log). Provoked where no device answers -- a launch then fails -- so this
// runs on the machines without a GPU; with a device there is no error to provoke, and it skips.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "fpscope/gpu/cuda_kernels.hpp"

int main() {
  if (fpscope::cuda::device_count() > 0) {
    std::printf("a CUDA device answers: no launch error to provoke here (the kernels' tests run instead)\n");
    return 77;
  }
  try {
    fpscope::cuda::pack_16(nullptr, nullptr, 16, false);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.rfind("CUDA error at ", 0) == 0 && what.find("kernels.cu:") != std::string::npos) {
      std::printf("ok: %s\n", what.c_str());
      return 0;
    }
    std::printf("FAIL: the exception does not say where: %s\n", what.c_str());
    return 1;
  }
  std::printf("FAIL: a launch without a device raised nothing\n");
  return 1;
}
