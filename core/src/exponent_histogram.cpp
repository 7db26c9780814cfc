// ExponentHistogram's bulk binning: one pass over the raw exponent field, rare cases resolved after.
#include "fpscope/core/exponent_histogram.hpp"

#include "exponent_fields.hpp"
#include "fpscope/core/bulk.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace fpscope {

namespace {

// Counts by the biased float32 exponent field (0..255), and exact zeros, where the processor has
// no AVX-512 (exponent_fields_avx512.cpp). Two steps per chunk
// of 4096 values: a vectorised pass extracts the exponent bytes (and counts zeros) into a
// buffer that stays in L1; a scalar pass counts the bytes into eight interleaved tables, so
// that runs of equal exponents -- the common case in tensors -- don't serialise on one counter.
// While counting, it prefetches the chunk after next, so memory keeps streaming during the
// compute-bound step. Built for AVX2 and for the baseline; the loader picks one at run time.
// (Not under ThreadSanitizer: the loader runs the clone's resolver before TSan is up, and it crashes.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx2", "default")))
#endif
FieldCounts count_exponent_fields(const std::uint32_t* bits, std::size_t n) {
  FieldCounts result;
  constexpr std::size_t chunk = 4096;
  constexpr std::size_t tables_count = 8;
  alignas(64) std::uint8_t fields[chunk];
  alignas(64) std::uint32_t tables[tables_count][256] = {};
  std::size_t since_flush = 0;
  for (std::size_t start = 0; start < n; start += chunk) {
    const std::size_t length = std::min(chunk, n - start);
    const std::uint32_t* values = bits + start;
    std::uint32_t zeros = 0, largest = 0;
    for (std::size_t i = 0; i < length; ++i) {
      fields[i] = static_cast<std::uint8_t>(values[i] >> 23);  // the cast drops the sign bit
      zeros += (values[i] << 1) == 0 ? 1u : 0u;
      largest = std::max(largest, values[i] & 0x7FFFFFFFu);
    }
    result.zeros += zeros;
    result.largest_magnitude = std::max(result.largest_magnitude, largest);
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

}  // namespace

void ExponentHistogram::add_bits(std::span<const std::uint32_t> bits, std::uint32_t* largest_magnitude) {
  // The AVX-512 counting where the bulk kernels run their AVX-512 build (FPSCOPE_BULK_ISA follows).
  const FieldCounts counts = bulk_kernel_isa() == "avx512" ? count_exponent_fields_avx512(bits.data(), bits.size())
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
