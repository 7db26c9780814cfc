// glReadPixels, flipped to top-down rows, encoded by stb_image_write into memory, then one atomic write.
#include "screenshot.hpp"

#include <GL/gl.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>


namespace fpscope::gui {

void save_framebuffer_png(int width, int height, const OutputTarget& target) { write_output(target, framebuffer_png(width, height, target.given.string())); }

std::string framebuffer_png(int width, int height, const std::string& name) {
  if (width <= 0 || height <= 0) throw std::runtime_error("cannot save " + name + ": the window has no pixels");
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(width) * height * 3);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, width, height, GL_RGB, GL_UNSIGNED_BYTE, pixels.data());
  const std::size_t row = static_cast<std::size_t>(width) * 3;
  std::vector<std::uint8_t> flipped(pixels.size());
  for (int y = 0; y < height; ++y)
    std::copy_n(pixels.data() + static_cast<std::size_t>(height - 1 - y) * row, row, flipped.data() + static_cast<std::size_t>(y) * row);
  std::string png;
  auto append = [](void* context, void* data, int size) { static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<std::size_t>(size)); };
  if (stbi_write_png_to_func(append, &png, width, height, 3, flipped.data(), static_cast<int>(row)) == 0)
    throw std::runtime_error("cannot encode " + name + " as PNG");
  return png;
}

}  // namespace fpscope::gui
