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
  constexpr std::size_t chunk = 4096;
  float before[chunk];
  for (std::size_t start = 0; start < in.size(); start += chunk) {
    const std::size_t n = std::min(chunk, in.size() - start);
    std::copy_n(in.data() + start, n, before);
    round_f32(f, std::span<const float>(before, n), out.subspan(start, n), ctx);
    for (std::size_t i = 0; i < n; ++i) {
      const CastOutcome o = classify_cast(f, float_bits(before[i]), float_bits(out[start + i]));
      counts.flushed_to_zero += o.flushed_to_zero;
      counts.made_subnormal += o.made_subnormal;
      bool overflowed = o.overflowed;
      if (o.reached_max_from_above) {  // overflow iff the cast without saturation overflows
        Context plain = ctx;
        plain.saturate = false;
        plain.flags = 0;
        plain.stochastic_counter = ctx.stochastic_counter - n + i;  // the same random word
        convert(formats::fp32, f, float_bits(before[i]), plain);
        overflowed = (plain.flags & flag::overflow) != 0;
      }
      counts.overflowed += overflowed;
    }
  }
}

}  // namespace fpscope
