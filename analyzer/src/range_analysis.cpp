// Range analysis at binade granularity: where each binade of a histogram lands in a format.
#include "fpscope/analyzer/range_analysis.hpp"

namespace fpscope {

RangeReport analyze_range(const ExponentHistogram& histogram, Format format, int scale_log2) {
  scale_log2 = clamp_scale_log2(scale_log2);
  RangeReport report;
  report.zero = histogram.zero_count();
  report.non_finite = histogram.infinity_count() + histogram.nan_count();
  const int smallest_subnormal = format.min_subnormal_exponent();  // binade of 2^(emin-m)
  for (int binade = min_binade; binade <= max_binade; ++binade) {
    const std::uint64_t count = histogram.count(binade);
    if (count == 0) continue;
    const int scaled = binade + scale_log2;
    if (scaled > format.emax()) {
      report.overflow += count;
    } else if (scaled >= format.emin()) {
      report.normal += count;
      if (scaled == format.emax()) report.boundary_above += count;
    } else if (scaled >= smallest_subnormal - 1) {
      report.subnormal += count;
      if (scaled == smallest_subnormal - 1) report.boundary_below += count;
    } else {
      report.flushed_to_zero += count;
    }
  }
  report.total = report.zero + report.non_finite + report.nonzero_finite();
  return report;
}

}  // namespace fpscope
