// The largest of a grid's magnitude bits in one device word: the step sentinel's reading and a
// per-tensor FP8 operand's amax (magnitude_bits; a NaN's above every number's), each thread's
// `top` merged into *largest after the launch zeroed it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>

namespace fpscope::cuda {

// *largest = 0 before the kernel that merges into it, on stream s; nothing where it is null.
inline void zero_largest(std::uint32_t* largest, cudaStream_t s) {
  if (largest != nullptr && cudaMemsetAsync(largest, 0, sizeof(std::uint32_t), s) != cudaSuccess)
    throw std::runtime_error("CUDA error: cudaMemsetAsync for a largest magnitude");
}

// The block's largest of its threads' `top` into *largest: one shared atomic a thread, one
// global atomic a block. Nothing where `largest` is null, which is the same for every thread of
// the grid (every thread of the block calls it).
__device__ __forceinline__ void merge_largest(unsigned int top, unsigned int* largest) {
  __shared__ unsigned int block_largest;
  if (largest == nullptr) return;
  if (threadIdx.x == 0) block_largest = 0;
  __syncthreads();
  atomicMax(&block_largest, top);
  __syncthreads();
  if (threadIdx.x == 0) atomicMax(largest, block_largest);
}

}  // namespace fpscope::cuda
