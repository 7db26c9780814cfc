// What every file of the CUDA backend needs: one check of CUDA and cuBLAS results, which turns an
// error into an exception naming the call and where it was made (this code runs inside the module
// `fpscope train` loads; its callers print the sentence and end with a whole log, never exit from
// here), and a grid for a grid-stride loop.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace fpscope::cuda {

inline void cuda_check(cudaError_t error, const char* what, const char* file, int line) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error in ") + what + " (" + file + ":" + std::to_string(line) + "): " + cudaGetErrorString(error));
}

inline void cublas_check(cublasStatus_t status, const char* what, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLAS error in ") + what + " (" + file + ":" + std::to_string(line) + "): status " +
                             std::to_string(static_cast<int>(status)));
}

// Blocks of `threads` for n elements, at most `most` (a grid-stride loop takes the rest).
inline int grid_for(std::size_t n, int threads, int most) {
  const std::size_t wanted = (n + static_cast<std::size_t>(threads) - 1) / static_cast<std::size_t>(threads);
  return static_cast<int>(wanted < static_cast<std::size_t>(most) ? (wanted == 0 ? 1 : wanted) : static_cast<std::size_t>(most));
}

}  // namespace fpscope::cuda

// A CUDA runtime call, a cuBLAS call, and the kernel launch just made (named by `what`).
#define cudaCheck(call) ::fpscope::cuda::cuda_check((call), #call, __FILE__, __LINE__)
#define cublasCheck(call) ::fpscope::cuda::cublas_check((call), #call, __FILE__, __LINE__)
#define cudaCheckLaunch(what) ::fpscope::cuda::cuda_check(cudaGetLastError(), "launching " what, __FILE__, __LINE__)
