// Heatmap view: steps x binades of one tensor from a texture, and layers x binades at the current step.
#include <GL/gl.h>
#include <fmt/core.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "app.hpp"
#include "flow_layout.hpp"
#include "format_regions.hpp"
#include "heatmap_image.hpp"
#include "plot_frame.hpp"
#include "ui_scale.hpp"

namespace fpscope::gui {

namespace {

// About one column per pixel of a wide screen's plot, under every GL's texture size limit;
// more steps share columns. Each column holds two histograms while the picture is built.
constexpr int max_columns = 2048;

void rebuild_if_stale(App& app, const std::string& key) {
  HeatmapState& state = app.heatmap;
  const bool stale = state.built_version != app.data_version || state.built_key != key;
  // While a run grows, rebuild at most four times a second: the picture stays live, frames stay cheap.
  if (!stale || (state.built_key == key && app.growing && app.now - state.built_at < 0.25)) return;
  const HeatmapImage image =
      build_heatmap(app.snapshots, app.tensor_names[static_cast<std::size_t>(app.tensor_index)], app.kind, max_columns, state.aggregate);
  if (state.texture == 0) glGenTextures(1, &state.texture);
  glBindTexture(GL_TEXTURE_2D, state.texture);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
  if (image.columns > 0)
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, image.columns, binade_count, 0, GL_RGBA, GL_UNSIGNED_BYTE, image.rgba.data());
  state.columns = image.columns;
  state.axis = image.axis;
  state.column_held = image.column_held;
  state.values = image.values;
  state.top = image.top;
  state.column_first_step = image.column_first_step;
  state.column_last_step = image.column_last_step;
  state.column_recorded = image.column_recorded;
  state.lowest_binade = max_binade + 1;
  state.highest_binade = min_binade - 1;
  for (int c = 0; c < image.columns; ++c)
    for (int b = 0; b < binade_count; ++b)
      if (image.values[static_cast<std::size_t>(c) * binade_count + static_cast<std::size_t>(b)] != 0) {
        state.lowest_binade = std::min(state.lowest_binade, b + min_binade);
        state.highest_binade = std::max(state.highest_binade, b + min_binade);
      }
  state.built_version = app.data_version;
  state.built_key = key;
  state.built_at = app.now;
}

// A range line: the colour over a dark underlay twice as wide, visible on every cell of the ramp.
void range_line(ImDrawList* draw, ImVec2 a, ImVec2 b, Rgb colour) {
  draw->AddLine(a, b, to_imgui(palette::line_underlay), px(4));
  draw->AddLine(a, b, to_imgui(colour), px(2));
}

void range_lines_horizontal(const PlotFrame& plot, Format f) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  auto line = [&](int binade, Rgb colour) {
    if (binade < plot.y0 || binade > plot.y1) return;
    const float y = std::floor(plot.sy(binade));
    range_line(draw, ImVec2(plot.min.x, y), ImVec2(plot.max.x, y), colour);
  };
  draw_format_edges(f, line);
}

// The colour bar beside the steps x binades picture: the ramp from 1 (bottom) to the largest value
// (top) on the same log scale as the cells, with a few values marked.
void colour_bar(ImVec2 min, ImVec2 max, double top, const char* title) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const float bar_right = min.x + px(14);
  constexpr int segments = 48;
  for (int i = 0; i < segments; ++i) {
    const float y0 = max.y - (max.y - min.y) * static_cast<float>(i + 1) / segments;
    const float y1 = max.y - (max.y - min.y) * static_cast<float>(i) / segments;
    draw->AddRectFilled(ImVec2(min.x, y0), ImVec2(bar_right, y1), to_imgui(palette::heat((i + 0.5) / segments)));
  }
  draw->AddRect(min, ImVec2(bar_right, max.y), to_imgui(palette::axis_line));
  const ImU32 text = to_imgui(palette::label_text);
  const double log_top = std::log1p(std::max(top, 1.0));
  for (double v = 1; v <= std::max(top, 1.0) * 1.0001; v *= 10) {  // 1, 10, 100, ... on the ramp's log scale
    const float y = max.y - static_cast<float>(std::log1p(v) / log_top) * (max.y - min.y);
    draw->AddLine(ImVec2(bar_right, y), ImVec2(bar_right + px(4), y), to_imgui(palette::axis_line));
    draw->AddText(ImVec2(bar_right + px(6), y - ImGui::GetFontSize() / 2), text, plain_label(v).c_str());
  }
  draw->AddText(ImVec2(bar_right + px(6), min.y - ImGui::GetFontSize() / 2), text, plain_label(top).c_str());
  draw->AddText(ImVec2(min.x, max.y + px(4)), text, title);
}

}  // namespace

void draw_heatmap(App& app) {
  app.selection_controls();
  if (app.snapshots.empty() || app.tensor_names.empty()) {
    ImGui::TextDisabled(app.follower ? "Nothing recorded in the log yet: waiting for its first snapshot."
                                     : "No run yet: press Start on the left, or open a run log with fpscope-gui --follow run.jsonl.");
    return;
  }
  const Format f = app.target_format();
  const std::string key = app.tensor_names[static_cast<std::size_t>(app.tensor_index)] + "/" + std::string(tensor_kind_name(app.kind)) +
                          (app.heatmap.aggregate == HeatmapColumns::Aggregate::mean ? " (mean)" : " (max)");
  rebuild_if_stale(app, key);
  const HeatmapState& state = app.heatmap;

  // Rows to show: the data's binades and the format's edges, with a margin.
  int lo = format_edges(f).smallest_subnormal - 2, hi = format_edges(f).overflow + 1;
  if (state.highest_binade >= state.lowest_binade) {
    lo = std::min(lo, state.lowest_binade - 1);
    hi = std::max(hi, state.highest_binade + 1);
  }
  lo = std::max(lo, min_binade);
  hi = std::min(hi, max_binade);
  HeatmapState& shown = app.heatmap;
  const std::string shown_for = app.header.run_id + "/" + key + "/" + target_format_names[app.format_index];
  if (shown.shown_for != shown_for) shown.shown_for = shown_for, shown.shown_lo = lo, shown.shown_hi = hi;
  lo = shown.shown_lo = std::min(shown.shown_lo, lo);
  hi = shown.shown_hi = std::max(shown.shown_hi, hi);

  const bool several = static_cast<std::size_t>(state.columns) < app.snapshots.size();
  // The caption, with the aggregate's menu after it where the line has room, else wrapped and the
  // menu under it.
  const std::string caption = fmt::format("{} over {} recorded steps in {} columns{}", key, app.snapshots.size(), state.columns,
                                          several ? "; each column shows its steps'" : "");
  const float menu_width = several ? px(70) + ImGui::GetStyle().ItemSpacing.x : 0;
  const bool one_line = ImGui::CalcTextSize(caption.c_str()).x + menu_width <= ImGui::GetContentRegionAvail().x;
  if (one_line) ImGui::TextUnformatted(caption.c_str());
  else ImGui::TextWrapped("%s", caption.c_str());
  if (several) {
    if (one_line) ImGui::SameLine();
    int aggregate = static_cast<int>(state.aggregate);
    ImGui::SetNextItemWidth(px(70));
    if (ImGui::Combo("##aggregate", &aggregate, "mean\0max\0")) app.heatmap.aggregate = static_cast<HeatmapColumns::Aggregate>(aggregate);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("A column holds several steps when there are more steps than columns.\n"
                        "mean: each binade's average count over the column's steps (a steady tensor looks steady).\n"
                        "max: its largest count (a one-step spike stays visible).");
  }
  ImGui::TextColored(to_imgui_vec4(palette::min_subnormal_line), "smallest %s subnormal", target_format_names[app.format_index]);
  same_line_if_room(ImGui::CalcTextSize("smallest normal").x);
  ImGui::TextColored(to_imgui_vec4(palette::min_normal_line), "smallest normal");
  same_line_if_room(ImGui::CalcTextSize("overflow").x);
  ImGui::TextColored(to_imgui_vec4(palette::overflow_line), "overflow");
  const float avail = ImGui::GetContentRegionAvail().y;
  // The columns' step axis: a column sits where its steps are, however they were recorded or thinned.
  const double first_step = static_cast<double>(state.axis.first);
  const double last_step = first_step + static_cast<double>(state.axis.span);
  const float bar_width = px(90);
  PlotFrame plot = PlotFrame::reserve(ImVec2(ImGui::GetContentRegionAvail().x - bar_width, avail * 0.58f), first_step, last_step, lo,
                                      hi + 1, "##steps_binades");
  colour_bar(ImVec2(plot.max.x + px(16), plot.min.y + px(8)), ImVec2(plot.max.x + px(30), plot.max.y),
             state.top, several ? (state.aggregate == HeatmapColumns::Aggregate::mean ? "mean count" : "max count") : "count");
  ImDrawList* draw = ImGui::GetWindowDrawList();
  // Texture rows: row 0 is max_binade. Binade b occupies row (max_binade - b).
  const float v0 = static_cast<float>(max_binade - hi) / binade_count;
  const float v1 = static_cast<float>(max_binade - lo + 1) / binade_count;
  if (state.columns > 0) {  // every texel is opaque (heatmap_image.cpp)
    begin_opaque_fills(draw);
    draw->AddImage(reinterpret_cast<ImTextureID>(static_cast<std::intptr_t>(state.texture)), plot.min, plot.max, ImVec2(0, v0), ImVec2(1, v1));
    end_opaque_fills(draw);
  }
  range_lines_horizontal(plot, f);
  const double step_span = last_step - first_step;
  plot.axes(std::max(1.0, nice_tick_step(step_span, std::max(2, static_cast<int>((plot.max.x - plot.min.x) / px(90))))), step_label, 0, nullptr);
  for (int b = lo; b <= hi + 1; b += (hi - lo > 60 ? 10 : 5)) {
    const std::string label = binade_label(b);
    const ImVec2 size = ImGui::CalcTextSize(label.c_str());
    draw->AddText(ImVec2(plot.min.x - px(6) - size.x, plot.sy(b) - size.y / 2), to_imgui(palette::label_text), label.c_str());
  }
  if (plot.hovered() && state.columns > 0) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const int column = std::clamp(static_cast<int>((m.x - plot.min.x) / (plot.max.x - plot.min.x) * state.columns), 0, state.columns - 1);
    const int binade = static_cast<int>(std::floor(plot.data_y(m.y)));
    const double value = binade < min_binade || binade > max_binade ? 0 : state.values[static_cast<std::size_t>(column) * binade_count + static_cast<std::size_t>(binade - min_binade)];
    const auto c = static_cast<std::size_t>(column);
    const auto a = state.column_first_step[c], z = state.column_last_step[c];
    const std::uint32_t recorded = state.column_recorded[c];
    const std::string what = recorded <= 1 ? fmt::format("{:.0f} values", value)
                             : state.aggregate == HeatmapColumns::Aggregate::mean
                                 ? fmt::format("{:.1f} values a step (mean of {} steps)", value, recorded)
                                 : fmt::format("{:.0f} values (the most in one of {} steps)", value, recorded);
    const std::string steps = a == z ? fmt::format("step {}", a) : fmt::format("steps {}..{}", a, z);
    const auto [begin, end] = state.axis.covered_steps(c);
    const std::string where = state.column_held[c] != 0 ? fmt::format("steps {}..{}: none kept; showing {}", begin, end - 1, steps)
                              : end - begin > 1           ? fmt::format("steps {}..{}: {} recorded", begin, end - 1, steps)
                                                          : steps;
    ImGui::SetTooltip("%s\nbinade 2^%d\n%s", where.c_str(), binade, what.c_str());
  }

  // Layers x binades at the current step: the paper's figure, one row per layer.
  const Snapshot* snapshot = app.current_snapshot();
  ImGui::Text("every layer's %s at step %lld", std::string(tensor_kind_name(app.kind)).c_str(), static_cast<long long>(snapshot->step));
  std::vector<const TensorRecord*> rows;
  for (const std::string& name : app.tensor_names)
    for (const TensorRecord& t : snapshot->tensors)
      if (t.name == name && t.kind == app.kind) rows.push_back(&t);
  if (rows.empty()) {
    ImGui::TextDisabled("This step recorded no %s.", std::string(tensor_kind_name(app.kind)).c_str());
    return;
  }
  PlotFrame layers = PlotFrame::reserve(ImVec2(0, 0), lo, hi + 1, 0, static_cast<double>(rows.size()), "##layers_binades");
  begin_opaque_fills(draw);
  draw->AddRectFilled(layers.min, layers.max, to_imgui(palette::heat_empty));
  std::uint64_t top = 1;
  for (const TensorRecord* t : rows) top = std::max(top, *std::max_element(t->histogram.bins().begin(), t->histogram.bins().end()));
  const auto row_top = [&](std::size_t r) { return std::floor(layers.sy(static_cast<double>(rows.size() - r))); };
  const auto row_bottom = [&](std::size_t r) { return std::floor(layers.sy(static_cast<double>(rows.size() - r - 1))); };
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (int b = lo; b <= hi; ++b) {
      const std::uint64_t c = rows[r]->histogram.count(b);
      if (c == 0) continue;
      const double t = heat_position(static_cast<double>(c), static_cast<double>(top));
      draw->AddRectFilled(ImVec2(std::floor(layers.sx(b)), row_top(r)), ImVec2(std::floor(layers.sx(b + 1)), row_bottom(r)), to_imgui(palette::heat(t)));
    }
  }
  end_opaque_fills(draw);
  for (std::size_t r = 0; r < rows.size(); ++r)
    draw->AddText(ImVec2(layers.min.x - px(52), (row_top(r) + row_bottom(r)) / 2 - ImGui::GetFontSize() / 2), to_imgui(palette::label_text),
                  rows[r]->name.c_str());
  auto line = [&](int binade, Rgb colour) {
    if (binade < lo || binade > hi + 1) return;
    const float x = std::floor(layers.sx(binade));
    range_line(draw, ImVec2(x, layers.min.y), ImVec2(x, layers.max.y), colour);
  };
  draw_format_edges(f, line);
  layers.axes(hi - lo > 60 ? 10 : 5, binade_label, 0, nullptr);
  if (layers.hovered()) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const int b = static_cast<int>(std::floor(layers.data_x(m.x)));
    const auto r = std::min(rows.size() - 1, static_cast<std::size_t>(std::max(0.0, static_cast<double>(rows.size()) - layers.data_y(m.y))));
    ImGui::SetTooltip("%s, step %lld\nbinade 2^%d\n%llu values", rows[r]->name.c_str(), static_cast<long long>(snapshot->step), b,
                      static_cast<unsigned long long>(rows[r]->histogram.count(b)));
  }
}

}  // namespace fpscope::gui
