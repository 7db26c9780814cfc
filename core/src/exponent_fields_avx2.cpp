// Exponent fields counted with AVX2: count_fields_in_chunks (exponent_fields.hpp) with a vector
// pass that takes 32 values at a time to their field bytes, exact zeros and largest magnitude.
#include "exponent_fields.hpp"
#include "kernel_unit_baseline.hpp"

#if defined(FPSCOPE_HAVE_X86_KERNELS)
// Compiled for AVX2 after the shared headers, compiled for the baseline
// (kernel_unit_baseline.hpp says why).
FPSCOPE_BEGIN_AVX2_UNIT

namespace fpscope {

namespace bulk_avx2 {
namespace {

// The fields of values[0, length) as bytes into `fields` (in the order the packs leave them: the
// counting does not care), their zeros added to `zeros`, their largest magnitude into `largest`.
// Whole groups of 32 in vectors, the last few one at a time.
void extract_fields(const std::uint32_t* values, std::size_t length, std::uint8_t* fields, std::uint64_t& zeros, std::uint32_t& largest) {
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7FFFFFFF), zero = _mm256_setzero_si256();
  __m256i largest_lanes = zero, zero_lanes = zero;  // zero_lanes counts down: an equal compare is -1
  std::size_t i = 0;
  for (; i + 32 <= length; i += 32) {
    const auto magnitude = [&](std::size_t at) {
      return _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + at)), magnitude_mask);
    };
    const __m256i m0 = magnitude(i), m1 = magnitude(i + 8), m2 = magnitude(i + 16), m3 = magnitude(i + 24);
    largest_lanes = _mm256_max_epu32(largest_lanes, _mm256_max_epu32(_mm256_max_epu32(m0, m1), _mm256_max_epu32(m2, m3)));
    zero_lanes = _mm256_add_epi32(zero_lanes, _mm256_add_epi32(_mm256_add_epi32(_mm256_cmpeq_epi32(m0, zero), _mm256_cmpeq_epi32(m1, zero)),
                                                               _mm256_add_epi32(_mm256_cmpeq_epi32(m2, zero), _mm256_cmpeq_epi32(m3, zero))));
    // Each magnitude's field is 0..255 in its lane: packed (unsigned saturation never bites) to 16
    // bits, then to 8.
    const __m256i low = _mm256_packus_epi32(_mm256_srli_epi32(m0, 23), _mm256_srli_epi32(m1, 23));
    const __m256i high = _mm256_packus_epi32(_mm256_srli_epi32(m2, 23), _mm256_srli_epi32(m3, 23));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(fields + i), _mm256_packus_epi16(low, high));
  }
  alignas(32) std::uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), largest_lanes);
  for (const std::uint32_t lane : lanes) largest = std::max(largest, lane);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), zero_lanes);
  std::uint32_t chunk_zeros = 0;
  for (const std::uint32_t lane : lanes) chunk_zeros -= lane;
  for (; i < length; ++i) {
    const std::uint32_t magnitude = values[i] & 0x7FFFFFFFu;
    fields[i] = static_cast<std::uint8_t>(magnitude >> 23);
    chunk_zeros += magnitude == 0 ? 1u : 0u;
    largest = std::max(largest, magnitude);
  }
  zeros += chunk_zeros;
}

FieldCounts count(const std::uint32_t* bits, std::size_t n) {
  return count_fields_in_chunks(bits, n, [](const std::uint32_t* values, std::size_t length, std::uint8_t* fields, std::uint64_t& zeros,
                                            std::uint32_t& largest) { extract_fields(values, length, fields, zeros, largest); });
}

}  // namespace
}  // namespace bulk_avx2

FieldCounts count_exponent_fields_avx2(const std::uint32_t* bits, std::size_t n) { return bulk_avx2::count(bits, n); }

}  // namespace fpscope
FPSCOPE_END_KERNEL_UNIT
#else
#include <stdexcept>
// Other processors: bulk_kernel_isa() is never "avx2" there, so this is never called.
fpscope::FieldCounts fpscope::count_exponent_fields_avx2(const std::uint32_t*, std::size_t) {
  throw std::logic_error("count_exponent_fields_avx2: not built for this processor");
}
#endif
