// The CPU backend's recorded cast: bulk rounding, histogram, outcome counts.
#include "fpscope/gpu/cast_record.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "fpscope/core/bulk.hpp"
#include "fpscope/core/convert.hpp"

namespace fpscope {

void cast_and_record(Format f, std::span<const float> in, std::span<float> out, Context& ctx, ExponentHistogram& histogram,
                     CastCounts& counts) {
  if (in.size() != out.size()) throw std::invalid_argument("cast_and_record: input and output lengths differ");
  histogram.add(in);  // before the cast (and before `out` may overwrite `in`)
  // The outcome counts in a loop the compiler vectorises (classify_cast's rule on bit patterns);
  // the rare results that reached ±max from above are resolved afterwards, one by one.
  const std::uint32_t min_normal = static_cast<std::uint32_t>(f.emin() + 127) << 23;
  const std::uint64_t max_bits = f.max_finite_bits();
  const std::uint32_t max32 = (static_cast<std::uint32_t>(static_cast<int>(max_bits >> f.mantissa_bits) - f.bias() + 127) << 23) |
                              (static_cast<std::uint32_t>(max_bits & f.mantissa_mask()) << (23 - f.mantissa_bits));
  constexpr std::size_t chunk = 4096;
  float before[chunk];
  for (std::size_t start = 0; start < in.size(); start += chunk) {
    const std::size_t n = std::min(chunk, in.size() - start);
    std::copy_n(in.data() + start, n, before);
    const std::uint64_t first_random = ctx.stochastic_counter;
    round_f32(f, std::span<const float>(before, n), out.subspan(start, n), ctx);
    const auto* in_bits = reinterpret_cast<const std::uint32_t*>(before);
    const auto* out_bits = reinterpret_cast<const std::uint32_t*>(out.data() + start);
    std::uint64_t flushed = 0, subnormal = 0, overflowed = 0, at_max = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t a = in_bits[i] & 0x7FFFFFFFu, b = out_bits[i] & 0x7FFFFFFFu;
      const bool finite_in = a < 0x7F800000u;
      flushed += finite_in & (a != 0) & (b == 0);
      subnormal += (b != 0) & (b < min_normal);
      overflowed += finite_in & (b >= 0x7F800000u);
      at_max += finite_in & (b == max32) & (a > max32);
    }
    counts.flushed_to_zero += flushed;
    counts.made_subnormal += subnormal;
    counts.overflowed += overflowed;
    if (at_max == 0) continue;
    for (std::size_t i = 0; i < n; ++i) {
      if (!classify_cast(f, in_bits[i], out_bits[i]).reached_max_from_above) continue;
      Context plain = ctx;  // overflow iff the cast without saturation overflows
      plain.saturate = false;
      plain.flags = 0;
      plain.stochastic_counter = first_random + i;  // the same random word
      convert(formats::fp32, f, in_bits[i], plain);
      counts.overflowed += (plain.flags & flag::overflow) != 0;
    }
  }
}

}  // namespace fpscope
