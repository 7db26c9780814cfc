// Counts of float32 bit patterns by their biased exponent field: the kernels behind
// ExponentHistogram::add_bits (exponent_histogram.cpp resolves subnormals and NaNs after).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace fpscope {

struct FieldCounts {
  std::array<std::uint64_t, 256> by_field{};  // field 0 counts zeros and subnormals
  std::uint64_t zeros = 0;
  std::uint32_t largest_magnitude = 0;  // the largest of the values' magnitude bits (bits & 0x7FFFFFFF)
};

// The AVX-512 kernel (exponent_fields_avx512.cpp); only where the processor has AVX-512 BW.
FieldCounts count_exponent_fields_avx512(const std::uint32_t* bits, std::size_t n);

}  // namespace fpscope
