// Axes and ticks for the views' plots.
#include "plot_frame.hpp"
#include "ui_scale.hpp"

#include <GL/gl.h>
#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace fpscope::gui {

PlotFrame PlotFrame::reserve(ImVec2 size, double x0, double x1, double y0, double y1, const char* id, float left_margin) {
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  if (size.x <= 0) size.x = avail.x;
  if (size.y <= 0) size.y = avail.y;
  size.x = std::max(size.x, px(80));
  size.y = std::max(size.y, px(60));
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, size);
  PlotFrame frame;
  frame.min = ImVec2(origin.x + (left_margin > 0 ? left_margin : px(56)), origin.y + px(6));
  frame.max = ImVec2(origin.x + size.x - right_margin(), origin.y + size.y - px(22));
  frame.x0 = x0;
  frame.x1 = x1 == x0 ? x0 + 1 : x1;
  frame.y0 = y0;
  frame.y1 = y1 == y0 ? y0 + 1 : y1;
  return frame;
}

void begin_opaque_fills(ImDrawList* draw) {
  draw->AddCallback([](const ImDrawList*, const ImDrawCmd*) { glDisable(GL_BLEND); }, nullptr);
}

void end_opaque_fills(ImDrawList* draw) {
  draw->AddCallback([](const ImDrawList*, const ImDrawCmd*) { glEnable(GL_BLEND); }, nullptr);
}

float PlotFrame::right_margin() { return px(8); }

bool PlotFrame::hovered() const {
  const ImVec2 m = ImGui::GetIO().MousePos;
  return m.x >= min.x && m.x < max.x && m.y >= min.y && m.y < max.y;
}

void PlotFrame::axes(double x_step, std::string (*x_label)(double), int y_ticks, std::string (*y_label)(double), double x_tick_end) const {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImU32 axis = to_imgui(palette::axis_line);
  const ImU32 text = to_imgui(palette::label_text);
  draw->AddRect(min, max, axis);
  if (x_step > 0) {
    const double first = std::ceil(x0 / x_step) * x_step;
    float last_label_end = -1e9f;
    for (double x = first; x <= std::min(x1, x_tick_end) + 1e-9; x += x_step) {
      const float tick_x = sx(x);
      draw->AddLine(ImVec2(tick_x, max.y), ImVec2(tick_x, max.y + px(4)), axis);
      const std::string label = x_label(x);
      const float width = ImGui::CalcTextSize(label.c_str()).x;
      // Centred on its tick, but never past the margin reserve() left right of the frame.
      const float left = std::min(tick_x - width / 2, max.x + right_margin() - width);
      if (left > last_label_end + px(6)) {
        draw->AddText(ImVec2(left, max.y + px(5)), text, label.c_str());
        last_label_end = left + width;
      }
    }
  }
  for (int i = 0; i <= y_ticks && y_ticks > 0; ++i) {
    const double y = y0 + (y1 - y0) * i / y_ticks;
    const float py = sy(y);
    draw->AddLine(ImVec2(min.x - px(4), py), ImVec2(min.x, py), axis);
    const std::string label = y_label(y);
    const ImVec2 size = ImGui::CalcTextSize(label.c_str());
    draw->AddText(ImVec2(min.x - px(6) - size.x, py - size.y / 2), text, label.c_str());
  }
}

void PlotFrame::y_tick(double y, const std::string& label) const {
  if (y < std::min(y0, y1) || y > std::max(y0, y1)) return;
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const float py = sy(y);
  draw->AddLine(ImVec2(min.x - px(4), py), ImVec2(min.x, py), to_imgui(palette::axis_line));
  const ImVec2 size = ImGui::CalcTextSize(label.c_str());
  draw->AddText(ImVec2(min.x - px(6) - size.x, py - size.y / 2), to_imgui(palette::label_text), label.c_str());
}

void PlotFrame::x_title(const char* title) const {
  const ImVec2 size = ImGui::CalcTextSize(title);
  ImGui::GetWindowDrawList()->AddText(ImVec2(max.x - size.x, max.y + px(5) + size.y), to_imgui(palette::label_text), title);
}

double nice_tick_step(double span, int target) {
  if (!(span > 0) || target < 1) return 1;
  const double raw = span / target;
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * decade >= raw) return m * decade;
  return 10 * decade;
}

float label_margin(std::initializer_list<std::string> labels) {
  float widest = 0;
  for (const std::string& label : labels) widest = std::max(widest, ImGui::CalcTextSize(label.c_str()).x);
  return widest + px(12);
}

void swatch_label(const char* name, Rgb colour, const char* tip) {
  const ImVec2 at = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddRectFilled(at, ImVec2(at.x + px(12), at.y + px(12)), to_imgui(colour));
  ImGui::Dummy(px(12, 12));
  ImGui::SameLine();
  ImGui::TextUnformatted(name);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tip);
}

std::string binade_label(double binade) { return fmt::format("2^{}", static_cast<int>(std::lround(binade))); }
std::string plain_label(double value) { return fmt::format("{:.3g}", value); }
std::string step_label(double step) { return fmt::format("{:.0f}", step); }

}  // namespace fpscope::gui
