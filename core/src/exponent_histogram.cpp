// ExponentHistogram's bulk binning: one pass over the raw exponent field, rare cases resolved after.
#include "fpscope/core/exponent_histogram.hpp"

#include "exponent_fields.hpp"
#include "fpscope/core/bulk.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string_view>

namespace fpscope {

namespace {

// Counts by the biased float32 exponent field (0..255), and exact zeros, on a processor with
// neither AVX-512 nor AVX2 (or where FPSCOPE_BULK_ISA=generic asks for it): each value's field
// taken one at a time.
FieldCounts count_exponent_fields(const std::uint32_t* bits, std::size_t n) {
  return count_fields_in_chunks(bits, n, [](const std::uint32_t* values, std::size_t length, std::uint8_t* fields, std::uint64_t& zeros,
                                            std::uint32_t& largest) {
    std::uint32_t chunk_zeros = 0;
    for (std::size_t i = 0; i < length; ++i) {
      fields[i] = static_cast<std::uint8_t>(values[i] >> 23);  // the cast drops the sign bit
      chunk_zeros += (values[i] << 1) == 0 ? 1u : 0u;
      largest = std::max(largest, values[i] & 0x7FFFFFFFu);
    }
    zeros += chunk_zeros;
  });
}

}  // namespace

void ExponentHistogram::add_bits(std::span<const std::uint32_t> bits, std::uint32_t* largest_magnitude) {
  // The counting of the instruction set the bulk kernels run (FPSCOPE_BULK_ISA follows).
  const std::string_view isa = bulk_kernel_isa();
  const FieldCounts counts = isa == "avx512" ? count_exponent_fields_avx512(bits.data(), bits.size())
                             : isa == "avx2" ? count_exponent_fields_avx2(bits.data(), bits.size())
                                             : count_exponent_fields(bits.data(), bits.size());
  if (largest_magnitude != nullptr) *largest_magnitude = std::max(*largest_magnitude, counts.largest_magnitude);
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

void ExponentHistogram::add(std::span<const float> values, std::uint32_t* largest_magnitude) {
  static_assert(sizeof(float) == sizeof(std::uint32_t));
  add_bits({reinterpret_cast<const std::uint32_t*>(values.data()), values.size()}, largest_magnitude);
}

void ExponentHistogram::add_value(float value) {
  const int slot = histogram_slot_of_f32(float_bits(value));
  if (slot == bin_zero) ++zeros_;
  else if (slot == bin_infinity) ++infinities_;
  else if (slot == bin_nan) ++nans_;
  else ++bins_[static_cast<std::size_t>(slot)];
}

void ExponentHistogram::merge(const ExponentHistogram& other) {
  // Where every count of both is below 2^54, the 2 x (binade_count + 3) of them sum below 2^64:
  // the one OR over them (vectorised) spares the two serial overflow-checked sums. Merges are
  // made per piece of every recorded tensor, so this is the common case by far.
  static_assert(2 * (binade_count + 3) <= (1u << 10));
  std::uint64_t any = zeros_ | infinities_ | nans_ | other.zeros_ | other.infinities_ | other.nans_;
  for (std::size_t i = 0; i < bins_.size(); ++i) any |= bins_[i] | other.bins_[i];
  if ((any >> 54) != 0) {
    const auto mine = checked_total_count(), theirs = other.checked_total_count();
    if (!mine || !theirs || *theirs > std::numeric_limits<std::uint64_t>::max() - *mine)
      throw std::overflow_error("the merged counts pass 2^64");
  }
  for (std::size_t i = 0; i < bins_.size(); ++i) bins_[i] += other.bins_[i];
  zeros_ += other.zeros_;
  infinities_ += other.infinities_;
  nans_ += other.nans_;
}

std::optional<std::uint64_t> ExponentHistogram::checked_total_count() const {
  std::uint64_t total = 0;
  for (const std::uint64_t count : bins_)
    if (__builtin_add_overflow(total, count, &total)) return std::nullopt;
  for (const std::uint64_t count : {zeros_, infinities_, nans_})
    if (__builtin_add_overflow(total, count, &total)) return std::nullopt;
  return total;
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
