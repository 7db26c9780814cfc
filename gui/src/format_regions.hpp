// The colours of a format's regions as the views shade them; the rule that decides a binade's
// region is the analyzer's (region_of_binade in range_analysis.hpp), never restated here.
#pragma once

#include "fpscope/analyzer/range_analysis.hpp"
#include "palette.hpp"

namespace fpscope::gui {

inline Rgb band_colour(BinadeRegion r) {
  switch (r) {
    case BinadeRegion::flushed_to_zero: return palette::flushed_band;
    case BinadeRegion::subnormal: return palette::subnormal_band;
    case BinadeRegion::normal: return palette::normal_band;
    case BinadeRegion::overflow: return palette::overflow_band;
  }
  return palette::normal_band;
}

inline Rgb bar_colour(BinadeRegion r) {
  switch (r) {
    case BinadeRegion::flushed_to_zero: return palette::flushed_bar;
    case BinadeRegion::subnormal: return palette::subnormal_bar;
    case BinadeRegion::normal: return palette::normal_bar;
    case BinadeRegion::overflow: return palette::overflow_bar;
  }
  return palette::normal_bar;
}

// The three lines at a format's edges (format_edges), in the palette's line colours.
template <typename DrawLine>
void draw_format_edges(Format f, DrawLine line) {
  const FormatEdges edges = format_edges(f);
  line(edges.smallest_subnormal, palette::min_subnormal_line);
  line(edges.smallest_normal, palette::min_normal_line);
  line(edges.overflow, palette::overflow_line);
}

}  // namespace fpscope::gui
