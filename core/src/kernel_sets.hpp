// The instruction sets the bulk kernels are built for (bulk_generic.cpp, bulk_avx2.cpp,
// bulk_avx512.cpp) and which of them this processor can run: the one rule that bulk.cpp's dispatch
// and the build's probe for FPSCOPE_BULK_KERNELS=this-processor (cmake/this_processor_kernel_sets.cpp)
// both ask.
#pragma once

namespace fpscope {

enum class KernelSet { generic, avx2, avx512 };

inline constexpr KernelSet kernel_sets[] = {KernelSet::generic, KernelSet::avx2, KernelSet::avx512};

constexpr const char* kernel_set_name(KernelSet set) {
  switch (set) {
    case KernelSet::generic: return "generic";
    case KernelSet::avx2: return "avx2";
    case KernelSet::avx512: return "avx512";
  }
  return "generic";
}

// What bulk_avx2.cpp and bulk_avx512.cpp are compiled for (instruction_set_unit.hpp's target
// lists); the baseline build runs everywhere. Without x86 kernels (FPSCOPE_HAVE_X86_KERNELS), the
// baseline only.
inline bool processor_runs(KernelSet set) {
#if defined(FPSCOPE_HAVE_X86_KERNELS)
  switch (set) {
    case KernelSet::generic: return true;
    case KernelSet::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
    case KernelSet::avx512:
      return processor_runs(KernelSet::avx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  return false;
#else
  return set == KernelSet::generic;
#endif
}

}  // namespace fpscope
