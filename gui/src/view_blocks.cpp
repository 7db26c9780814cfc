// Blocks view: what a block-scaled format (MX, NVFP4) does to the selected tensor, from the block
// statistics the run recorded: each element's exponent relative to its block's largest, over the
// element format's window (normal, subnormal, flushed), the exact counts, and the block scales.
#include <fmt/core.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "app.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#include "fpscope/analyzer/block_analysis.hpp"
#include "fpscope/core/names.hpp"
#include "plot_frame.hpp"
#include "share_text.hpp"
#include "ui_scale.hpp"
#include "wrapped_text.hpp"

namespace fpscope::gui {

namespace {

std::string relative_label(double r) { return r == 0 ? std::string("0") : fmt::format("{}", static_cast<int>(r)); }

// The region a relative exponent falls in, for the floor rule's placement.
Rgb band_of(int relative, const RelativeWindow& window) {
  if (relative >= window.normal_from) return palette::normal_band;
  if (relative >= window.subnormal_from) return palette::subnormal_band;
  return palette::flushed_band;
}
Rgb bar_of(int relative, const RelativeWindow& window) {
  if (relative >= window.normal_from) return palette::normal_bar;
  if (relative >= window.subnormal_from) return palette::subnormal_bar;
  return palette::flushed_bar;
}

// A block-scaled recipe's GEMM operands at the shown step (a run trained with --recipe and no
// --record-blocks): what the quantizations its products used did to each, exactly.
void draw_recipe_operands(const Snapshot& snapshot, const RunHeader& header) {
  const BlockRecord& first = snapshot.block_operands.front().blocks;
  // The weights in square tiles (--weight-blocks 2d) are quantized once for both their products.
  const char* tiles = recipe_has_weight_tiles(header.recipe) ? "; the weights in square tiles: one copy both their products share" : "";
  ImGui::TextWrapped("The recipe's GEMM operands at step %lld, as its products saw them: %s in blocks of %d (each product's copy blocked "
                     "along its own reduction axis, summed%s).",
                     static_cast<long long>(snapshot.step), block_format_name(first.format).c_str(), first.format.block_size, tiles);
  ImGui::TextWrapped("Choose 'record blocks' for each tensor's own histogram.");
  if (!ImGui::BeginTable("recipe operands", 6, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_ScrollY)) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* column : {"layer", "operand", "elements", "flushed to zero", "made subnormal", "saturated"}) ImGui::TableSetupColumn(column);
  ImGui::TableHeadersRow();
  for (const OperandBlocks& o : snapshot.block_operands) {
    const BlockStatistics& st = o.blocks.statistics;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(o.name.c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(o.operand.c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%llu", static_cast<unsigned long long>(st.elements));
    for (const std::uint64_t count : {st.flushed_to_zero, st.made_subnormal, st.saturated}) {
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(share_text(count, st.elements, 4).c_str());
    }
  }
  ImGui::EndTable();
}

}  // namespace

void draw_blocks(App& app) {
  const Snapshot* snapshot = nullptr;
  const TensorRecord* record = app.shown_record("No run yet: choose a format under 'record blocks' on the left, then Start.", snapshot);
  if (record == nullptr) return;
  if (!record->blocks) {
    if (!snapshot->block_operands.empty()) {
      draw_recipe_operands(*snapshot, app.header);
      return;
    }
    text_disabled_wrapped("This run recorded no block statistics. Choose a format under 'record blocks' in the settings on the left and "
                          "Start (or --record-blocks mxfp8-e4m3), or follow a log written by fpscope train --record-blocks.");
    return;
  }
  const BlockRecord& blocks = *record->blocks;
  const BlockStatistics& st = blocks.statistics;
  const bool mx = blocks.format.scale == BlockFormat::Scale::e8m0;
  ImGui::TextWrapped("%s %s at step %lld: %s in blocks of %d along the feature axis (attention scores and probabilities: each query's "
                     "keys; %s), %llu elements in %llu blocks", record->name.c_str(),
                     std::string(tensor_kind_name(record->kind)).c_str(), static_cast<long long>(snapshot->step),
                     block_format_name(blocks.format).c_str(), blocks.format.block_size,
                     mx ? (scale_rule_name(blocks.rule) + " rule").c_str() : "E4M3 scales under a float32 tensor scale",
                     static_cast<unsigned long long>(st.elements), static_cast<unsigned long long>(st.blocks));

  if (ImGui::BeginTable("block counts", 3, ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_BordersInnerH)) {
    ImGui::TableSetupColumn("exact counts");
    ImGui::TableSetupColumn("elements");
    ImGui::TableSetupColumn("of all");
    ImGui::TableHeadersRow();
    const auto row = [&](const char* name, Rgb colour, std::uint64_t count, const char* tip) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      swatch_label(name, colour, tip);
      ImGui::TableNextColumn();
      ImGui::Text("%llu", static_cast<unsigned long long>(count));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(share_text(count, st.elements, 4).c_str());
    };
    row("flushed to zero", palette::flushed_bar, st.flushed_to_zero, "Nonzero values whose element is zero: too small for their block's scale.");
    row("made subnormal", palette::subnormal_bar, st.made_subnormal, "Values whose element is a subnormal of the element format.");
    row("saturated", palette::overflow_bar, st.saturated,
        "Values beyond the element format's largest after their block's scale, clamped to it (the OCP floor rule lets a\n"
        "block's largest values do this; round-up never does).");
    row("zero", palette::zero_bar, st.zeros, "Exact zeros among the values.");
    ImGui::EndTable();
  }
  const auto range = scale_exponent_range(blocks.format, st);
  ImGui::TextWrapped("block scales %s; NaN blocks (a NaN or infinity in the block) %llu",
                     range ? (range->low == range->high ? fmt::format("2^{}", range->low) : fmt::format("2^{} .. 2^{}", range->low, range->high)).c_str()
                           : "-",
                     static_cast<unsigned long long>(st.nan_blocks));

  // The relative exponents, 0 (the block's largest binade) down to the lowest recorded, and a
  // few binades of the flushed band beyond the element format's window.
  const RelativeWindow window = relative_window(blocks.format);
  int lowest = window.subnormal_from - 3;
  for (int i = BlockStatistics::relative_exponent_bins - 1; i >= 0; --i)
    if (st.relative_exponents[static_cast<std::size_t>(i)] != 0) {
      lowest = std::min(lowest, -i);
      break;
    }
  std::uint64_t tallest = 1;
  for (const std::uint64_t count : st.relative_exponents) tallest = std::max(tallest, count);
  text_disabled_wrapped("x: each element's binade below its block's largest (0: the largest's own); y: elements, log scale. Bands: where the "
                        "element format puts a binade when the block's largest lands in its top binade (the floor rule; other rules move a block "
                        "up a binade where it would saturate), at binade granularity: a binade's top values may round into the next. The table is exact.");
  const double x0 = lowest - 0.5, x1 = 0.5;
  const PlotFrame frame = PlotFrame::reserve(ImVec2(0, 0), x0, x1, 0,
                                             std::log10(static_cast<double>(tallest)) + 0.3, "relative exponents",
                                             label_margin({"100000"}));
  ImDrawList* draw = ImGui::GetWindowDrawList();
  for (int r = lowest; r <= 0; ++r)
    draw->AddRectFilled(ImVec2(frame.sx(r - 0.5), frame.min.y), ImVec2(frame.sx(r + 0.5), frame.max.y), to_imgui(band_of(r, window)));
  int hovered = 1;
  for (int r = lowest; r <= 0; ++r) {
    const std::uint64_t count = st.relative_exponents[static_cast<std::size_t>(-r)];
    if (count == 0) continue;
    const double height = std::log10(static_cast<double>(count)) + 0.3;
    draw->AddRectFilled(ImVec2(frame.sx(r - 0.4), frame.sy(height)), ImVec2(frame.sx(r + 0.4), frame.sy(0)), to_imgui(bar_of(r, window)));
  }
  if (frame.hovered()) hovered = static_cast<int>(std::lround(frame.data_x(ImGui::GetIO().MousePos.x)));
  if (hovered <= 0 && hovered >= lowest)
    ImGui::SetTooltip("%d binades below the block's largest: %llu elements", -hovered,
                      static_cast<unsigned long long>(st.relative_exponents[static_cast<std::size_t>(-hovered)]));
  frame.axes(nice_tick_step(x1 - x0, 12), relative_label, 0, plain_label);
  for (int decade = 0; decade <= static_cast<int>(std::log10(static_cast<double>(tallest))); ++decade)
    frame.y_tick(decade + 0.3, fmt::format("{}", static_cast<long long>(std::pow(10, decade))));
}

}  // namespace fpscope::gui
