// What the scalar block path and the per-instruction-set block kernels share: where a block's
// elements lie, and how a block adds to a tensor's statistics.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fpscope/core/block_format.hpp"
#include "fpscope/core/block_scaling.hpp"

namespace fpscope::block_walk {

inline constexpr int max_block_size = 256;

using fpscope::BlockSpan;  // block_scaling.hpp
using fpscope::block_span;

// Counts each value's exponent relative to its block's amax (and the zeros), into four
// interleaved sub-histograms: consecutive values mostly land in the same bin, and one counter
// would make every increment wait for the one before. add_to() sums them into the statistics.
class RelativeExponentCounter {
 public:
  // `magnitudes`: the block's count values' bits without their signs (finite).
  void add_block(const std::uint32_t* magnitudes, std::size_t count, std::uint32_t amax_magnitude) {
    // (An all-zero block's amax has no exponent; its values are all zeros, which use none.)
    const int amax_exponent = amax_magnitude == 0 ? 0 : floor_log2_of_magnitude(amax_magnitude);
    for (std::size_t j = 0; j < count; ++j) {
      const std::uint32_t magnitude = magnitudes[j];
      // Zeros go to a bin of their own (index bins); the exponent of a zero is not used.
      const int exponent = magnitude == 0 ? 0 : floor_log2_of_magnitude(magnitude);
      const std::size_t bin = magnitude == 0 ? bins : static_cast<std::size_t>(amax_exponent - exponent);
      ++counts_[j & 3][bin];
    }
  }
  void add_to(BlockStatistics& statistics) const {
    for (const auto& lane : counts_) {
      for (std::size_t bin = 0; bin < bins; ++bin) statistics.relative_exponents[bin] += lane[bin];
      statistics.zeros += lane[bins];
    }
  }

 private:
  static constexpr std::size_t bins = BlockStatistics::relative_exponent_bins;
  std::uint64_t counts_[4][bins + 1] = {};
};

// The same counts for the vector kernels, which give each element's bin as a number below 256 (a
// normal input's relative exponent is at most 253) and reduce them here into four interleaved
// sub-histograms of 32-bit counters, added to the statistics before they could wrap. Zeros
// carry zero_mark; subnormal inputs carry elsewhere_mark and come one by one through add_subnormal.
class RelativeBinCounter {
 public:
  static constexpr std::uint32_t zero_mark = 254, elsewhere_mark = 255;
  void add(const std::uint32_t* bins, std::size_t count, BlockStatistics& statistics) {
    if (pending_ + count > (std::size_t{1} << 31)) flush(statistics);
    pending_ += count;
    std::size_t j = 0;
    for (; j + 4 <= count; j += 4) {
      ++counts_[0][bins[j]];
      ++counts_[1][bins[j + 1]];
      ++counts_[2][bins[j + 2]];
      ++counts_[3][bins[j + 3]];
    }
    for (; j < count; ++j) ++counts_[0][bins[j]];
  }
  // A subnormal input (others are ignored) of a block whose amax is 2^amax_exponent or more.
  static void add_subnormal(std::uint32_t magnitude, int amax_exponent, BlockStatistics& statistics) {
    if (magnitude == 0 || (magnitude >> 23) != 0) return;
    ++statistics.relative_exponents[static_cast<std::size_t>(amax_exponent - floor_log2_of_magnitude(magnitude))];
  }
  void flush(BlockStatistics& statistics) {
    for (auto& lane : counts_) {
      for (std::uint32_t bin = 0; bin < zero_mark; ++bin) statistics.relative_exponents[bin] += lane[bin];
      statistics.zeros += lane[zero_mark];
      for (std::uint32_t& count : lane) count = 0;
    }
    pending_ = 0;
  }

 private:
  std::uint32_t counts_[4][256] = {};
  std::size_t pending_ = 0;
};

// One block's scale, size and counts into the tensor's statistics.
inline void add_outcome(BlockStatistics& statistics, const BlockOutcome& outcome) {
  statistics.flushed_to_zero += outcome.flushed_to_zero;
  statistics.made_subnormal += outcome.made_subnormal;
  statistics.saturated += outcome.saturated;
}
inline void add_block(BlockStatistics& statistics, std::uint32_t scale_code, std::size_t count, bool nan_block, const BlockOutcome& outcome) {
  ++statistics.scale_codes[scale_code & 0xFF];
  ++statistics.blocks;
  statistics.elements += count;
  if (nan_block) ++statistics.nan_blocks;
  add_outcome(statistics, outcome);
}

// The largest finite magnitude of `count` float32 values given as bits (NaNs and infinities add
// nothing: nvfp4_amax_contribution): what NVFP4's tensor scale is made from.
inline std::uint32_t nvfp4_amax_bits(const std::uint32_t* values, std::size_t count) {
  std::uint32_t amax = 0;
  for (std::size_t i = 0; i < count; ++i) amax = std::max(amax, nvfp4_amax_contribution(values[i]));
  return amax;
}


}  // namespace fpscope::block_walk
