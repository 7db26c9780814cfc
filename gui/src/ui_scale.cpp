// UI scale: rebuild the font atlas and the style for a scale.
#include "ui_scale.hpp"

#include <backends/imgui_impl_opengl3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace fpscope::gui {

namespace {
float scale_now = 1.0f;
constexpr const char* scalable_font = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf";
}  // namespace

void apply_ui_scale(float scale) {
  scale = std::clamp(scale, min_ui_scale, max_ui_scale);
  ImGuiIO& io = ImGui::GetIO();
  io.Fonts->Clear();
  ImFontConfig config;
  config.SizePixels = std::round(base_font_pixels * scale);
  std::error_code error;
  if (scale != 1.0f && std::filesystem::is_regular_file(scalable_font, error))
    io.Fonts->AddFontFromFileTTF(scalable_font, config.SizePixels, &config);
  else
    io.Fonts->AddFontDefault(&config);
  ImGui_ImplOpenGL3_DestroyFontsTexture();
  ImGui_ImplOpenGL3_CreateFontsTexture();
  ImGuiStyle style;
  ImGui::StyleColorsDark(&style);
  style.ScaleAllSizes(scale);
  ImGui::GetStyle() = style;
  scale_now = scale;
}

float current_ui_scale() { return scale_now; }

float default_ui_scale(float content_scale) {
  if (!(content_scale > 0)) return 1.0f;
  return std::clamp(std::round(content_scale * 4.0f) / 4.0f, min_ui_scale, max_ui_scale);
}

}  // namespace fpscope::gui
