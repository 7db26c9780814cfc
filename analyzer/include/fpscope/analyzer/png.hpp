// PNG from the SVG plots, rendered with librsvg and cairo (no display needed).
#pragma once

#include <filesystem>
#include <string_view>

namespace fpscope {

// Renders an SVG document to a PNG file, atomically (a temporary file, then rename). `scale`
// multiplies the SVG's size (2 gives a figure sharp enough to print). Throws std::runtime_error
// naming the file when the SVG does not parse or the file cannot be written.
void write_svg_as_png(std::string_view svg, const std::filesystem::path& path, double scale = 2.0);

}  // namespace fpscope
