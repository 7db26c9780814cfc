// The CPU backend's matrix products: float32 GEMM through OpenBLAS (runtime-dispatched kernels),
// on operands the emulator has already rounded. fp16 / bf16 / FP8 values are float32 numbers, so
// every product of two of them is exact in float32 and the sums accumulate in float32, as on
// tensor cores. C is computed in fixed slices of 128 columns, one single-threaded OpenBLAS call
// each, spread over the engine's threads (parallel.hpp): the same calls on any number of threads,
// so the same bits. The summation order is OpenBLAS's: the same on one kind of processor, and not
// promised across kinds (its kernels are chosen at run time), where the last bit of a sum may
// differ; every cast after it is still the emulator's.
#pragma once

#include <Eigen/Core>

namespace fpscope {

// op(a) * op(b), op transposing where asked; the shapes must agree (std::invalid_argument).
Eigen::MatrixXf gemm(const Eigen::MatrixXf& a, bool transpose_a, const Eigen::MatrixXf& b, bool transpose_b);

// The engine's threads for the products and the element-wise passes (0: all cores), and how many
// it uses now. The count changes the speed, never a bit.
void set_gemm_threads(int threads);
int gemm_threads();
// The cores OpenBLAS sees: what threads 0 means.
int gemm_cores();

}  // namespace fpscope
