// Bulk kernels compiled for AVX2, FMA and BMI2 (chosen at run time when the processor has them),
// after the shared headers, compiled for the baseline (kernel_unit_baseline.hpp says why).
#include "kernel_unit_baseline.hpp"
#if defined(FPSCOPE_HAVE_X86_KERNELS)
FPSCOPE_BEGIN_AVX2_UNIT
#define FPSCOPE_KERNEL_AVX2 1
#endif
#define BULK_ISA bulk_avx2
#include "bulk_kernels.inl"
#if defined(FPSCOPE_HAVE_X86_KERNELS)
FPSCOPE_END_KERNEL_UNIT
#endif
