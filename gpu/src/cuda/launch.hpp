// What every kernel launcher in gpu/src/cuda/ needs: a launch's error turned into an exception
// (the module's callers print it and exit with its sentence), and a grid for a grid-stride loop.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace fpscope::cuda {

inline void check_launch(const char* what) {
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) throw std::runtime_error(std::string("CUDA error launching ") + what + ": " + cudaGetErrorString(error));
}

// Blocks of `threads` for n elements, at most `most` (a grid-stride loop takes the rest).
inline int grid_for(std::size_t n, int threads, int most) {
  const std::size_t wanted = (n + static_cast<std::size_t>(threads) - 1) / static_cast<std::size_t>(threads);
  return static_cast<int>(wanted < static_cast<std::size_t>(most) ? (wanted == 0 ? 1 : wanted) : static_cast<std::size_t>(most));
}

}  // namespace fpscope::cuda
