// ExponentHistogram's bulk binning: one pass over the raw exponent field, rare cases resolved after.
#include "fpscope/core/exponent_histogram.hpp"

#include <algorithm>
#include <cstring>

namespace fpscope {

namespace {

// Counts by the biased float32 exponent field (0..255) over a chunk of at most 2^31 values,
// into four interleaved tables so that runs of equal exponents (the common case in tensors)
// don't serialise on one counter. Also counts exact zeros.
struct FieldCounts {
  std::array<std::uint64_t, 256> by_field{};
  std::uint64_t zeros = 0;
};

FieldCounts count_exponent_fields(const std::uint32_t* bits, std::size_t n) {
  FieldCounts result;
  constexpr std::size_t chunk = std::size_t{1} << 30;  // keeps every 32-bit counter from wrapping
  alignas(64) std::uint32_t tables[4][256];
  for (std::size_t start = 0; start < n; start += chunk) {
    const std::size_t end = std::min(n, start + chunk);
    std::memset(tables, 0, sizeof tables);
    std::uint32_t zeros = 0;
    std::size_t i = start;
    for (; i + 4 <= end; i += 4) {
      const std::uint32_t a = bits[i], b = bits[i + 1], c = bits[i + 2], d = bits[i + 3];
      ++tables[0][(a >> 23) & 0xFF];
      ++tables[1][(b >> 23) & 0xFF];
      ++tables[2][(c >> 23) & 0xFF];
      ++tables[3][(d >> 23) & 0xFF];
      zeros += static_cast<std::uint32_t>((a << 1) == 0) + static_cast<std::uint32_t>((b << 1) == 0) +
               static_cast<std::uint32_t>((c << 1) == 0) + static_cast<std::uint32_t>((d << 1) == 0);
    }
    for (; i < end; ++i) {
      ++tables[0][(bits[i] >> 23) & 0xFF];
      zeros += static_cast<std::uint32_t>((bits[i] << 1) == 0);
    }
    for (int field = 0; field < 256; ++field)
      result.by_field[field] += std::uint64_t{tables[0][field]} + tables[1][field] + tables[2][field] + tables[3][field];
    result.zeros += zeros;
  }
  return result;
}

}  // namespace

void ExponentHistogram::add_bits(std::span<const std::uint32_t> bits) {
  const FieldCounts counts = count_exponent_fields(bits.data(), bits.size());
  for (int field = 1; field <= 254; ++field) bins_[static_cast<std::size_t>(field - 127 - min_binade)] += counts.by_field[field];
  zeros_ += counts.zeros;
  // Subnormals share field 0 with zeros, and NaNs share 255 with infinities: both are rare in
  // tensors, so they get a second pass only when present.
  const bool has_subnormals = counts.by_field[0] > counts.zeros;
  const bool has_specials = counts.by_field[255] > 0;
  if (!has_subnormals && !has_specials) return;
  for (const std::uint32_t value : bits) {
    const std::uint32_t field = (value >> 23) & 0xFF;
    if (field == 0 && (value << 1) != 0) {
      ++bins_[static_cast<std::size_t>(binade_of_f32(value) - min_binade)];
    } else if (field == 255) {
      ++((value & 0x7FFFFFu) == 0 ? infinities_ : nans_);
    }
  }
}

void ExponentHistogram::add(std::span<const float> values) {
  static_assert(sizeof(float) == sizeof(std::uint32_t));
  add_bits({reinterpret_cast<const std::uint32_t*>(values.data()), values.size()});
}

void ExponentHistogram::add_value(float value) {
  const int slot = histogram_slot_of_f32(float_bits(value));
  if (slot == bin_zero) ++zeros_;
  else if (slot == bin_infinity) ++infinities_;
  else if (slot == bin_nan) ++nans_;
  else ++bins_[static_cast<std::size_t>(slot)];
}

void ExponentHistogram::merge(const ExponentHistogram& other) {
  for (std::size_t i = 0; i < bins_.size(); ++i) bins_[i] += other.bins_[i];
  zeros_ += other.zeros_;
  infinities_ += other.infinities_;
  nans_ += other.nans_;
}

std::uint64_t ExponentHistogram::finite_nonzero_count() const {
  std::uint64_t total = 0;
  for (const std::uint64_t count : bins_) total += count;
  return total;
}

int ExponentHistogram::lowest_binade() const {
  for (int b = min_binade; b <= max_binade; ++b)
    if (count(b) != 0) return b;
  return min_binade - 1;
}

int ExponentHistogram::highest_binade() const {
  for (int b = max_binade; b >= min_binade; --b)
    if (count(b) != 0) return b;
  return min_binade - 1;
}

}  // namespace fpscope
