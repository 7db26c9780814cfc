// What-if view: a hypothetical loss scale on the recorded gradients, predicted per format, before applying it.
#include <fmt/core.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "app.hpp"
#include "flow_layout.hpp"
#include "ui_scale.hpp"
#include "fpscope/analyzer/scale_semantics.hpp"
#include "plot_frame.hpp"
#include "wrapped_text.hpp"

namespace fpscope::gui {

namespace {

// One horizontal bar split into the four shares of the nonzero finite values.
void stacked_bar(const RangeReport& r, float width) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const double base = static_cast<double>(r.nonzero_finite());
  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw->AddRectFilled(p, ImVec2(p.x + width, p.y + px(16)), to_imgui(palette::heat_empty));
  float x = p.x;
  const std::pair<std::uint64_t, Rgb> parts[] = {{r.flushed_to_zero, palette::flushed_bar},
                                                 {r.subnormal, palette::subnormal_bar},
                                                 {r.normal, palette::normal_bar},
                                                 {r.overflow, palette::overflow_bar}};
  for (const auto& [count, colour] : parts) {
    if (base == 0 || count == 0) continue;
    const float w = std::max(1.0f, std::round(static_cast<float>(count / base) * width));
    draw->AddRectFilled(ImVec2(x, p.y), ImVec2(std::min(x + w, p.x + width), p.y + px(16)), to_imgui(colour));
    x += w;
  }
  ImGui::Dummy(ImVec2(width, px(16)));
}

std::string percent(std::uint64_t count, const RangeReport& r) {
  const std::uint64_t base = r.nonzero_finite();
  return base == 0 ? "-" : fmt::format("{:.2f}%", 100.0 * static_cast<double>(count) / static_cast<double>(base));
}

}  // namespace

void draw_what_if(App& app) {
  const Snapshot* snapshot = app.current_snapshot();
  if (snapshot == nullptr) {
    ImGui::TextDisabled("No recorded histograms yet: train or follow a run, then try a scale here before applying it.");
    return;
  }
  app.selection_controls();
  const int recorded = app.recorded_scale_log2();
  bool& selected_only = app.what_if.selected_tensor_only;
  if (ImGui::RadioButton("every gradient", !selected_only)) selected_only = false;
  ImGui::SameLine();
  if (ImGui::RadioButton("the selected tensor", selected_only)) selected_only = true;
  same_line_if_room(labelled_width(px(200), "recorded steps up to this one"));
  ImGui::SetNextItemWidth(px(200));
  ImGui::SliderInt("recorded steps up to this one", &app.what_if.window, 1, 200);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Predictions and advice sum this many recorded steps: one step's extremes come and go, so advice from\n"
                      "a window moves only when a new extreme enters it or an old one leaves (1: this step alone).");

  // The tensors in question, each part with the scale it was recorded at (the one scale semantics:
  // divided out first; the hypothetical loss scale then moves only gradients).
  std::vector<TensorSeries> series;
  const std::string selected_name = app.tensor_names.empty() ? "" : app.tensor_names[static_cast<std::size_t>(app.tensor_index)];
  for (const TensorSeries& s : app.window_series())
    if (selected_only ? (s.name == selected_name && s.kind == app.kind) : is_gradient(s.kind)) series.push_back(s);
  const bool scaled = series.empty() || loss_scale_multiplies(series.front().kind);
  std::uint64_t values = 0;
  bool as_stored = false;
  for (const TensorSeries& s : series) {
    values += s.parts.front().second.checked_total_count().value_or(0);
    as_stored = as_stored || s.captured == Capture::as_stored;
  }
  if (values == 0) {
    ImGui::TextDisabled("Step %lld has no such tensors recorded.", static_cast<long long>(snapshot->step));
    return;
  }
  if (!scaled) ImGui::TextDisabled("Activations and weights are not multiplied by the loss scale: the scale does not move them.");
  if (as_stored)
    text_disabled_wrapped("Captured as stored (already in the low-precision format): what a cast flushed is among the zeros, and no "
                          "scale can bring it back. Predictions below are for the values that remained.");
  const std::uint64_t steps_summed = series.empty() ? 0 : series.front().steps;
  ImGui::TextWrapped("%llu recorded step%s up to step %lld; the shown step's loss scale 2^%d (each step's own is divided out)",
                     static_cast<unsigned long long>(steps_summed), steps_summed == 1 ? "" : "s", static_cast<long long>(snapshot->step), recorded);
  ImGui::SetNextItemWidth(px(400));
  // The same preview as the Training panel's slider: one hypothetical scale across the views.
  int hypothetical = app.preview_scale_log2();
  if (ImGui::SliderInt("hypothetical loss scale", &hypothetical, slider_min_scale_log2, slider_max_scale_log2, "2^%d"))
    app.preview.scale_log2 = hypothetical;
  const auto analyze_all = [&](Format f) {
    RangeReport total;
    for (const TensorSeries& s : series) total += analyze_series(s, f, hypothetical);
    return total;
  };
  const auto advice_text = [](const LossScaleAdvice& a) {
    return a.kind == LossScaleAdvice::Kind::scale ? fmt::format("2^{}", a.scale_log2)
           : a.kind == LossScaleAdvice::Kind::no_scaling_needed ? std::string("none needed")
                                                                : std::string("-");
  };

  // The engine's answer where the window holds a trainer: the next step re-run at the scale.
  if (const CounterfactualResult* rerun = app.counterfactual_preview(); rerun != nullptr && scaled) {
    RangeReport r;
    for (const TensorRecord& t : rerun->result.snapshot->tensors)
      if (selected_only ? (t.name == selected_name && t.kind == app.kind) : is_gradient(t.kind) && !is_shadow_tensor(t.name))
        r += analyze_range(t.histogram, app.target_format(), 0);
    text_colored_wrapped(palette::ghost_outline,
                       "Step %lld re-run at 2^%d, applying nothing (what Apply gives), in %s: %s flushed, %s subnormal, %s overflow",
                       static_cast<long long>(rerun->step), hypothetical, target_format_names[app.format_index], percent(r.flushed_to_zero, r).c_str(),
                       percent(r.subnormal, r).c_str(), percent(r.overflow, r).c_str());
  } else if (app.counterfactual_pending()) {
    ImGui::TextDisabled("Computing the next step at 2^%d...", hypothetical);
  }
  std::uint64_t not_numbers = 0;
  // The bar as wide as the view leaves beside the other columns, from 120 to 320 pixels: the
  // table's last columns stay in a narrow window.
  float names = 0;
  for (int i = 0; i < target_format_count; ++i) names = std::max(names, ImGui::CalcTextSize(target_format_names[i]).x);
  const float share = std::max(ImGui::CalcTextSize("subnormal").x, ImGui::CalcTextSize("100.00%").x);
  const float others = names + 3 * share + std::max(ImGui::CalcTextSize("recommended").x, ImGui::CalcTextSize("none needed").x) +
                       12 * ImGui::GetStyle().CellPadding.x + px(8);
  const float bar = std::clamp(ImGui::GetContentRegionAvail().x - others, px(120), px(320));
  const float view_right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  float advice_right = 0;  // the advice column's widest text's right end
  if (ImGui::BeginTable("what if", 6, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_BordersInnerH)) {
    ImGui::TableSetupColumn("format");
    ImGui::TableSetupColumn("share of nonzero values", ImGuiTableColumnFlags_WidthFixed, bar);
    ImGui::TableSetupColumn("flushed");
    ImGui::TableSetupColumn("subnormal");
    ImGui::TableSetupColumn("overflow");
    ImGui::TableSetupColumn("recommended");
    ImGui::TableHeadersRow();
    for (int i = 0; i < target_format_count; ++i) {
      const Format f = target_formats[i];
      const RangeReport r = analyze_all(f);
      not_numbers = r.non_finite;  // the same for every format
      const LossScaleAdvice advice = selected_only ? recommend_loss_scale(series, f) : app.steady_advice(i);
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(target_format_names[i]);
      ImGui::TableNextColumn();
      stacked_bar(r, bar);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(percent(r.flushed_to_zero, r).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(percent(r.subnormal, r).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(percent(r.overflow, r).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(advice_text(advice).c_str());
      advice_right = std::max(advice_right, ImGui::GetItemRectMax().x);
      if (ImGui::IsItemHovered() && !advice.decided_by.empty())
        ImGui::SetTooltip("set by %s%s", advice.decided_by.c_str(), advice.from_shadow ? ", from fp32 shadows: values nothing flushed" : "");
    }
    ImGui::EndTable();
  }
  app.what_if.report = fmt::format("what-if table right x {:.0f} of view right x {:.0f}\n", advice_right, view_right);
  // Infinities and NaNs recorded in the window are in none of the shares: said, or a window whose
  // gradients overflowed before any cast reads as one that fits.
  if (not_numbers != 0)
    text_colored_wrapped(palette::non_finite_bar, "%llu infinite or NaN value%s in the window, in none of the shares (already overflowed, or NaN)",
                       static_cast<unsigned long long>(not_numbers), not_numbers == 1 ? "" : "s");
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("Predicted at binade granularity (the analyzer's rule) from the window's histograms; the advice keeps the "
                     "largest gradient one binade below overflow (Micikevicius et al. 2018, section 3.2), from fp32 shadows: the run's, "
                     "or where a trainer is here, shadows of its latest steps. What the table cannot know: a value flushed in a later "
                     "layer changes the gradients upstream, which the recorded histograms do not show; the re-run line above, where "
                     "there is one, does.");
  ImGui::PopStyleColor();

  const LossScaleAdvice target_advice = selected_only ? recommend_loss_scale(series, app.target_format()) : app.steady_advice(app.format_index);
  const int recommended = target_advice.kind == LossScaleAdvice::Kind::scale ? target_advice.scale_log2 : 0;
  const bool can_apply = app.session != nullptr && (app.training_status.state == TrainingStatus::State::running ||
                                                    app.training_status.state == TrainingStatus::State::paused);
  const bool advised = target_advice.kind != LossScaleAdvice::Kind::no_gradients;
  ImGui::BeginDisabled(!can_apply || !advised);
  // The session's scale stays within the slider's range.
  const int applicable = std::clamp(recommended, slider_min_scale_log2, slider_max_scale_log2);
  const std::string label = !advised ? std::string("No advice yet (it waits for gradients nothing flushed)")
                            : applicable == recommended
                                ? fmt::format("Apply the recommended {} scale, 2^{}", target_format_names[app.format_index], recommended)
                                : fmt::format("Apply 2^{} (the recommended {} scale 2^{} is outside 2^{}..2^{})", applicable,
                                              target_format_names[app.format_index], recommended, slider_min_scale_log2, slider_max_scale_log2);
  if (ImGui::Button(label.c_str())) app.session->set_static_scale(std::ldexp(1.0, applicable));
  ImGui::EndDisabled();
  ImGui::BeginDisabled(!can_apply);
  ImGui::SameLine();
  const int slider_scale = std::clamp(hypothetical, slider_min_scale_log2, slider_max_scale_log2);
  if (ImGui::Button(fmt::format("Apply 2^{}", slider_scale).c_str())) app.session->set_static_scale(std::ldexp(1.0, slider_scale));
  ImGui::EndDisabled();
  if (!can_apply) ImGui::TextDisabled("(applying needs a run training in this window)");
}

}  // namespace fpscope::gui
