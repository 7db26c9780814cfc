// Bulk kernels for the baseline instruction set (SSE2 on x86-64).
#define BULK_ISA bulk_generic
#include "bulk_kernels.inl"
