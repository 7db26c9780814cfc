// Portability layer for code shared by host and device: FPSCOPE_HD, 128-bit integers, bit scans.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FPSCOPE_HD __host__ __device__
#else
#define FPSCOPE_HD
#endif

// For the element-wise kernels that loops must inline to vectorise.
#if defined(__CUDACC__)
#define FPSCOPE_HD_KERNEL __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define FPSCOPE_HD_KERNEL __attribute__((always_inline)) inline
#else
#define FPSCOPE_HD_KERNEL inline
#endif

namespace fpscope {

// GCC, Clang and nvcc (host and device) all provide a native 128-bit integer; the emulator
// uses it to hold exact products (106 bits for binary64) and wide significands with guard bits.
using u128 = unsigned __int128;

// Index of the most significant set bit (0-based). Precondition: x != 0.
FPSCOPE_HD inline int msb64(std::uint64_t x) {
#if defined(__CUDA_ARCH__)
  return 63 - __clzll(static_cast<long long>(x));
#else
  return 63 - __builtin_clzll(x);
#endif
}

// Index of the most significant set bit of a 128-bit value (0-based). Precondition: x != 0.
FPSCOPE_HD inline int msb128(u128 x) {
  const auto high = static_cast<std::uint64_t>(x >> 64);
  return high != 0 ? 64 + msb64(high) : msb64(static_cast<std::uint64_t>(x));
}

FPSCOPE_HD inline std::uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

FPSCOPE_HD inline float bits_float(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

// A float32's magnitude as bits (the sign cleared): ordered as the magnitudes are, a NaN's above
// infinity's, so the largest of them is a tensor's amax (a NaN where it holds one) in any order.
FPSCOPE_HD inline std::uint32_t magnitude_bits(float value) { return float_bits(value) & 0x7FFFFFFFu; }

FPSCOPE_HD inline std::uint64_t double_bits(double value) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(value));
#else
  std::uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
#endif
}

FPSCOPE_HD inline double bits_double(std::uint64_t bits) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

}  // namespace fpscope
