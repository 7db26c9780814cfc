// Bulk kernels compiled for AVX2 (chosen at run time when the processor has it).
#define BULK_ISA bulk_avx2
#include "bulk_kernels.inl"
