// Curves view: the loss of every step (raw and smoothed, with the last fp32 run beside it), the
// loss scale in log2, skipped steps marked; for runs with a per-tensor FP8 recipe, one GEMM
// operand's amax and scale every step; round ticks, axis titles, values under the pointer.
#include <fmt/core.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "app.hpp"
#include "flow_layout.hpp"
#include "fpscope/analyzer/culprit_diagnosis.hpp"
#include "fpscope/analyzer/smoothing.hpp"
#include "fpscope/core/printable_text.hpp"
#include "plot_frame.hpp"
#include "ui_scale.hpp"

namespace fpscope::gui {

namespace {

// Polyline of (x, y), thinned to about one point per pixel column; NaN points break the line.
void polyline(const PlotFrame& plot, const std::vector<double>& xs, const std::vector<double>& ys, ImU32 colour, float thickness) {
  const float width = plot.max.x - plot.min.x;
  const std::size_t stride = std::max<std::size_t>(1, xs.size() / static_cast<std::size_t>(std::max(1.0f, width)));
  std::vector<ImVec2> points;
  auto flush = [&] {
    if (points.size() >= 2) ImGui::GetWindowDrawList()->AddPolyline(points.data(), static_cast<int>(points.size()), colour, 0, thickness);
    points.clear();
  };
  for (std::size_t i = 0; i < xs.size(); i += stride) {
    const std::size_t at = std::min(i, xs.size() - 1);
    if (!std::isfinite(ys[at])) {
      flush();
      continue;
    }
    points.emplace_back(plot.sx(xs[at]), std::clamp(plot.sy(ys[at]), plot.min.y, plot.max.y));
  }
  if (!xs.empty() && std::isfinite(ys.back()) && (xs.size() - 1) % stride != 0)
    points.emplace_back(plot.sx(xs.back()), std::clamp(plot.sy(ys.back()), plot.min.y, plot.max.y));
  flush();
}

double log10_or_nan(double v) { return v > 0 && std::isfinite(v) ? std::log10(v) : std::numeric_limits<double>::quiet_NaN(); }

std::string loss_label(double log10_value) { return fmt::format("{:g}", std::pow(10.0, log10_value)); }

double log2_or_nan(double v) { return v > 0 && std::isfinite(v) ? std::log2(v) : std::numeric_limits<double>::quiet_NaN(); }

std::string operand_key(const OperandScaling& o) { return o.name + " " + o.operand; }

// Whole powers of two as y ticks, about one per `spacing` pixels.
void log2_ticks(PlotFrame& plot, double lo, double hi, float spacing) {
  const double step = std::max(1.0, nice_tick_step(hi - lo, std::max(2, static_cast<int>((plot.max.y - plot.min.y) / spacing))));
  for (double y = std::ceil(lo / step) * step; y <= hi; y += step) plot.y_tick(y, fmt::format("2^{:.0f}", y));
}

// app.curves.series, made again where the run's steps, the baseline or the smoothing changed.
const CurveSeries& curve_series(App& app) {
  CurveSeries& c = app.curves.series;
  const bool same = c.run_id == app.header.run_id && c.step_count == app.steps.size() && c.first_step == app.steps.front().step &&
                    c.last_step == app.steps.back().step && c.baseline_count == app.baseline_steps.size() &&
                    (app.baseline_steps.empty() || c.last_baseline_step == app.baseline_steps.back()) &&
                    c.baseline_beside == app.baseline_beside && c.smoothing == app.curves.smoothing;
  if (same) return c;
  c.run_id = app.header.run_id;
  c.step_count = app.steps.size();
  c.first_step = app.steps.front().step;
  c.last_step = app.steps.back().step;
  c.baseline_count = app.baseline_steps.size();
  c.last_baseline_step = app.baseline_steps.empty() ? 0 : app.baseline_steps.back();
  c.baseline_beside = app.baseline_beside;
  c.smoothing = app.curves.smoothing;
  // Every step's record (a run log has one for each step; snapshots only every N).
  c.steps.clear(), c.loss.clear(), c.scale.clear(), c.marked.clear();
  c.unfinished = 0;
  for (const StepRecord& r : app.steps) {
    c.steps.push_back(static_cast<double>(r.step));
    c.loss.push_back(r.loss);
    c.scale.push_back(std::log2(r.loss_scale));
    if (r.skipped || !r.finished) c.marked.push_back(static_cast<double>(r.step));
    if (!r.finished) ++c.unfinished;
  }
  c.smooth = smoothed_curve(c.loss, app.curves.smoothing);
  c.log_loss.resize(c.loss.size());
  c.log_smooth.resize(c.loss.size());
  for (std::size_t i = 0; i < c.loss.size(); ++i) c.log_loss[i] = log10_or_nan(c.loss[i]), c.log_smooth[i] = log10_or_nan(c.smooth[i]);
  // The baseline up to the run's last step (one trained beside it runs ahead), smoothed as the
  // run's curve is, so the two compare step for step.
  c.baseline_steps.clear();
  for (std::size_t i = 0; i < app.baseline_steps.size() && (!app.baseline_beside || app.baseline_steps[i] <= c.steps.back()); ++i)
    c.baseline_steps.push_back(app.baseline_steps[i]);
  const std::vector<double> baseline_smooth = smoothed_curve(
      std::vector<double>(app.baseline_loss.begin(), app.baseline_loss.begin() + static_cast<std::ptrdiff_t>(c.baseline_steps.size())),
      app.curves.smoothing);
  c.log_baseline.clear();
  for (double l : baseline_smooth) c.log_baseline.push_back(log10_or_nan(l));
  c.log_loss_lo = std::numeric_limits<double>::infinity(), c.log_loss_hi = -c.log_loss_lo;
  for (const auto* series : {&c.log_loss, &c.log_baseline})
    for (double v : *series)
      if (std::isfinite(v)) c.log_loss_lo = std::min(c.log_loss_lo, v), c.log_loss_hi = std::max(c.log_loss_hi, v);
  c.scale_lo = *std::min_element(c.scale.begin(), c.scale.end());
  c.scale_hi = *std::max_element(c.scale.begin(), c.scale.end());
  return c;
}

}  // namespace

void draw_curves(App& app) {
  if (app.steps.empty()) {
    ImGui::TextDisabled("No run yet: the loss and the loss scale appear here as steps are taken.");
    return;
  }
  const CurveSeries& series = curve_series(app);
  const std::vector<double>&steps = series.steps, &loss = series.loss, &scale = series.scale, &marked = series.marked,
                      &smooth = series.smooth, &log_loss = series.log_loss, &log_smooth = series.log_smooth,
                      &baseline_steps = series.baseline_steps, &log_baseline = series.log_baseline;

  double x1 = steps.back() + 1;
  if (!baseline_steps.empty()) x1 = std::max(x1, baseline_steps.back() + 1);
  double y0 = series.log_loss_lo, y1 = series.log_loss_hi;
  if (!(y0 <= y1)) y0 = -1, y1 = 1;  // no finite loss yet
  y0 = std::floor(y0 * 4) / 4 - 0.05;
  y1 = std::ceil(y1 * 4) / 4 + 0.05;

  // The latest finished step's loss (a bridge run's last step may not have finished: its loop raised).
  const StepRecord& last = app.steps.back();
  const StepRecord& latest = !last.finished && app.steps.size() > 1 ? app.steps[app.steps.size() - 2] : last;
  std::string headline = fmt::format("loss {:.5g} at step {}", latest.loss, latest.step);
  if (!app.header.precision.empty()) headline += " (" + printable_text(app.header.precision, 40) + ")";
  if (!last.finished) headline += fmt::format("; step {} did not finish", last.step);
  ImGui::TextColored(to_imgui_vec4(palette::loss_line), "%s", headline.c_str());
  // The headline's parts and the smoothing slider on one line where they fit, else on the next.
  if (!baseline_steps.empty()) {
    const std::string baseline = fmt::format("  fp32 baseline {:.5g} at step {:.0f}", app.baseline_loss[baseline_steps.size() - 1], baseline_steps.back());
    same_line_if_room(ImGui::CalcTextSize(baseline.c_str()).x);
    ImGui::TextColored(to_imgui_vec4(palette::baseline_line), "%s", baseline.c_str());
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("The same settings in float32 (no casts, no loss scaling; the same data and seed), %s.\n"
                        "Smoothed as the run's curve is.",
                        app.baseline_beside ? "trained beside the run" : "the fp32 run shown before this one");
  }
  const std::string skipped = series.unfinished == 0 ? fmt::format("  {} skipped steps", marked.size())
                                                     : fmt::format("  {} skipped steps, {} unfinished", marked.size() - series.unfinished, series.unfinished);
  same_line_if_room(ImGui::CalcTextSize(skipped.c_str()).x);
  ImGui::TextColored(to_imgui_vec4(palette::skipped_mark), "%s", skipped.c_str());
  if (ImGui::IsItemHovered() && !marked.empty())
    ImGui::SetTooltip("Red ticks mark them (an unfinished step: its loop stopped inside it). Point at one for its culprit -- the first\n"
                      "tensor that held a NaN, an infinity or a value past the format's largest -- and click it to open that tensor\n"
                      "at that step in Histogram.");
  same_line_if_room(labelled_width(px(160), "smoothing"));
  ImGui::SetNextItemWidth(px(160));
  ImGui::SliderFloat("smoothing", &app.curves.smoothing, 0.0f, 0.999f, "%.3f");
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("As TensorBoard's: an exponential moving average of the loss, s = w s + (1 - w) loss,\n"
                      "divided by 1 - w^n so the first steps are not pulled towards 0. The raw loss stays drawn, faint.");

  // The loss on a log axis: ticks at each decade, and at 2 and 5 where fewer than three decades show.
  std::vector<std::pair<double, std::string>> y_ticks;
  const bool few_decades = y1 - y0 < 3;
  static constexpr double multiples[] = {1, 2, 5};
  for (int d = static_cast<int>(std::floor(y0)); d <= static_cast<int>(std::ceil(y1)); ++d)
    for (std::size_t k = 0; k < (few_decades ? std::size(multiples) : 1); ++k) {
      const double y = d + std::log10(multiples[k]);
      if (y >= y0 && y <= y1) y_ticks.emplace_back(y, loss_label(y));
    }
  float margin = px(56);
  for (const auto& [y, label] : y_ticks) margin = std::max(margin, label_margin({label}));
  const float avail = ImGui::GetContentRegionAvail().y;
  PlotFrame loss_plot = PlotFrame::reserve(ImVec2(0, avail * 0.6f - ImGui::GetFontSize()), 0, x1, y0, y1, "##loss", margin);
  const double x_step = nice_tick_step(x1, std::max(2, static_cast<int>((loss_plot.max.x - loss_plot.min.x) / px(90))));
  loss_plot.axes(x_step, step_label, 0, nullptr);
  for (const auto& [y, label] : y_ticks) loss_plot.y_tick(y, label);
  loss_plot.x_title("step");
  if (!baseline_steps.empty()) polyline(loss_plot, baseline_steps, log_baseline, to_imgui(palette::baseline_line), px(2));
  const bool smoothing = app.curves.smoothing > 0;
  polyline(loss_plot, steps, log_loss, to_imgui(palette::loss_line, smoothing ? 90 : 255), smoothing ? px(1) : px(2));
  if (smoothing) polyline(loss_plot, steps, log_smooth, to_imgui(palette::loss_line), px(2));
  ImDrawList* draw = ImGui::GetWindowDrawList();
  for (double s : marked)
    draw->AddLine(ImVec2(std::floor(loss_plot.sx(s)), loss_plot.max.y - px(10)), ImVec2(std::floor(loss_plot.sx(s)), loss_plot.max.y),
                  to_imgui(palette::skipped_mark), px(2));

  // A per-tensor FP8 run: the operands its step records name, and the chosen one's amax and scale.
  std::vector<std::string> operands;
  for (const OperandScaling& o : last.scaling) operands.push_back(operand_key(o));
  if (!operands.empty() && std::find(operands.begin(), operands.end(), app.curves.scaling_operand) == operands.end())
    app.curves.scaling_operand = operands.back();
  const bool fp8 = !operands.empty();

  ImGui::TextUnformatted(series.unfinished == 0 ? "loss scale (log2); red ticks: skipped steps (click one for its culprit)"
                                                 : "loss scale (log2); red ticks: skipped and unfinished steps (click one for its culprit)");
  const double scale_lo = std::floor(series.scale_lo) - 1, scale_hi = std::ceil(series.scale_hi) + 1;
  const float rest = ImGui::GetContentRegionAvail().y;
  PlotFrame scale_plot = PlotFrame::reserve(ImVec2(0, (fp8 ? rest * 0.4f : rest) - ImGui::GetFontSize()), 0, x1, scale_lo, scale_hi, "##scale",
                                            margin);
  scale_plot.axes(x_step, step_label, 0, nullptr);
  log2_ticks(scale_plot, scale_lo, scale_hi, px(28));
  scale_plot.x_title("step");
  polyline(scale_plot, steps, scale, to_imgui(palette::scale_line), px(2));
  app.curves.plot_left = scale_plot.min.x, app.curves.plot_right = scale_plot.max.x;
  app.curves.plot_top = scale_plot.min.y, app.curves.plot_bottom = scale_plot.max.y, app.curves.plot_steps = x1;
  app.curves.loss_axis_lo = y0, app.curves.loss_axis_hi = y1, app.curves.scale_axis_lo = scale_lo, app.curves.scale_axis_hi = scale_hi;
  for (double s : marked)
    draw->AddLine(ImVec2(std::floor(scale_plot.sx(s)), scale_plot.min.y), ImVec2(std::floor(scale_plot.sx(s)), scale_plot.max.y),
                  to_imgui(palette::skipped_mark), px(1));

  // The chosen operand's amax and the scale its cast used, each step, in log2. Under current
  // scaling amax x scale is the format's largest (448 for E4M3, 57344 for E5M2) over the margin;
  // under delayed scaling the gap between them is the history's lag.
  std::vector<double> amax, fp8_scale;
  std::vector<const OperandScaling*> chosen;  // empty for a run without them
  std::optional<PlotFrame> fp8_plot;
  if (fp8) {
    amax.assign(steps.size(), std::numeric_limits<double>::quiet_NaN());
    fp8_scale = amax;
    chosen.assign(steps.size(), nullptr);
    for (std::size_t i = 0; i < app.steps.size(); ++i)
      for (const OperandScaling& o : app.steps[i].scaling)
        if (operand_key(o) == app.curves.scaling_operand) {
          amax[i] = log2_or_nan(o.amax);
          fp8_scale[i] = log2_or_nan(o.scale);
          chosen[i] = &o;
        }
    ImGui::SetNextItemWidth(px(220));
    if (ImGui::BeginCombo("##operand", app.curves.scaling_operand.c_str())) {
      for (const std::string& key : operands)
        if (ImGui::Selectable(key.c_str(), key == app.curves.scaling_operand)) app.curves.scaling_operand = key;
      ImGui::EndCombo();
    }
    ImGui::SameLine();
    ImGui::TextColored(to_imgui_vec4(palette::amax_line), "amax");
    ImGui::SameLine();
    ImGui::TextUnformatted("and");
    ImGui::SameLine();
    ImGui::TextColored(to_imgui_vec4(palette::fp8_scale_line), "FP8 scale");
    ImGui::SameLine();
    ImGui::TextUnformatted(fmt::format("(log2) of this GEMM operand, every step: {}", app.header.recipe).c_str());
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const auto* series : {&amax, &fp8_scale})
      for (double v : *series)
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (!(lo <= hi)) lo = -1, hi = 1;
    lo = std::floor(lo) - 1, hi = std::ceil(hi) + 1;
    fp8_plot.emplace(PlotFrame::reserve(ImVec2(0, ImGui::GetContentRegionAvail().y - ImGui::GetFontSize()), 0, x1, lo, hi, "##fp8", margin));
    fp8_plot->axes(x_step, step_label, 0, nullptr);
    log2_ticks(*fp8_plot, lo, hi, px(28));
    fp8_plot->x_title("step");
    polyline(*fp8_plot, steps, amax, to_imgui(palette::amax_line), px(2));
    polyline(*fp8_plot, steps, fp8_scale, to_imgui(palette::fp8_scale_line), px(2));
  }

  // Under the pointer, in any plot: a cursor line through all and the step's values. A skipped
  // step within a few pixels of the pointer is the one pointed at: its tick is two pixels wide.
  std::vector<const PlotFrame*> plots{&loss_plot, &scale_plot};
  if (fp8_plot) plots.push_back(&*fp8_plot);
  for (const PlotFrame* plot : plots) {
    if (!plot->hovered()) continue;
    const float mouse_x = ImGui::GetIO().MousePos.x;
    const double x = plot->data_x(mouse_x);
    auto it = std::lower_bound(steps.begin(), steps.end(), std::floor(x));
    if (it == steps.end()) break;
    const auto near_mark = std::lower_bound(marked.begin(), marked.end(), plot->data_x(mouse_x - px(4)));
    if (near_mark != marked.end() && std::abs(plot->sx(*near_mark) - mouse_x) <= px(4))
      it = std::lower_bound(steps.begin(), steps.end(), *near_mark);
    const std::size_t i = static_cast<std::size_t>(it - steps.begin());
    const StepRecord& record = app.steps[i];
    if ((record.skipped || !record.finished) && ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
      const std::string missing = app.open_culprit(record);
      if (!missing.empty()) {
        app.export_message = missing;
        app.export_message_until = app.now + 5;
      }
    }
    for (const PlotFrame* p : plots)
      draw->AddLine(ImVec2(std::floor(p->sx(steps[i])), p->min.y), ImVec2(std::floor(p->sx(steps[i])), p->max.y), to_imgui(palette::axis_line, 160));
    std::string text = fmt::format("step {:.0f}\nloss {:.6g}", steps[i], loss[i]);
    if (smoothing && std::isfinite(smooth[i])) text += fmt::format(" (smoothed {:.6g})", smooth[i]);
    const auto b = std::lower_bound(app.baseline_steps.begin(), app.baseline_steps.end(), steps[i]);
    if (b != app.baseline_steps.end() && *b == steps[i])
      text += fmt::format("\nfp32 baseline {:.6g}", app.baseline_loss[static_cast<std::size_t>(b - app.baseline_steps.begin())]);
    text += fmt::format("\nloss scale 2^{:g}{}", scale[i], record.skipped ? "\nskipped: the optimizer step was not taken" : "");
    if (record.skipped || !std::isfinite(record.loss) || !record.finished)
      text += fmt::format("\nculprit: {}{}", culprit_diagnosis(record), record.culprit ? "\n(click: open it in Histogram)" : "");
    if (const OperandScaling* o = i < chosen.size() ? chosen[i] : nullptr)
      text += fmt::format("\n{} ({}): amax {:.6g}, scale {:.6g}\n{} of {} elements flushed to zero, {} saturated", app.curves.scaling_operand,
                          o->format, o->amax, o->scale, o->flushed_to_zero, o->elements, o->saturated);
    ImGui::SetTooltip("%s", text.c_str());
    break;
  }
}

}  // namespace fpscope::gui
