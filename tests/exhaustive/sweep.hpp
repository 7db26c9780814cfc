// Shared scaffolding for the exhaustive sweeps: split a 2^32 range over threads, report progress and mismatches.
#pragma once

#include <immintrin.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "fpscope/core/context.hpp"

namespace sweep {

// MXCSR exception flags -> fpscope flags (the denormal-operand flag has no IEEE counterpart).
inline std::uint8_t flags_from_mxcsr(unsigned csr) {
  std::uint8_t flags = 0;
  if (csr & 0x01) flags |= fpscope::flag::invalid;
  if (csr & 0x04) flags |= fpscope::flag::infinite;
  if (csr & 0x08) flags |= fpscope::flag::overflow;
  if (csr & 0x10) flags |= fpscope::flag::underflow;
  if (csr & 0x20) flags |= fpscope::flag::inexact;
  return flags;
}

inline void clear_mxcsr_flags() { _mm_setcsr(_mm_getcsr() & ~0x3Fu); }
inline std::uint8_t mxcsr_flags() { return flags_from_mxcsr(_mm_getcsr()); }

// Pins a value in a register at this point of the program: the compiler does not know that the
// F16C and SSE instructions write MXCSR's flags, and was seen (GCC 12, -O3) to read the flags
// before the VCVTPS2PH whose flags they were. Put it on the operation's input after clearing the
// flags and on its result before reading them.
template <typename T>
inline void pin(T& value) {
  asm volatile("" : "+x"(value) : : "memory");
}

// Runs body(first, last, report) over [0, count) on every hardware thread; body returns its
// mismatch count and calls report(text) for the first few.
struct Result {
  std::uint64_t mismatches = 0;
  double seconds = 0;
};

inline Result run(std::uint64_t count, const std::function<std::uint64_t(std::uint64_t, std::uint64_t)>& body) {
  const auto start = std::chrono::steady_clock::now();
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::atomic<std::uint64_t> mismatches{0};
  std::atomic<std::uint64_t> next{0};
  const std::uint64_t block = std::uint64_t{1} << 22;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (;;) {
        const std::uint64_t first = next.fetch_add(block);
        if (first >= count) break;
        const std::uint64_t last = std::min(count, first + block);
        mismatches += body(first, last);
      }
    });
  }
  for (auto& thread : pool) thread.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {mismatches.load(), seconds};
}

inline std::mutex& print_lock() {
  static std::mutex m;
  return m;
}

}  // namespace sweep
