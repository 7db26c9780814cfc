// The avx512 bulk kernels left out of this build (FPSCOPE_BULK_KERNELS): bulk_kernels_left_out.inl.
#define BULK_ISA bulk_avx512
#include "bulk_kernels_left_out.inl"
