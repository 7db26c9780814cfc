// Which region of a target format a binade falls in, as the views shade it (range_analysis's rule).
#pragma once

#include "fpscope/core/format.hpp"
#include "palette.hpp"

namespace fpscope::gui {

enum class Region { flushed, subnormal, normal, overflow };

// Binade b of values already multiplied by the scale: below emin - m - 1 rounds to zero; the
// binade just under the smallest subnormal up to emin - 1 is subnormal (the boundary binade
// rounds up, but for its power of two); emin .. emax normal; above emax overflows.
inline Region region_of_binade(Format f, int binade) {
  if (binade < f.emin() - f.mantissa_bits - 1) return Region::flushed;
  if (binade < f.emin()) return Region::subnormal;
  if (binade <= f.emax()) return Region::normal;
  return Region::overflow;
}

inline Rgb band_colour(Region r) {
  switch (r) {
    case Region::flushed: return palette::flushed_band;
    case Region::subnormal: return palette::subnormal_band;
    case Region::normal: return palette::normal_band;
    case Region::overflow: return palette::overflow_band;
  }
  return palette::normal_band;
}

inline Rgb bar_colour(Region r) {
  switch (r) {
    case Region::flushed: return palette::flushed_bar;
    case Region::subnormal: return palette::subnormal_bar;
    case Region::normal: return palette::normal_bar;
    case Region::overflow: return palette::overflow_bar;
  }
  return palette::normal_bar;
}

inline const char* region_name(Region r) {
  switch (r) {
    case Region::flushed: return "flushed to zero";
    case Region::subnormal: return "subnormal";
    case Region::normal: return "normal";
    case Region::overflow: return "overflow";
  }
  return "?";
}

}  // namespace fpscope::gui
