// Counts of float32 bit patterns by their biased exponent field: the kernels behind
// ExponentHistogram::add_bits (exponent_histogram.cpp resolves subnormals and NaNs after).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fpscope {

struct FieldCounts {
  std::array<std::uint64_t, 256> by_field{};  // field 0 counts zeros and subnormals
  std::uint64_t zeros = 0;
  std::uint32_t largest_magnitude = 0;  // the largest of the values' magnitude bits (bits & 0x7FFFFFFF)
};

// The AVX-512 kernel (exponent_fields_avx512.cpp); only where the processor has AVX-512 BW.
FieldCounts count_exponent_fields_avx512(const std::uint32_t* bits, std::size_t n);
// The AVX2 kernel (exponent_fields_avx2.cpp, the AVX-512 kernel's method in eight lanes); only
// where the processor has AVX2.
FieldCounts count_exponent_fields_avx2(const std::uint32_t* bits, std::size_t n);

// The baseline's count (exponent_histogram.cpp), for processors with neither kernel: two steps per
// chunk of 4096 values. extract(values, length, fields, zeros, largest) writes the chunk's
// exponent fields as bytes, in any order, and adds its exact zeros to `zeros` and its largest
// magnitude to `largest`; then a scalar pass counts the bytes, which stay in L1, into eight
// interleaved tables, so that runs of equal exponents -- the common case in tensors -- do not
// wait on one counter, prefetching the chunk after next meanwhile so that memory keeps streaming.
template <typename Extract>
[[gnu::always_inline]] inline FieldCounts count_fields_in_chunks(const std::uint32_t* bits, std::size_t n, Extract extract) {
  FieldCounts result;
  constexpr std::size_t chunk = 4096;
  constexpr std::size_t tables_count = 8;
  alignas(64) std::uint8_t fields[chunk];
  alignas(64) std::uint32_t tables[tables_count][256] = {};
  std::size_t since_flush = 0;
  for (std::size_t start = 0; start < n; start += chunk) {
    const std::size_t length = std::min(chunk, n - start);
    const std::uint32_t* values = bits + start;
    extract(values, length, fields, result.zeros, result.largest_magnitude);
    const bool prefetch = start + 3 * chunk <= n;
    const std::uint32_t* after_next = values + 2 * chunk;
    std::size_t i = 0;
    for (; i + tables_count <= length; i += tables_count) {
      if (prefetch && i % 16 == 0) __builtin_prefetch(after_next + i, 0, 3);  // one 64-byte line
      for (std::size_t k = 0; k < tables_count; ++k) ++tables[k][fields[i + k]];
    }
    for (; i < length; ++i) ++tables[0][fields[i]];
    // A counter gains at most 1/8 of the values counted since the last flush: flush at 2^33.
    since_flush += length;
    if (since_flush >= (std::size_t{1} << 33) || start + chunk >= n) {
      for (std::size_t byte = 0; byte < 256; ++byte) {
        std::uint64_t sum = 0;
        for (std::size_t k = 0; k < tables_count; ++k) sum += tables[k][byte];
        result.by_field[byte] += sum;
      }
      std::memset(tables, 0, sizeof tables);
      since_flush = 0;
    }
  }
  return result;
}

}  // namespace fpscope
