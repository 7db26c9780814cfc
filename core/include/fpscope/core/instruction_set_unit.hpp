// The switch into and out of an instruction set for the rest of a unit of kernels: the core's
// bulk kernels (kernel_unit_baseline.hpp says what such a unit includes first, and why) and the
// training engine's element-wise passes (gpu/src/cpu/elementwise_avx2.cpp, elementwise_avx512.cpp).
// A unit calls into code compiled this way only where bulk_isa_supported() said the processor has
// the set.
#pragma once

// The instruction sets bulk.cpp's dispatch checks for before it calls into such a unit
// (cpu_has). GCC's target pragma does not define __AVX2__ and the like in C++, so a unit defines
// FPSCOPE_KERNEL_AVX2 / FPSCOPE_KERNEL_AVX512 for the code that asks which set it is compiled for.
#if defined(__clang__)
#define FPSCOPE_BEGIN_AVX2_UNIT \
  _Pragma("clang attribute push(__attribute__((target(\"avx2,fma,bmi2\"))), apply_to = function)")
#define FPSCOPE_BEGIN_AVX512_UNIT \
  _Pragma("clang attribute push(__attribute__((target(\"avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi2\"))), apply_to = function)")
#define FPSCOPE_END_KERNEL_UNIT _Pragma("clang attribute pop")
#else
#define FPSCOPE_BEGIN_AVX2_UNIT _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,bmi2\")")
#define FPSCOPE_BEGIN_AVX512_UNIT \
  _Pragma("GCC push_options")     \
  _Pragma("GCC target(\"avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,bmi2,prefer-vector-width=512\")")
#define FPSCOPE_END_KERNEL_UNIT _Pragma("GCC pop_options")
#endif
