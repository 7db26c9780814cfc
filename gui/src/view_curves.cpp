// Curves view: loss (with the last fp32 run beside it), the loss scale in log2, skipped steps marked.
#include <fmt/core.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "app.hpp"
#include "plot_frame.hpp"

namespace fpscope::gui {

namespace {

// Polyline of (x, y), thinned to about one point per pixel column.
void polyline(const PlotFrame& plot, const std::vector<double>& xs, const std::vector<double>& ys, Rgb colour) {
  if (xs.size() < 2) return;
  std::vector<ImVec2> points;
  const float width = plot.max.x - plot.min.x;
  const std::size_t stride = std::max<std::size_t>(1, xs.size() / static_cast<std::size_t>(std::max(1.0f, width)));
  for (std::size_t i = 0; i < xs.size(); i += stride)
    points.emplace_back(plot.sx(xs[i]), std::clamp(plot.sy(ys[i]), plot.min.y, plot.max.y));
  points.emplace_back(plot.sx(xs.back()), std::clamp(plot.sy(ys.back()), plot.min.y, plot.max.y));
  ImGui::GetWindowDrawList()->AddPolyline(points.data(), static_cast<int>(points.size()), to_imgui(colour), 0, 2.0f);
}

double log10_clamped(double loss) { return std::log10(std::max(loss, 1e-12)); }

}  // namespace

void draw_curves(App& app) {
  if (app.snapshots.empty()) {
    ImGui::TextDisabled("No run yet: the loss and the loss scale appear here as steps are recorded.");
    return;
  }
  std::vector<double> steps, loss, scale, skipped;
  for (const auto& s : app.snapshots) {
    steps.push_back(static_cast<double>(s->step));
    loss.push_back(log10_clamped(s->loss));
    scale.push_back(std::log2(s->loss_scale));
    if (s->skipped) skipped.push_back(static_cast<double>(s->step));
  }
  std::vector<double> baseline;
  for (double l : app.baseline_loss) baseline.push_back(log10_clamped(l));
  double x1 = steps.back() + 1;
  if (!app.baseline_steps.empty()) x1 = std::max(x1, app.baseline_steps.back() + 1);
  double y0 = *std::min_element(loss.begin(), loss.end()), y1 = *std::max_element(loss.begin(), loss.end());
  for (double l : baseline) y0 = std::min(y0, l), y1 = std::max(y1, l);
  y0 = std::floor(y0 * 4) / 4 - 0.05;
  y1 = std::ceil(y1 * 4) / 4 + 0.05;

  const Snapshot& last = *app.snapshots.back();
  ImGui::TextColored(to_imgui_vec4(palette::loss_line), "loss %.5f at step %lld (%s)", last.loss, static_cast<long long>(last.step), app.header.precision.c_str());
  if (!app.baseline_loss.empty()) {
    ImGui::SameLine();
    ImGui::TextColored(to_imgui_vec4(palette::baseline_line), "  fp32 baseline %.5f", app.baseline_loss.back());
  }
  ImGui::SameLine();
  ImGui::TextColored(to_imgui_vec4(palette::skipped_mark), "  %zu skipped steps", skipped.size());
  const float avail = ImGui::GetContentRegionAvail().y;
  PlotFrame loss_plot = PlotFrame::reserve(ImVec2(0, avail * 0.6f), 0, x1, y0, y1, "##loss");
  const double span = x1;
  const double x_step = span > 5000 ? 1000 : span > 500 ? 100 : span > 50 ? 10 : 1;
  loss_plot.axes(x_step, step_label, 4, +[](double y) { return fmt::format("{:.3g}", std::pow(10.0, y)); });
  if (!app.baseline_steps.empty()) polyline(loss_plot, app.baseline_steps, baseline, palette::baseline_line);
  polyline(loss_plot, steps, loss, palette::loss_line);
  ImDrawList* draw = ImGui::GetWindowDrawList();
  for (double s : skipped)
    draw->AddLine(ImVec2(std::floor(loss_plot.sx(s)), loss_plot.max.y - 10), ImVec2(std::floor(loss_plot.sx(s)), loss_plot.max.y), to_imgui(palette::skipped_mark), 2.0f);
  if (loss_plot.hovered()) {
    const double x = loss_plot.data_x(ImGui::GetIO().MousePos.x);
    const auto it = std::lower_bound(steps.begin(), steps.end(), x);
    if (it != steps.end()) {
      const std::size_t i = static_cast<std::size_t>(it - steps.begin());
      ImGui::SetTooltip("step %.0f\nloss %.6f\nscale 2^%.0f%s", steps[i], app.snapshots[i]->loss, scale[i], app.snapshots[i]->skipped ? "\nskipped" : "");
    }
  }

  ImGui::TextUnformatted("loss scale (log2); red ticks: skipped steps");
  double s0 = *std::min_element(scale.begin(), scale.end()), s1 = *std::max_element(scale.begin(), scale.end());
  const double scale_lo = std::floor(s0) - 1, scale_hi = std::ceil(s1) + 1;
  PlotFrame scale_plot = PlotFrame::reserve(ImVec2(0, 0), 0, x1, scale_lo, scale_hi, "##scale");
  const int span_log2 = static_cast<int>(scale_hi - scale_lo);
  scale_plot.axes(x_step, step_label, span_log2 <= 12 ? span_log2 : span_log2 % 4 == 0 ? 4 : span_log2 % 3 == 0 ? 3 : 2, +[](double y) { return fmt::format("2^{:.0f}", y); });
  polyline(scale_plot, steps, scale, palette::scale_line);
  for (double s : skipped)
    draw->AddLine(ImVec2(std::floor(scale_plot.sx(s)), scale_plot.min.y), ImVec2(std::floor(scale_plot.sx(s)), scale_plot.max.y), to_imgui(palette::skipped_mark), 1.0f);
}

}  // namespace fpscope::gui
