// PNG from the SVG plots, rendered with librsvg and cairo (no display needed).
#pragma once

#include <string_view>

#include "fpscope/snapshot/output_file.hpp"

namespace fpscope {

// Renders an SVG document to a PNG, written through the output policy (atomically for a file).
// `scale` multiplies the SVG's size (2 gives a figure sharp enough to print). Throws
// std::runtime_error naming the output when the SVG does not parse or it cannot be written.
void write_svg_as_png(std::string_view svg, const OutputTarget& target, double scale = 2.0);

}  // namespace fpscope
