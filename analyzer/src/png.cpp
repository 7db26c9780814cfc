// SVG -> PNG with librsvg (parsing, layout, text) and cairo (rasterising, PNG encoding).
#include "fpscope/analyzer/png.hpp"

#include <cairo.h>
#include <librsvg/rsvg.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>


namespace fpscope {

void write_svg_as_png(std::string_view svg, const OutputTarget& target, double scale) {
  GError* error = nullptr;
  RsvgHandle* handle = rsvg_handle_new_from_data(reinterpret_cast<const guint8*>(svg.data()), svg.size(), &error);
  if (handle == nullptr) {
    const std::string message = error != nullptr ? error->message : "unknown error";
    if (error != nullptr) g_error_free(error);
    throw std::runtime_error(target.given.string() + ": cannot render the plot: " + message);
  }
  const std::unique_ptr<RsvgHandle, void (*)(gpointer)> owned(handle, g_object_unref);
  gdouble width = 0, height = 0;
  if (!rsvg_handle_get_intrinsic_size_in_pixels(handle, &width, &height)) width = 960, height = 480;
  const int pixel_width = static_cast<int>(std::ceil(width * scale)), pixel_height = static_cast<int>(std::ceil(height * scale));
  cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, pixel_width, pixel_height);
  const std::unique_ptr<cairo_surface_t, void (*)(cairo_surface_t*)> owned_surface(surface, cairo_surface_destroy);
  cairo_t* cr = cairo_create(surface);
  const std::unique_ptr<cairo_t, void (*)(cairo_t*)> owned_cr(cr, cairo_destroy);
  const RsvgRectangle viewport{0, 0, static_cast<double>(pixel_width), static_cast<double>(pixel_height)};
  if (!rsvg_handle_render_document(handle, cr, &viewport, &error)) {
    const std::string message = error != nullptr ? error->message : "unknown error";
    if (error != nullptr) g_error_free(error);
    throw std::runtime_error(target.given.string() + ": cannot render the plot: " + message);
  }
  cairo_surface_flush(surface);
  // Encode into memory, then write it like every other output: atomically.
  std::string png;
  const auto append = [](void* closure, const unsigned char* data, unsigned int length) -> cairo_status_t {
    static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
    return CAIRO_STATUS_SUCCESS;
  };
  if (cairo_surface_write_to_png_stream(surface, append, &png) != CAIRO_STATUS_SUCCESS)
    throw std::runtime_error(target.given.string() + ": cannot encode the PNG");
  write_output(target, png);
}

}  // namespace fpscope
