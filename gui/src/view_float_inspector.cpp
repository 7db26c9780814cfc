// Float inspector: a number's bits in fp16, bf16, fp32, e4m3 and e5m2 as clickable cells, and what they mean.
#include <fmt/core.h>
#include <imgui.h>
#include <imgui_stdlib.h>

#include <cmath>
#include <string>
#include <vector>

#include "app.hpp"
#include "ui_scale.hpp"
#include "choice_combo.hpp"
#include "fpscope/core/bits.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/decimal.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/neighbours.hpp"
#include "plot_frame.hpp"

namespace fpscope::gui {

namespace {

struct InspectedFormat {
  const char* name;
  Format format;
};
constexpr InspectedFormat inspected[] = {{"fp16", formats::fp16}, {"bf16", formats::bf16}, {"fp32", formats::fp32},
                                         {"e4m3", formats::e4m3}, {"e5m2", formats::e5m2}};

std::string value_text(Format f, std::uint64_t bits) {
  if (is_nan(f, bits)) return "nan";
  return exact_decimal(f, bits);
}

double value_of(Format f, std::uint64_t bits) {
  Context ctx;
  return to_double(f, bits, ctx);
}

// One row of bit cells; returns the bits with a clicked cell flipped (or unchanged).
std::uint64_t bit_cells(Format f, std::uint64_t bits, const char* id) {
  const int width = f.width();
  std::uint64_t result = bits;
  ImGui::PushID(id);
  for (int i = width - 1; i >= 0; --i) {
    const bool sign = i == width - 1;
    const bool exponent = !sign && i >= f.mantissa_bits;
    const Rgb c = sign ? palette::sign_cell : exponent ? palette::exponent_cell : palette::mantissa_cell;
    ImGui::PushID(i);
    ImGui::PushStyleColor(ImGuiCol_Button, to_imgui(c));
    ImGui::PushStyleColor(ImGuiCol_ButtonHovered, IM_COL32(std::min(255, c.r + 40), std::min(255, c.g + 40), std::min(255, c.b + 40), 255));
    const bool one = ((bits >> i) & 1u) != 0;
    if (ImGui::Button(one ? "1" : "0", ImVec2(width > 16 ? 17 : 22, 22))) result = bits ^ (std::uint64_t{1} << i);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("bit %d: %s", i, sign ? "sign" : exponent ? "exponent" : "mantissa (fraction)");
    ImGui::PopStyleColor(2);
    ImGui::PopID();
    if (i > 0) ImGui::SameLine(0, (i == width - 1 || i == f.mantissa_bits) ? px(6) : px(1));
  }
  ImGui::PopID();
  return result;
}

void number_line(Format f, std::uint64_t bits) {
  if (!is_finite(f, bits)) return;
  std::vector<std::uint64_t> around{bits};
  for (int i = 0; i < 10; ++i) {
    const std::uint64_t up = next_up(f, around.back());
    if (!is_finite(f, up) || up == around.back()) break;
    around.push_back(up);
  }
  std::vector<std::uint64_t> below;
  std::uint64_t down = bits;
  for (int i = 0; i < 10; ++i) {
    down = next_down(f, down);
    if (!is_finite(f, down)) break;
    below.push_back(down);
  }
  around.insert(around.begin(), below.rbegin(), below.rend());
  const double lo = value_of(f, around.front()), hi = value_of(f, around.back());
  if (!(hi > lo)) return;
  PlotFrame line = PlotFrame::reserve(ImVec2(0, px(70)), lo, hi, 0, 1, "##number_line");
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const float mid = (line.min.y + line.max.y) / 2;
  draw->AddLine(ImVec2(line.min.x, mid), ImVec2(line.max.x, mid), to_imgui(palette::axis_line));
  for (std::uint64_t v : around) {
    const float x = line.sx(value_of(f, v));
    const bool self = v == bits;
    draw->AddLine(ImVec2(x, mid - (self ? px(16) : px(8))), ImVec2(x, mid + (self ? px(16) : px(8))),
                  self ? to_imgui(palette::scale_line) : to_imgui(palette::label_text), self ? 3.0f : 1.0f);
  }
  const std::string left = fmt::format("{:.7g}", lo), right = fmt::format("{:.7g}", hi);
  draw->AddText(ImVec2(line.min.x, line.max.y + 2), to_imgui(palette::label_text), left.c_str());
  draw->AddText(ImVec2(line.max.x - ImGui::CalcTextSize(right.c_str()).x, line.max.y + 2), to_imgui(palette::label_text), right.c_str());
  if (line.hovered()) ImGui::SetTooltip("the representable values nearest the number; the spacing doubles at each power of two");
}

void details(Format f, std::uint64_t bits, const ParsedNumber& number, std::uint8_t flags) {
  const bool negative = sign_of(f, bits);
  const auto biased = biased_exponent_of(f, bits);
  const FloatClass c = classify(f, bits);
  ImGui::Text("class      %s", std::string(float_class_name(c)).c_str());
  ImGui::Text("sign       %d (%s)", negative ? 1 : 0, negative ? "negative" : "positive");
  ImGui::Text("exponent   biased %llu, bias %d, unbiased %s", static_cast<unsigned long long>(biased), f.bias(),
              biased == 0 ? fmt::format("{} (subnormal: emin, hidden bit 0)", f.emin()).c_str()
                          : fmt::format("{} (hidden bit 1)", static_cast<int>(biased) - f.bias()).c_str());
  ImGui::Text("mantissa   0x%llX of %d bits", static_cast<unsigned long long>(mantissa_of(f, bits)), f.mantissa_bits);
  ImGui::TextWrapped("value      %s", value_text(f, bits).c_str());
  if (is_finite(f, bits)) {
    ImGui::TextWrapped("next up    %s", value_text(f, next_up(f, bits)).c_str());
    ImGui::TextWrapped("next down  %s", value_text(f, next_down(f, bits)).c_str());
    ImGui::Text("ulp        2^%d", ulp_exponent(f, bits));
    if (number.kind == ParsedNumber::Kind::finite) {
      const ConversionError error = conversion_error(f, bits, number);
      ImGui::TextWrapped("error      %s (relative %.3g)", error.absolute.c_str(), error.relative);
    }
  }
  ImGui::Text("flags      %s", flags == 0 ? "none" : describe_flags(flags).c_str());
  ImGui::Text("range      min subnormal 2^%d, min normal 2^%d, max %s", f.emin() - f.mantissa_bits, f.emin(),
              value_text(f, f.max_finite_bits()).c_str());
}

}  // namespace

void draw_float_inspector(App& app) {
  InspectorState& s = app.inspector;
  ImGui::SetNextItemWidth(px(320));
  ImGui::InputText("number", &s.text);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(px(120));
  choice_combo("rounding", s.rounding, deterministic_rounding_modes, rounding_mode_name);
  int& detail = s.detail;
  ParsedNumber number;
  try {
    number = parse_number(s.text);
  } catch (const ParseError& e) {
    ImGui::TextColored(to_imgui_vec4(palette::error_text), "%s", e.what());
    ImGui::TextDisabled("Numbers: 0.1, -6.1e-5, 65520, hex floats such as 0x1.8p-3, inf, nan.");
    return;
  }
  const Format detail_format = inspected[detail].format;
  ImGui::TextUnformatted("special values:");
  const std::pair<const char*, std::uint64_t> specials[] = {
      {"0", 0},
      {"-0", detail_format.sign_mask()},
      {"min subnormal", detail_format.min_subnormal_bits()},
      {"min normal", detail_format.min_normal_bits()},
      {"1", 0},
      {"max", detail_format.max_finite_bits()},
      {"inf", detail_format.has_infinity() ? infinity(detail_format, false) : detail_format.max_finite_bits()},
      {"nan", detail_format.quiet_nan_bits()}};
  for (const auto& [label, bits] : specials) {
    ImGui::SameLine();
    if (ImGui::SmallButton(label)) s.text = std::string(label) == "1" ? "1" : std::string(label) == "inf" ? "inf" : value_text(detail_format, bits);
  }

  ImGui::Separator();
  for (int i = 0; i < static_cast<int>(std::size(inspected)); ++i) {
    const Format f = inspected[i].format;
    Context ctx;
    ctx.rounding = s.rounding;
    const std::uint64_t bits = round_number(f, number, ctx);
    ImGui::RadioButton(inspected[i].name, &detail, i);
    ImGui::SameLine(px(70));
    const std::uint64_t clicked = bit_cells(f, bits, inspected[i].name);
    ImGui::SameLine();
    ImGui::Text(" 0x%0*llX  %s", (f.width() + 3) / 4, static_cast<unsigned long long>(bits), value_text(f, bits).substr(0, 24).c_str());
    if (clicked != bits) {
      s.text = value_text(f, clicked);
      detail = i;
    }
  }
  ImGui::Separator();
  {
    const Format f = inspected[detail].format;
    Context ctx;
    ctx.rounding = s.rounding;
    const std::uint64_t bits = round_number(f, number, ctx);
    ImGui::Text("%s: %s", inspected[detail].name, format_name(f).c_str());
    details(f, bits, number, ctx.flags);
    number_line(f, bits);
  }
}

}  // namespace fpscope::gui
