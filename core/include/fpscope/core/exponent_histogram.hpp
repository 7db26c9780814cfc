// ExponentHistogram: counts of |x| per binade floor(log2|x|), 2^-149 .. 2^127, plus zero, inf, NaN.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "fpscope/core/hd.hpp"

namespace fpscope {

inline constexpr int min_binade = -149;  // smallest float32 subnormal, 2^-149
inline constexpr int max_binade = 127;   // largest float32 binade
inline constexpr int binade_count = max_binade - min_binade + 1;  // 277

// The binade of a finite nonzero float32, also for subnormals: floor(log2|x|).
FPSCOPE_HD inline int binade_of_f32(std::uint32_t bits) {
  const std::uint32_t biased = (bits >> 23) & 0xFFu;
  const std::uint32_t mantissa = bits & 0x7FFFFFu;
  return biased != 0 ? static_cast<int>(biased) - 127 : msb64(mantissa) + min_binade;
}

// Which kind of value a float32 is, for binning: a bin index 0..276, or one of the three
// special counters. Shared by the CPU histogram and the CUDA recorder.
inline constexpr int bin_zero = binade_count;
inline constexpr int bin_infinity = binade_count + 1;
inline constexpr int bin_nan = binade_count + 2;
inline constexpr int bin_slot_count = binade_count + 3;

FPSCOPE_HD inline int histogram_slot_of_f32(std::uint32_t bits) {
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude == 0) return bin_zero;
  if (magnitude >= 0x7F800000u) return magnitude == 0x7F800000u ? bin_infinity : bin_nan;
  return binade_of_f32(bits) - min_binade;
}

class ExponentHistogram {
 public:
  // Adds every element of the array. Fast: runs on every tensor of every training step. Where
  // largest_magnitude is given, it takes the largest of the values' magnitude bits too (bits &
  // 0x7FFFFFFF, NaNs above infinity; kept where it was larger): the step sentinel's reading, from
  // the same pass.
  void add(std::span<const float> values, std::uint32_t* largest_magnitude = nullptr);
  void add_bits(std::span<const std::uint32_t> bits, std::uint32_t* largest_magnitude = nullptr);
  void add_value(float value);
  // Adds other's counts. Throws std::overflow_error (and changes nothing) when the total count
  // would pass 2^64 - 1: a histogram counted from data never gets there, one read from a file may.
  void merge(const ExponentHistogram& other);
  void clear() { *this = ExponentHistogram{}; }

  // Count of values with floor(log2|x|) == binade; 0 outside [min_binade, max_binade].
  std::uint64_t count(int binade) const {
    return binade < min_binade || binade > max_binade ? 0 : bins_[static_cast<std::size_t>(binade - min_binade)];
  }
  void set_count(int binade, std::uint64_t count) { bins_.at(static_cast<std::size_t>(binade - min_binade)) = count; }
  std::uint64_t zero_count() const { return zeros_; }
  std::uint64_t infinity_count() const { return infinities_; }
  std::uint64_t nan_count() const { return nans_; }
  void set_specials(std::uint64_t zeros, std::uint64_t infinities, std::uint64_t nans) {
    zeros_ = zeros;
    infinities_ = infinities;
    nans_ = nans;
  }
  std::uint64_t finite_nonzero_count() const;
  // Precondition: the total fits in 64 bits (checked_total_count() says whether it does; merge
  // and the file readers keep it so).
  std::uint64_t total_count() const { return finite_nonzero_count() + zeros_ + infinities_ + nans_; }
  std::optional<std::uint64_t> checked_total_count() const;
  // Smallest and largest binade with a nonzero count; min_binade - 1 when there is none.
  int lowest_binade() const;
  int highest_binade() const;
  const std::array<std::uint64_t, binade_count>& bins() const { return bins_; }

  friend bool operator==(const ExponentHistogram&, const ExponentHistogram&) = default;

 private:
  std::array<std::uint64_t, binade_count> bins_{};
  std::uint64_t zeros_ = 0;
  std::uint64_t infinities_ = 0;
  std::uint64_t nans_ = 0;
};

}  // namespace fpscope
