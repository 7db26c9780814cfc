// Bulk kernels compiled for AVX-512 (chosen at run time when the processor has it).
#define BULK_ISA bulk_avx512
#include "bulk_kernels.inl"
