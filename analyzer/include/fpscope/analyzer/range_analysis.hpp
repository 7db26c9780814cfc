// What a format and a power-of-two scale would do to the values a histogram describes.
#pragma once

#include <cstdint>
#include <string_view>

#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/core/format.hpp"

namespace fpscope {

// Counts of a histogram's values after multiplying by 2^scale_log2 and rounding to nearest into
// a format. Binade granularity decides most values exactly; two places are estimates, and the
// report says how many values sit in them:
//  - the binade just below the smallest subnormal, [2^(emin-m-1), 2^(emin-m)): every value in it
//    rounds up to the smallest subnormal except its exact power of two, a tie that rounds to
//    zero. Counted as subnormal; `boundary_below` is how many there are.
//  - the top binade, [2^emax, 2^(emax+1)): values above max + half an ulp overflow. Counted as
//    normal; `boundary_above` is how many there are.
struct RangeReport {
  std::uint64_t total = 0;            // every value, zeros and non-finite included
  std::uint64_t zero = 0;             // exact zeros before the cast
  std::uint64_t flushed_to_zero = 0;  // nonzero values that round to zero
  std::uint64_t subnormal = 0;        // land in the subnormal range: precision lost
  std::uint64_t normal = 0;
  std::uint64_t overflow = 0;         // finite values beyond the format's range
  std::uint64_t non_finite = 0;       // infinities and NaNs before the cast
  std::uint64_t boundary_below = 0;   // estimate: in the binade under the smallest subnormal
  std::uint64_t boundary_above = 0;   // estimate: in the top binade, may overflow

  double share(std::uint64_t count) const { return total == 0 ? 0.0 : static_cast<double>(count) / static_cast<double>(total); }
  // Shares of the nonzero finite values, the denominator the paper uses.
  std::uint64_t nonzero_finite() const { return flushed_to_zero + subnormal + normal + overflow; }
  // Two reports of disjoint values as one (parts of a series, tensors of a step).
  RangeReport& operator+=(const RangeReport& other) {
    total += other.total;
    zero += other.zero;
    flushed_to_zero += other.flushed_to_zero;
    subnormal += other.subnormal;
    normal += other.normal;
    overflow += other.overflow;
    non_finite += other.non_finite;
    boundary_below += other.boundary_below;
    boundary_above += other.boundary_above;
    return *this;
  }
};

// Scales are powers of two 2^k. Beyond |k| = max_scale_log2 every float32 binade lies outside
// every format's range (fp64's is 2^-1074 .. 2^1024), so a larger |k| says nothing new: the
// functions here clamp k to it, which also keeps binade + k far from int overflow. Margins
// (binades kept below overflow) are clamped to 0 .. max_margin_binades likewise.
inline constexpr int max_scale_log2 = 2048;
inline constexpr int max_margin_binades = 1024;
inline int clamp_scale_log2(int scale_log2) { return scale_log2 < -max_scale_log2 ? -max_scale_log2 : scale_log2 > max_scale_log2 ? max_scale_log2 : scale_log2; }
inline int clamp_margin_binades(int margin) { return margin < 0 ? 0 : margin > max_margin_binades ? max_margin_binades : margin; }

RangeReport analyze_range(const ExponentHistogram& histogram, Format format, int scale_log2);

// The one rule for where a binade of values (already multiplied by the scale) lands in a format,
// at binade granularity (see RangeReport for the two estimated binades): above emax it overflows;
// emin .. emax is normal; from the binade just under the smallest subnormal (2^(emin-m-1), which
// rounds up but for its power of two) to emin - 1 it is subnormal; below, it flushes to zero.
// analyze_range counts by it, the plots and the app shade by it.
enum class BinadeRegion : std::uint8_t { flushed_to_zero, subnormal, normal, overflow };
BinadeRegion region_of_binade(Format format, int scaled_binade);
std::string_view region_name(BinadeRegion region);  // "flushed to zero", "subnormal", "normal", "overflow"

// Where the lines at a format's edges are drawn, as the binade each one starts: the smallest
// subnormal's (emin - m), the smallest normal's (emin), and the first that overflows (emax + 1).
struct FormatEdges {
  int smallest_subnormal = 0;
  int smallest_normal = 0;
  int overflow = 0;
};
FormatEdges format_edges(Format format);

}  // namespace fpscope
