// glibc's allocation thresholds for training (training_memory.hpp).
#include "training_memory.hpp"

#include <cstdlib>  // defines __GLIBC__ where it is glibc

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <mutex>

namespace fpscope {

void keep_training_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
#if defined(__GLIBC__)
    ::mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    ::mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
#endif
  });
}

}  // namespace fpscope
