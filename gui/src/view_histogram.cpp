// Histogram view: one tensor's exponent histogram at one step over the target format's regions, on
// an x-axis fixed by the format (never by the data), with the loss-scale preview as a ghost.
#include <fmt/core.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "app.hpp"
#include "fpscope/core/names.hpp"
#include "ui_scale.hpp"
#include "format_regions.hpp"
#include "fpscope/analyzer/culprit_diagnosis.hpp"
#include "fpscope/analyzer/range_analysis.hpp"
#include "fpscope/analyzer/scale_semantics.hpp"
#include "plot_frame.hpp"
#include "share_text.hpp"
#include "wrapped_text.hpp"

namespace fpscope::gui {

namespace {

// Binades shown around the format's range: the window depends on the format alone, so a scale
// change moves the bars across fixed bands.
constexpr int window_below_flush = 12;
constexpr int window_above_overflow = 8;

// One row of the table: a region, the recorded values in it (of all values and of the nonzero
// finite ones), the same at the preview scale, and what the run's cast did (exact counts).
void region_row(const char* name, Rgb colour, const char* tip, std::uint64_t recorded, std::uint64_t previewed, const RangeReport& r,
                const RangeReport& p, const std::string& exact, bool nonzero_share) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  swatch_label(name, colour, tip);
  ImGui::TableNextColumn();
  ImGui::Text("%llu", static_cast<unsigned long long>(recorded));
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(share_text(recorded, r.total, 2).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(nonzero_share ? share_text(recorded, r.nonzero_finite(), 2).c_str() : "");
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(nonzero_share ? fmt::format("{} ({} of nonzero)", share_text(previewed, p.total, 2), share_text(previewed, p.nonzero_finite(), 2)).c_str()
                                       : share_text(previewed, p.total, 2).c_str());
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(exact.c_str());
}

}  // namespace

void draw_histogram(App& app) {
  const Snapshot* snapshot = nullptr;
  const TensorRecord* record = app.shown_record("No run yet: press Start on the left.", snapshot);
  if (record == nullptr) return;
  const Format f = app.target_format();
  const char* format = target_format_names[app.format_index];
  const ExponentHistogram& h = record->histogram;
  const ScaleLog2 carried = scale_log2_of(record->scale);
  // The one scale semantics (scale_semantics.hpp): the preview's loss scale moves only what a loss
  // scale multiplies; the rest is brought to scale 1.
  const bool moves = loss_scale_multiplies(record->kind);
  const int preview = app.preview_scale_log2();
  const int shift = shift_of_part(record->kind, carried.log2, preview);
  const RangeReport recorded = analyze_range(h, f, 0);
  // Where the window holds a trainer, the preview is the engine's: the next step run again at the
  // slider's scale, applying nothing (what Apply gives). Until it arrives, and for a followed log,
  // the recorded values shifted -- which cannot show what the run flushed downstream.
  const TensorRecord* rerun = moves && app.preview.scale_log2 ? app.counterfactual_record(record->name, record->kind) : nullptr;
  const RangeReport previewed = rerun != nullptr ? analyze_range(rerun->histogram, f, 0) : analyze_range(h, f, shift);
  const ExponentHistogram ghost = rerun != nullptr ? rerun->histogram : shift_histogram(h, shift).histogram;
  const bool draw_ghost = rerun != nullptr || shift != 0;
  ImGui::TextWrapped("%s %s at step %lld: %llu values, carrying a scale of 2^%d%s", record->name.c_str(),
              std::string(tensor_kind_name(record->kind)).c_str(), static_cast<long long>(snapshot->step),
              static_cast<unsigned long long>(h.total_count()), carried.log2, carried.exact ? "" : " (about)");
  if (snapshot->culprit) {  // a bad step: what broke it, and whether this is it
    const bool this_one = snapshot->culprit->name == record->name && snapshot->culprit->kind == record->kind;
    StepRecord step = snapshot->step_record();
    const char* what = step.skipped ? "skipped."
                       : !step.finished ? "did not finish (its loop stopped inside it): these are the tensors it read before."
                                        : "lost its loss.";
    step.finished = true;  // said above, not again in the diagnosis
    ImGui::PushStyleColor(ImGuiCol_Text, to_imgui_vec4(palette::skipped_mark));
    ImGui::TextWrapped("Step %lld %s %s%s", static_cast<long long>(snapshot->step), what, this_one ? "This tensor is its culprit: " : "Its culprit: ",
                       culprit_diagnosis(step).c_str());
    ImGui::PopStyleColor();
  }
  if (moves && app.preview.scale_log2) {
    const double zero_share = h.total_count() == 0 ? 0.0 : 100.0 * static_cast<double>(h.zero_count()) / static_cast<double>(h.total_count());
    if (rerun != nullptr) {
      text_colored_wrapped(palette::ghost_outline, "Outline: step %lld run again at 2^%d, applying nothing: what Apply gives.",
                         static_cast<long long>(app.counterfactual_preview()->step), preview);
    } else if (app.counterfactual_pending()) {
      text_colored_wrapped(palette::ghost_outline, "Computing the next step at 2^%d... (meanwhile the outline moves the recorded values)",
                         preview);
    } else if (app.follower) {
      text_colored_wrapped(palette::subnormal_bar,
                         "Outline: the recorded values moved to 2^%d. It cannot see values flushed downstream: %.1f%% of these are zeros, "
                         "and gradients that later layers flushed may hide among them.",
                         preview, zero_share);
    }
  }
  if (record->captured == Capture::as_stored)
    text_colored_wrapped(palette::subnormal_bar,
                       "Captured as stored (already in the low-precision format): values its cast flushed are among the zeros.");

  const bool run_format = run_cast_to(app.header, format);
  const auto exact = [&](std::uint64_t CastCounts::*member) -> std::string {
    if (!run_format) return app.header.format_assumed ? "(run's cast not known)" : "(run cast to " + app.header.format + ")";
    return record->cast ? fmt::format("{}", (*record->cast).*member) : std::string("not recorded");
  };
  const FormatEdges edges = format_edges(f);
  const std::string flushed_tip = fmt::format("Below 2^{}, half of {}'s smallest subnormal 2^{}: the cast rounds these to zero.",
                                              edges.smallest_subnormal - 1, format, edges.smallest_subnormal);
  const std::string subnormal_tip = fmt::format("2^{} .. 2^{}: kept as subnormals, with fewer significant bits the smaller they are.",
                                                edges.smallest_subnormal - 1, edges.smallest_normal);
  const std::string normal_tip = fmt::format("2^{} .. 2^{}: kept with {}'s full {} bits of precision.", edges.smallest_normal,
                                             edges.overflow, format, f.mantissa_bits + 1);
  const std::string overflow_tip = fmt::format("From 2^{} up, past {}'s largest finite value: the cast gives {}.", edges.overflow, format,
                                               overflow_description(f));
  // Scrolled sideways, the region names held, where the view is narrower than the table; as tall
  // as its rows, and the scroll bar where the last frame needed one.
  const ImGuiStyle& style = ImGui::GetStyle();
  const float table_height = 7 * (ImGui::GetTextLineHeight() + 2 * style.CellPadding.y) + px(2) +
                             (app.histogram.table_scrolls ? style.ScrollbarSize : 0);
  if (ImGui::BeginTable("regions", 6, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollX,
                        ImVec2(0, table_height))) {
    app.histogram.table_scrolls = ImGui::GetScrollMaxX() > 0;
    ImGui::TableSetupScrollFreeze(1, 0);
    ImGui::TableSetupColumn("region");
    ImGui::TableSetupColumn("values");
    ImGui::TableSetupColumn("of all");
    ImGui::TableSetupColumn("of nonzero");
    ImGui::TableSetupColumn(rerun != nullptr ? fmt::format("at 2^{} (step re-run)", preview).c_str()
                            : moves        ? fmt::format("at 2^{} (shifted)", preview).c_str()
                                           : "preview (not moved)");
    ImGui::TableSetupColumn(run_format ? "the run's cast (exact)" : "the run's cast");
    ImGui::TableHeadersRow();
    region_row("flushed to zero", palette::flushed_bar, flushed_tip.c_str(), recorded.flushed_to_zero, previewed.flushed_to_zero, recorded,
               previewed, exact(&CastCounts::flushed_to_zero), true);
    region_row("subnormal", palette::subnormal_bar, subnormal_tip.c_str(), recorded.subnormal, previewed.subnormal, recorded, previewed,
               exact(&CastCounts::made_subnormal), true);
    region_row("normal", palette::normal_bar, normal_tip.c_str(), recorded.normal, previewed.normal, recorded, previewed, "", true);
    region_row("overflow", palette::overflow_bar, overflow_tip.c_str(), recorded.overflow, previewed.overflow, recorded, previewed,
               exact(&CastCounts::overflowed), true);
    region_row("zero", palette::zero_bar, "Exact zeros before the cast.", recorded.zero, previewed.zero, recorded, previewed, "", false);
    region_row("inf / NaN", palette::non_finite_bar, "Infinities and NaNs before the cast: the step is skipped.", recorded.non_finite,
               previewed.non_finite, recorded, previewed, "", false);
    ImGui::EndTable();
  }

  bool& log_counts = app.histogram.log_counts;
  ImGui::Checkbox("log counts", &log_counts);
  ImGui::SameLine();
  text_disabled_wrapped("bands: what %s does to each binade; bars: %s%s", format,
                        record->captured == Capture::before_cast ? "the values before the cast" : "the values as stored",
                        moves ? "; outline: the same values at the preview scale" : "; a loss scale does not move these values");
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Over the plot: the wheel zooms around the pointer, a drag pans, a double-click goes back to %s's window.", format);

  // The window: the format's regions with a margin, then three columns for zero, inf and NaN,
  // each a twentieth of the binades wide so that their labels never overlap.
  const int window_lo = edges.smallest_subnormal - 1 - window_below_flush;
  const int window_hi = edges.overflow + window_above_overflow;
  auto& zoom = app.histogram.zoom;
  const int lo = zoom ? zoom->first : window_lo;
  const int hi = zoom ? zoom->second : window_hi;
  const int special_width = std::max(1, (hi - lo + 1) / 20);
  const int zero_x = hi + 2, inf_x = zero_x + special_width, nan_x = inf_x + special_width;
  const std::uint64_t specials[] = {h.zero_count(), h.infinity_count(), h.nan_count()};
  // The height is the binades' (the outline's too) and the infinities' and NaNs'. Exact zeros can
  // outnumber everything else -- a gradient whose values later layers flushed is mostly zeros --
  // so their bar is cut at the top with its count written on it, and the binades keep the height.
  std::uint64_t top = 1;
  for (int b = min_binade; b <= max_binade; ++b) top = std::max({top, h.count(b), draw_ghost ? ghost.count(b) : 0});
  top = std::max({top, h.infinity_count(), h.nan_count()});
  auto height = [&](std::uint64_t c) { return log_counts ? std::log10(1.0 + static_cast<double>(c)) : static_cast<double>(c); };
  PlotFrame plot = PlotFrame::reserve(ImVec2(0, 0), lo, nan_x + special_width, 0, height(top) * 1.05, "##histogram");
  app.histogram.geometry = {plot.min.x, plot.max.x, lo, nan_x + special_width};
  ImDrawList* draw = ImGui::GetWindowDrawList();
  // One rectangle per run of binades in the same region: the same pixels as one per binade, but
  // software GL pays per rectangle and tile, and thin ones cost it most of a frame.
  begin_opaque_fills(draw);
  for (int first = lo; first <= hi;) {
    const BinadeRegion region = region_of_binade(f, first);
    int end = first + 1;
    while (end <= hi && region_of_binade(f, end) == region) ++end;
    draw->AddRectFilled(ImVec2(std::floor(plot.sx(first)), plot.min.y), ImVec2(std::floor(plot.sx(end)), plot.max.y),
                        to_imgui(band_colour(region)));
    first = end;
  }
  end_opaque_fills(draw);
  const auto bar = [&](double x, std::uint64_t c, Rgb colour, int width = 1) {
    const float x0 = std::floor(plot.sx(x)) + 1, x1 = std::max(x0 + 1, std::floor(plot.sx(x + width)) - 1);
    draw->AddRectFilled(ImVec2(x0, std::floor(plot.sy(height(c)))), ImVec2(x1, plot.max.y), to_imgui(colour));
  };
  // Values outside the window are drawn at its edges, with an arrow and their count.
  std::uint64_t below = 0, above = 0;
  for (int b = min_binade; b <= max_binade; ++b) {
    const std::uint64_t c = h.count(b);
    if (c == 0) continue;
    if (b < lo) below += c;
    else if (b > hi) above += c;
    else bar(b, c, bar_colour(region_of_binade(f, b)));
  }
  const Rgb special_colours[] = {palette::zero_bar, palette::non_finite_bar, palette::non_finite_bar};
  const int special_x[] = {zero_x, inf_x, nan_x};
  const char* special_names[] = {"0", "inf", "NaN"};
  // Columns narrower than their names (a narrow view): "inf" a line lower than its neighbours, the
  // counts a line lower still.
  const bool crowded = plot.sx(special_width) - plot.sx(0) < ImGui::CalcTextSize("NaN").x + px(4);
  for (int i = 0; i < 3; ++i) {
    if (specials[i] > 0) bar(special_x[i], std::min(specials[i], top), special_colours[i], special_width);
    if (specials[i] > top) {  // cut: the count on the bar
      const std::string count = fmt::format("{}", specials[i]);
      const ImVec2 count_size = ImGui::CalcTextSize(count.c_str());
      draw->AddText(ImVec2((plot.sx(special_x[i]) + plot.sx(special_x[i] + special_width) - count_size.x) / 2, plot.min.y + px(crowded ? 34 : 18)),
                    to_imgui(palette::label_text), count.c_str());
    }
    const ImVec2 size = ImGui::CalcTextSize(special_names[i]);
    draw->AddText(ImVec2((plot.sx(special_x[i]) + plot.sx(special_x[i] + special_width) - size.x) / 2, plot.min.y + px(crowded && i == 1 ? 18 : 2)),
                  to_imgui(palette::label_text), special_names[i]);
  }
  if (below > 0) draw->AddText(ImVec2(plot.min.x + px(4), plot.min.y + px(18)), to_imgui(palette::label_text), fmt::format("<- {} below", below).c_str());
  if (above > 0) {
    const std::string text = fmt::format("{} above ->", above);
    draw->AddText(ImVec2(plot.sx(hi + 1) - px(4) - ImGui::CalcTextSize(text.c_str()).x, plot.min.y + px(18)), to_imgui(palette::label_text), text.c_str());
  }
  // The ghost, outlined: the step re-run at the preview scale, or the recorded bars moved there.
  if (draw_ghost)
    for (int b = lo; b <= hi; ++b) {
      const std::uint64_t c = ghost.count(b);
      if (c == 0) continue;
      const float x0 = std::floor(plot.sx(b)) + 1, x1 = std::max(x0 + 1, std::floor(plot.sx(b + 1)) - 1);
      draw->AddRect(ImVec2(x0, std::floor(plot.sy(height(c)))), ImVec2(x1, plot.max.y), to_imgui(palette::ghost_outline), 0.0f, 0, 2.0f);
    }
  const int span = hi - lo + 1;
  plot.axes(span > 120 ? 20 : span > 60 ? 10 : 5, binade_label, log_counts ? 0 : 4, plain_label, hi + 1);
  if (log_counts) {  // ticks at whole counts, 0 and powers of ten (evenly spaced heights would label 0.4 of a value "0")
    plot.y_tick(0, "0");
    const int decades = static_cast<int>(std::floor(std::log10(static_cast<double>(top))));
    const int stride = std::max(1, (decades + 6) / 6);  // at most about six labelled powers
    for (int k = 0; k <= decades; k += stride)
      plot.y_tick(height(static_cast<std::uint64_t>(std::llround(std::pow(10.0, k)))), k <= 6 ? fmt::format("{}", std::llround(std::pow(10.0, k))) : fmt::format("1e{}", k));
  }
  // Zoom and pan, over the binades only (the zero / inf / NaN columns stay at the right).
  const ImGuiIO& io = ImGui::GetIO();
  const float per_binade = (plot.sx(hi + 1) - plot.sx(lo)) / static_cast<float>(hi + 1 - lo);
  const bool over_binades = plot.hovered() && plot.data_x(io.MousePos.x) < hi + 1;
  if (over_binades && ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) {
    zoom.reset();
  } else if (over_binades && io.MouseWheel != 0) {
    const double at = plot.data_x(io.MousePos.x);
    const double factor = std::pow(0.8, io.MouseWheel);  // up: closer
    const int width = std::clamp(static_cast<int>(std::lround((hi + 1 - lo) * factor)), 8, max_binade - min_binade + 1);
    int first = static_cast<int>(std::lround(at - (at - lo) * width / (hi + 1 - lo)));
    first = std::clamp(first, min_binade, max_binade + 1 - width);
    zoom = std::make_pair(first, first + width - 1);
  } else if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left) && per_binade > 0) {
    app.histogram.pan_remainder -= io.MouseDelta.x / per_binade;
    const int moved = static_cast<int>(app.histogram.pan_remainder);
    if (moved != 0) {
      app.histogram.pan_remainder -= static_cast<float>(moved);
      const int width = hi + 1 - lo;
      const int first = std::clamp(lo + moved, min_binade, max_binade + 1 - width);
      zoom = std::make_pair(first, first + width - 1);
    }
  }
  if (plot.hovered()) {
    const int b = static_cast<int>(std::floor(plot.data_x(ImGui::GetIO().MousePos.x)));
    if (b >= zero_x && b < nan_x + special_width) {
      const int i = (b - zero_x) / special_width;
      ImGui::SetTooltip("%s: %llu values", special_names[i], static_cast<unsigned long long>(specials[i]));
    } else if (b <= hi) {
      const BinadeRegion r = region_of_binade(f, b);
      ImGui::SetTooltip("binade 2^%d: [2^%d, 2^%d)\n%llu values recorded here%s\n%s in %s", b, b, b + 1,
                        static_cast<unsigned long long>(h.count(b)),
                        draw_ghost ? fmt::format("\n{} would land here at 2^{}", ghost.count(b), preview).c_str() : "",
                        std::string(region_name(r)).c_str(), format);
    }
  }
}

}  // namespace fpscope::gui
