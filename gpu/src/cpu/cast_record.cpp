// The CPU backend's recorded cast: bulk rounding, histogram, outcome counts.
#include "fpscope/gpu/cast_record.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "fpscope/core/bulk.hpp"
#include "fpscope/core/convert.hpp"

namespace fpscope {

namespace {

struct ChunkOutcomes {
  std::uint32_t flushed = 0, subnormal = 0, overflowed = 0, at_max = 0;
};

// classify_cast's rule on the bit patterns of one chunk (< 2^32 values), in a loop the compiler
// vectorises: 32-bit counters and signed compares (both magnitudes are below 2^31), since 64-bit
// counters cost a widening per lane. Built for AVX-512, AVX2 and the baseline; the loader picks one.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
ChunkOutcomes count_outcomes(const std::uint32_t* before, const std::uint32_t* after, std::size_t n, std::int32_t min_normal,
                             std::int32_t max32) {
  std::uint32_t flushed = 0, subnormal = 0, overflowed = 0, at_max = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto a = static_cast<std::int32_t>(before[i] & 0x7FFFFFFFu), b = static_cast<std::int32_t>(after[i] & 0x7FFFFFFFu);
    const std::uint32_t finite_in = a < 0x7F800000;
    flushed += finite_in & (a != 0) & (b == 0);
    subnormal += (b != 0) & (b < min_normal);
    overflowed += finite_in & (b >= 0x7F800000);
    at_max += finite_in & (b == max32) & (a > max32);
  }
  return {flushed, subnormal, overflowed, at_max};
}

constexpr std::size_t chunk = 4096;

// Zeros and values below min_normal in a chunk of output bit patterns (in a loop the compiler
// vectorises, like count_outcomes).
struct OutputCounts {
  std::uint32_t zeros = 0, below_normal = 0;
};
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
OutputCounts count_outputs(const std::uint32_t* after, std::size_t n, std::uint32_t min_normal) {
  std::uint32_t zeros = 0, below_normal = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t b = after[i] & 0x7FFFFFFFu;
    zeros += b == 0;
    below_normal += b < min_normal;
  }
  return {zeros, below_normal};
}

// A block that cannot overflow: cast straight into out (in place too), then counted from the
// output: a zero input casts to zero, so flushed = zero outputs - zero inputs; made subnormal =
// nonzero outputs below min_normal.
void cast_block_counted_from_output(Format f, std::span<const float> in, std::span<float> out, Context& ctx, std::uint64_t zero_inputs,
                                    std::uint32_t min_normal, CastCounts& counts) {
  std::uint64_t zeros = 0, below_normal = 0;
  for (std::size_t start = 0; start < in.size(); start += chunk) {
    const std::size_t n = std::min(chunk, in.size() - start);
    round_f32(f, in.subspan(start, n), out.subspan(start, n), ctx);
    const OutputCounts c = count_outputs(reinterpret_cast<const std::uint32_t*>(out.data() + start), n, min_normal);
    zeros += c.zeros, below_normal += c.below_normal;
  }
  counts.flushed_to_zero += zeros - zero_inputs;
  counts.made_subnormal += below_normal - zeros;
}

// Any block: each chunk's inputs kept beside its outputs and counted in pairs (classify_cast's
// rule); the rare results that reached +-max from above are resolved one by one (overflow iff
// the cast without saturation overflows).
void cast_block_counted_pairwise(Format f, std::span<const float> in, std::span<float> out, Context& ctx, std::uint32_t min_normal,
                                 std::uint32_t max32, CastCounts& counts) {
  float before[chunk];
  for (std::size_t start = 0; start < in.size(); start += chunk) {
    const std::size_t n = std::min(chunk, in.size() - start);
    std::copy_n(in.data() + start, n, before);
    const std::uint64_t first_random = ctx.stochastic_counter;
    round_f32(f, std::span<const float>(before, n), out.subspan(start, n), ctx);
    const auto* in_bits = reinterpret_cast<const std::uint32_t*>(before);
    const auto* out_bits = reinterpret_cast<const std::uint32_t*>(out.data() + start);
    const ChunkOutcomes outcome = count_outcomes(in_bits, out_bits, n, static_cast<std::int32_t>(min_normal), static_cast<std::int32_t>(max32));
    counts.flushed_to_zero += outcome.flushed;
    counts.made_subnormal += outcome.subnormal;
    counts.overflowed += outcome.overflowed;
    if (outcome.at_max == 0) continue;
    for (std::size_t i = 0; i < n; ++i) {
      if (!classify_cast(f, in_bits[i], out_bits[i]).reached_max_from_above) continue;
      Context plain = ctx;
      plain.saturate = false;
      plain.flags = 0;
      plain.stochastic_counter = first_random + i;  // the same random word
      convert(formats::fp32, f, in_bits[i], plain);
      counts.overflowed += (plain.flags & flag::overflow) != 0;
    }
  }
}

}  // namespace

void cast_and_record(Format f, std::span<const float> in, std::span<float> out, Context& ctx, ExponentHistogram& histogram,
                     CastCounts& counts, std::uint32_t* largest_magnitude, std::span<std::uint16_t> bits) {
  if (in.size() != out.size()) throw std::invalid_argument("cast_and_record: input and output lengths differ");
  if (!bits.empty() && bits.size() != in.size()) throw std::invalid_argument("cast_and_record: input and patterns lengths differ");
  const auto in_begin = reinterpret_cast<std::uintptr_t>(in.data());  // addresses of possibly unrelated arrays
  const auto out_begin = reinterpret_cast<std::uintptr_t>(out.data());
  if (in_begin != out_begin && in_begin < out_begin + out.size_bytes() && out_begin < in_begin + in.size_bytes())
    throw std::invalid_argument("cast_and_record: output overlaps the input without being it");
  const std::uint32_t min_normal = f32_bits_of_min_normal(f);
  const std::uint32_t max32 = f32_bits_of_max_finite(f);
  // Blocks of 64K values (256 KiB, held in L2): the histogram reads a block from memory, then
  // the cast reads it again from L2 in chunks of 4096 that stay in L1 for the counting.
  constexpr std::size_t block = std::size_t{1} << 16;
  for (std::size_t start = 0; start < in.size(); start += block) {
    const std::size_t n = std::min(block, in.size() - start);
    ExponentHistogram block_histogram;  // before the cast overwrites it
    block_histogram.add(in.subspan(start, n), largest_magnitude);
    histogram.merge(block_histogram);
    // A block with no infinity or NaN and nothing in max's binade or above cannot overflow (the
    // rounding is monotonic, max is a value of f): its counts come from the output alone.
    const bool below_max_binade = block_histogram.highest_binade() < binade_of_f32(max32);
    // Nor can a block whose nonzero values are all at least min_normal (a float32 normal too) be
    // flushed or made subnormal: min_normal is a value of f, so it rounds to min_normal or above.
    // Every bf16 cast of a trained tensor is such a block: it is rounded without a count pass.
    const bool from_min_normal_up = block_histogram.lowest_binade() >= std::max(binade_of_f32(min_normal), binade_of_f32(0x00800000u)) ||
                                    block_histogram.finite_nonzero_count() == 0;
    const bool finite = block_histogram.infinity_count() == 0 && block_histogram.nan_count() == 0;
    if (finite && below_max_binade && from_min_normal_up) {
      if (bits.empty()) round_f32_in_normal_range(f, in.subspan(start, n), out.subspan(start, n), ctx);
      else round_f32_with_bits(f, in.subspan(start, n), out.subspan(start, n), bits.subspan(start, n), ctx, true);
      continue;
    }
    if (finite && below_max_binade)
      cast_block_counted_from_output(f, in.subspan(start, n), out.subspan(start, n), ctx, block_histogram.zero_count(), min_normal, counts);
    else
      cast_block_counted_pairwise(f, in.subspan(start, n), out.subspan(start, n), ctx, min_normal, max32, counts);
    if (!bits.empty()) patterns_of_values(f, out.subspan(start, n), bits.subspan(start, n), ctx);
  }
}

}  // namespace fpscope
