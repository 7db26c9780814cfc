// Reading the rendered frame back and saving it as a PNG.
#pragma once

#include "fpscope/snapshot/output_file.hpp"

namespace fpscope::gui {

// Reads the current framebuffer (width x height, after rendering, before the swap) and writes
// it as a PNG through the output policy. Throws std::runtime_error naming the file on failure.
void save_framebuffer_png(int width, int height, const OutputTarget& target);
// The frame as PNG bytes; `name` is what an error names.
std::string framebuffer_png(int width, int height, const std::string& name);

}  // namespace fpscope::gui
