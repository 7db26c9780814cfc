// PlotFrame: a rectangle of the window with data coordinates, axes and ticks, drawn with ImDrawList.
#pragma once

#include <imgui.h>

#include <initializer_list>
#include <limits>
#include <string>

#include "palette.hpp"

namespace fpscope::gui {

inline ImU32 to_imgui(Rgb c, int alpha = 255) { return IM_COL32(c.r, c.g, c.b, alpha); }
inline ImVec4 to_imgui_vec4(Rgb c) { return ImVec4(c.r / 255.0f, c.g / 255.0f, c.b / 255.0f, 1.0f); }

struct PlotFrame {
  ImVec2 min, max;            // screen rectangle of the data area
  double x0 = 0, x1 = 1;      // data range along x
  double y0 = 0, y1 = 1;      // data range along y

  // Reserves `size` (pixels; non-positive means "the rest") leaving room for tick labels:
  // `left_margin` pixels on the left for the y labels (0: room for six characters).
  static PlotFrame reserve(ImVec2 size, double x0, double x1, double y0, double y1, const char* id, float left_margin = 0);
  float sx(double x) const { return min.x + static_cast<float>((x - x0) / (x1 - x0)) * (max.x - min.x); }
  float sy(double y) const { return max.y - static_cast<float>((y - y0) / (y1 - y0)) * (max.y - min.y); }
  double data_x(float screen_x) const { return x0 + (screen_x - min.x) / (max.x - min.x) * (x1 - x0); }
  double data_y(float screen_y) const { return y0 + (max.y - screen_y) / (max.y - min.y) * (y1 - y0); }
  bool hovered() const;
  // What reserve() leaves right of the frame, the last x label's room.
  static float right_margin();
  // Ticks: every `x_step` along x up to `x_tick_end` (columns past it are not on the x scale),
  // labelled by `x_label(value)`, and `y_ticks` evenly spaced on y.
  void axes(double x_step, std::string (*x_label)(double), int y_ticks, std::string (*y_label)(double),
            double x_tick_end = std::numeric_limits<double>::infinity()) const;
  // One y tick with its label, left of the frame (for axes whose ticks are not evenly spaced).
  void y_tick(double y, const std::string& label) const;
  // A title under the x axis's labels, at its right end ("step").
  void x_title(const char* title) const;
};

// Fills whose colours are opaque, drawn between these two calls, are written without blending.
// The picture is the same (an alpha of 255 blends to the colour itself); software GL fills an
// unblended rectangle several times faster, and the views' bands cover most of the window.
void begin_opaque_fills(ImDrawList* draw);
void end_opaque_fills(ImDrawList* draw);

// A round tick spacing -- 1, 2 or 5 x 10^k -- that puts at most `target` ticks over `span`.
double nice_tick_step(double span, int target);
// The left margin that fits the widest of these labels, with room for the ticks.
float label_margin(std::initializer_list<std::string> labels);

// A table cell's legend: a colour swatch, then `name`, with `tip` on hover.
void swatch_label(const char* name, Rgb colour, const char* tip);

std::string binade_label(double binade);  // "2^-24"
std::string plain_label(double value);    // three significant digits
std::string step_label(double step);      // an integer, "10000"

}  // namespace fpscope::gui
