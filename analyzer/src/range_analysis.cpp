// Range analysis at binade granularity: where each binade of a histogram lands in a format.
#include "fpscope/analyzer/range_analysis.hpp"

namespace fpscope {

BinadeRegion region_of_binade(Format format, int scaled_binade) {
  if (scaled_binade > format.emax()) return BinadeRegion::overflow;
  if (scaled_binade >= format.emin()) return BinadeRegion::normal;
  if (scaled_binade >= format.min_subnormal_exponent() - 1) return BinadeRegion::subnormal;
  return BinadeRegion::flushed_to_zero;
}

std::string_view region_name(BinadeRegion region) {
  switch (region) {
    case BinadeRegion::flushed_to_zero: return "flushed to zero";
    case BinadeRegion::subnormal: return "subnormal";
    case BinadeRegion::normal: return "normal";
    case BinadeRegion::overflow: return "overflow";
  }
  return "?";
}

FormatEdges format_edges(Format format) { return {format.min_subnormal_exponent(), format.emin(), format.emax() + 1}; }

RangeReport analyze_range(const ExponentHistogram& histogram, Format format, int scale_log2) {
  scale_log2 = clamp_scale_log2(scale_log2);
  RangeReport report;
  report.zero = histogram.zero_count();
  report.non_finite = histogram.infinity_count() + histogram.nan_count();
  const FormatEdges edges = format_edges(format);
  for (int binade = min_binade; binade <= max_binade; ++binade) {
    const std::uint64_t count = histogram.count(binade);
    if (count == 0) continue;
    const int scaled = binade + scale_log2;
    switch (region_of_binade(format, scaled)) {
      case BinadeRegion::overflow: report.overflow += count; break;
      case BinadeRegion::normal:
        report.normal += count;
        if (scaled == edges.overflow - 1) report.boundary_above += count;
        break;
      case BinadeRegion::subnormal:
        report.subnormal += count;
        if (scaled == edges.smallest_subnormal - 1) report.boundary_below += count;
        break;
      case BinadeRegion::flushed_to_zero: report.flushed_to_zero += count; break;
    }
  }
  report.total = report.zero + report.non_finite + report.nonzero_finite();
  return report;
}

}  // namespace fpscope
