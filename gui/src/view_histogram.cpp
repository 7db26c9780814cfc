// Histogram view: one tensor's exponent histogram at one step, over the target format's regions.
#include <fmt/core.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "app.hpp"
#include "format_regions.hpp"
#include "fpscope/analyzer/range_analysis.hpp"
#include "fpscope/analyzer/scale_semantics.hpp"
#include "plot_frame.hpp"

namespace fpscope::gui {

namespace {

void region_row(const char* name, Rgb colour, std::uint64_t predicted, const RangeReport& report, const std::string& exact) {
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::GetWindowDrawList()->AddRectFilled(p, ImVec2(p.x + 12, p.y + 12), to_imgui(colour));
  ImGui::Dummy(ImVec2(12, 12));
  ImGui::SameLine();
  ImGui::TextUnformatted(name);
  ImGui::TableNextColumn();
  ImGui::Text("%llu", static_cast<unsigned long long>(predicted));
  ImGui::TableNextColumn();
  const std::uint64_t base = report.nonzero_finite();
  ImGui::Text("%.2f%%", base == 0 ? 0.0 : 100.0 * static_cast<double>(predicted) / static_cast<double>(base));
  ImGui::TableNextColumn();
  ImGui::TextUnformatted(exact.c_str());
}

}  // namespace

void draw_histogram(App& app) {
  app.selection_controls();
  const Snapshot* snapshot = app.current_snapshot();
  if (snapshot == nullptr) {
    ImGui::TextDisabled("No run yet: press Start on the left, or open a run log with fpscope-gui --follow run.jsonl.");
    return;
  }
  const TensorRecord* record = app.selected_record(*snapshot);
  if (record == nullptr) {
    ImGui::TextDisabled("Step %lld recorded no %s for this layer.", static_cast<long long>(snapshot->step),
                        std::string(tensor_kind_name(app.kind)).c_str());
    return;
  }
  const Format f = app.target_format();
  const ExponentHistogram& h = record->histogram;
  const RangeReport report = analyze_range(h, f, 0);
  const ScaleLog2 carried = scale_log2_of(record->scale);
  ImGui::Text("%s %s at step %lld: %llu values, %llu zeros; the values carry a scale of 2^%d%s", record->name.c_str(),
              std::string(tensor_kind_name(record->kind)).c_str(), static_cast<long long>(snapshot->step),
              static_cast<unsigned long long>(h.total_count()), static_cast<unsigned long long>(h.zero_count()), carried.log2,
              carried.exact ? "" : " (about)");
  if (record->captured == Capture::as_stored)
    ImGui::TextColored(to_imgui_vec4(palette::subnormal_bar),
                       "Captured as stored (already in the low-precision format): values its cast flushed are among the zeros.");

  // The table: what the target format would do (binade granularity), and what the run's cast did.
  const bool run_format = app.header.format == target_format_names[app.format_index];
  if (ImGui::BeginTable("regions", 4, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_BordersInnerV)) {
    ImGui::TableSetupColumn("region");
    ImGui::TableSetupColumn("values");
    ImGui::TableSetupColumn("% of nonzero");
    ImGui::TableSetupColumn(run_format ? "the run's cast (exact)" : "the run's cast");
    ImGui::TableHeadersRow();
    auto exact = [&](std::uint64_t CastCounts::*member) -> std::string {
      if (!record->cast || !run_format) return run_format ? "not recorded" : "(run cast to " + app.header.format + ")";
      return fmt::format("{}", (*record->cast).*member);
    };
    region_row("flushed to zero", palette::flushed_bar, report.flushed_to_zero, report, exact(&CastCounts::flushed_to_zero));
    region_row("subnormal", palette::subnormal_bar, report.subnormal, report, exact(&CastCounts::made_subnormal));
    region_row("normal", palette::normal_bar, report.normal, report, "");
    region_row("overflow", palette::overflow_bar, report.overflow, report, exact(&CastCounts::overflowed));
    ImGui::EndTable();
  }

  bool& log_counts = app.histogram.log_counts;
  ImGui::Checkbox("log counts", &log_counts);
  ImGui::SameLine();
  ImGui::TextDisabled("bands: what %s does to each binade; bars: %s", target_format_names[app.format_index],
                      record->captured == Capture::before_cast ? "the fp32 values before the cast" : "the values as stored");

  const int flush_edge = format_edges(f).smallest_subnormal - 1;  // the lowest binade the cast keeps
  const bool any = h.finite_nonzero_count() > 0;
  const int lo = std::min(any ? h.lowest_binade() : flush_edge, flush_edge) - 3;
  const int hi = std::max(any ? h.highest_binade() : f.emax(), f.emax()) + 3;
  std::uint64_t top = 1;
  for (int b = lo; b <= hi; ++b) top = std::max(top, h.count(b));
  auto height = [&](std::uint64_t c) { return log_counts ? std::log10(1.0 + static_cast<double>(c)) : static_cast<double>(c); };
  const double y_top = height(top) * 1.05;
  PlotFrame plot = PlotFrame::reserve(ImVec2(0, 0), lo, hi + 1, 0, y_top, "##histogram");
  ImDrawList* draw = ImGui::GetWindowDrawList();
  for (int b = lo; b <= hi; ++b) {
    const BinadeRegion r = region_of_binade(f, b);
    draw->AddRectFilled(ImVec2(std::floor(plot.sx(b)), plot.min.y), ImVec2(std::floor(plot.sx(b + 1)), plot.max.y), to_imgui(band_colour(r)));
  }
  for (int b = lo; b <= hi; ++b) {
    const std::uint64_t c = h.count(b);
    if (c == 0) continue;
    const float x0 = std::floor(plot.sx(b)) + 1, x1 = std::max(x0 + 1, std::floor(plot.sx(b + 1)) - 1);
    draw->AddRectFilled(ImVec2(x0, std::floor(plot.sy(height(c)))), ImVec2(x1, plot.max.y), to_imgui(bar_colour(region_of_binade(f, b))));
  }
  const int span = hi - lo + 1;
  plot.axes(span > 120 ? 20 : span > 60 ? 10 : span > 30 ? 5 : 2, binade_label, 4,
            log_counts ? +[](double y) { return fmt::format("{:.0f}", std::pow(10.0, y) - 1); } : plain_label);
  if (plot.hovered()) {
    const int b = static_cast<int>(std::floor(plot.data_x(ImGui::GetIO().MousePos.x)));
    ImGui::SetTooltip("binade 2^%d: [2^%d, 2^%d)\n%llu values\n%s in %s", b, b, b + 1, static_cast<unsigned long long>(h.count(b)),
                      std::string(region_name(region_of_binade(f, b))).c_str(), target_format_names[app.format_index]);
  }
}

}  // namespace fpscope::gui
