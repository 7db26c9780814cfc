// Float inspector: a number in every named format and a custom eXmY as clickable bit cells with
// their indices and fields (and in E8M0, the MX block scale, as its eight exponent bits), what the bits mean (never truncated: scientific form, every digit on
// hover and copy), +-1 ulp, the conversion's rounding mode / FTZ / saturation, and an arithmetic
// panel: a op b in the selected format with the exact result, its two neighbours, which one the
// rounding mode picks and why, and the flags.
#include <fmt/core.h>
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "app.hpp"
#include "choice_combo.hpp"
#include "flow_layout.hpp"
#include "fpscope/core/bits.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/decimal.hpp"
#include "fpscope/core/e8m0.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/neighbours.hpp"
#include "fpscope/core/rounding_choice.hpp"
#include "plot_frame.hpp"
#include "ui_scale.hpp"
#include "wrapped_text.hpp"

namespace fpscope::gui {

namespace {


struct InspectedFormat {
  std::string name;
  Format format;
};

// Every named format, widest first, then the custom one (when its name reads).
std::vector<InspectedFormat> inspected_formats(const std::string& custom, std::string& custom_error) {
  std::vector<InspectedFormat> list;
  for (const char* name : inspector_named_rows) list.push_back({name, parse_format(name)});
  custom_error.clear();
  try {
    list.push_back({custom, parse_format(custom)});
  } catch (const std::exception& e) {
    custom_error = e.what();
  }
  return list;
}

std::string value_text(Format f, std::uint64_t bits) {
  // FNUZ's one NaN is the pattern of -0: its top bit is not a sign.
  if (is_nan(f, bits)) return sign_of(f, bits) && f.flavour != Flavour::fnuz ? "-nan" : "nan";
  return exact_decimal(f, bits);
}

double value_of(Format f, std::uint64_t bits) {
  Context ctx;
  return to_double(f, bits, ctx);
}

// Significant decimal digits that tell every value of the format apart (IEEE 754's Pmin + 1).
int distinguishing_digits(Format f) { return static_cast<int>(std::ceil((f.mantissa_bits + 1) * std::log10(2.0))) + 1; }

// The value in scientific form with enough digits for its format, and all of its digits where
// they are few (448 in e5m2 is "= 4.48e+02", not "~ 4.5e+02"); "=" when that is every digit.
std::string scientific(Format f, std::uint64_t bits) {
  if (is_nan(f, bits)) return value_text(f, bits);
  if (!is_finite(f, bits)) return sign_of(f, bits) ? "-inf" : "inf";
  const std::string exact = exact_decimal(f, bits);
  std::size_t significant = 0;
  bool started = false;
  for (char c : exact) {
    if (c >= '1' && c <= '9') started = true;
    if (started && std::isdigit(static_cast<unsigned char>(c))) ++significant;
  }
  // A double prints up to 17 significant digits exactly when the value has no more.
  constexpr std::size_t few_digits = 17;
  const int digits = significant <= few_digits ? std::max(static_cast<int>(significant), distinguishing_digits(f)) : distinguishing_digits(f);
  std::string text = fmt::format("{:.{}e}", value_of(f, bits), std::max(0, digits - 1));
  const bool all = significant <= static_cast<std::size_t>(digits);
  return (all ? "= " : "~ ") + text;
}

// The input: a number (decimal, hex float, inf, nan), or bits of the selected format written
// 0x... (hex digits, no '.' or 'p') or 0b... . Returns the bits for the latter.
std::optional<std::uint64_t> read_bits(const std::string& text, Format f, std::string& error) {
  std::string t;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c)) && c != '_' && c != '\'') t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const bool binary = t.rfind("0b", 0) == 0;
  const bool hex = t.rfind("0x", 0) == 0 && t.find_first_of(".p") == std::string::npos;
  if (!binary && !hex) return std::nullopt;
  const std::string digits = t.substr(2);
  const int bits_per_digit = binary ? 1 : 4;
  std::uint64_t bits = 0;
  int used = 0;
  for (char c : digits) {
    const int v = binary ? (c == '0' ? 0 : c == '1' ? 1 : -1) : (std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1);
    if (v < 0) {
      error = fmt::format("'{}' is not a {} digit", c, binary ? "binary" : "hex");
      return std::nullopt;
    }
    if (bits == 0 && v == 0) continue;  // leading zeros
    used += bits_per_digit;
    if (used > 64) break;
    bits = bits << bits_per_digit | static_cast<std::uint64_t>(v);
  }
  if (digits.empty()) error = "no digits after the prefix";
  else if (used > 64 || (f.width() < 64 && (bits >> f.width()) != 0))
    error = fmt::format("{} has more bits than {}'s {}", text, format_name(f), f.width());
  return error.empty() ? std::optional<std::uint64_t>(bits) : std::nullopt;
}

// The fields of a row of bit cells: a Format's (sign, exponent, mantissa), or E8M0's (eight
// exponent bits, no sign).
struct CellFields {
  int width, mantissa_bits;
  bool sign;
  static CellFields of(Format f) { return {f.width(), f.mantissa_bits, true}; }
  static constexpr CellFields e8m0() { return {8, 0, false}; }
};

// How a row's bit cells are laid out: each `cell` pixels wide, at most `per_line` to a line (a
// narrow view splits fp64's 64 cells into two lines of 32), the lines after the first from
// window x `line_x`, with `line_gap` pixels under each line but the last (the index ruler's room).
struct CellLayout {
  float cell;
  int per_line;
  float line_x;
  float line_gap = 0;
};

// One row of bit cells; returns the bits with a clicked cell flipped (or unchanged), and each
// cell's top-left corner in `cell_at` (for the index ruler).
std::uint64_t bit_cells(CellFields fields, std::uint64_t bits, const std::string& id, const CellLayout& layout, std::vector<ImVec2>& cell_at) {
  const int width = fields.width;
  std::uint64_t result = bits;
  cell_at.assign(static_cast<std::size_t>(width), ImVec2(0, 0));
  ImGui::PushID(id.c_str());
  for (int i = width - 1; i >= 0; --i) {
    const bool sign = fields.sign && i == width - 1;
    const bool exponent = !sign && i >= fields.mantissa_bits;
    if (const int placed = width - 1 - i; placed > 0) {
      if (placed % layout.per_line == 0) {  // the previous cell ended its line
        if (layout.line_gap > 0) ImGui::Dummy(ImVec2(1, layout.line_gap));
        ImGui::SetCursorPosX(layout.line_x);
      } else {
        ImGui::SameLine(0, (i + 1 == width - 1 && fields.sign) || i + 1 == fields.mantissa_bits ? px(6) : px(1));
      }
    }
    const Rgb c = sign ? palette::sign_cell : exponent ? palette::exponent_cell : palette::mantissa_cell;
    ImGui::PushID(i);
    ImGui::PushStyleColor(ImGuiCol_Button, to_imgui(c));
    ImGui::PushStyleColor(ImGuiCol_ButtonHovered, IM_COL32(std::min(255, c.r + 40), std::min(255, c.g + 40), std::min(255, c.b + 40), 255));
    const bool one = ((bits >> i) & 1u) != 0;
    cell_at[static_cast<std::size_t>(i)] = ImGui::GetCursorScreenPos();
    if (ImGui::Button(one ? "1" : "0", ImVec2(layout.cell, px(22)))) result = bits ^ (std::uint64_t{1} << i);
    if (ImGui::IsItemHovered()) {
      const int field_bit = sign ? 0 : exponent ? i - fields.mantissa_bits : i;
      ImGui::SetTooltip("bit %d: %s (click to flip)", i,
                        sign       ? "the sign"
                        : exponent ? fmt::format("exponent bit e{}", field_bit).c_str()
                                   : fmt::format("mantissa bit m{}, worth 2^-{} of the leading 1", field_bit, fields.mantissa_bits - field_bit).c_str());
    }
    ImGui::PopStyleColor(2);
    ImGui::PopID();
  }
  ImGui::PopID();
  return result;
}

// The index ruler's height under a line of cells.
float ruler_height() { return ImGui::GetFontSize() * 2.6f; }

// Under each line of the selected format's cells: bit indices at the field edges and every 4
// bits, and the fields' names under their spans (a field split between two lines is named
// under its longer part).
void index_ruler(Format f, const std::vector<ImVec2>& cell_at, float cell) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImU32 text = to_imgui(palette::label_text);
  const int width = f.width();
  // The ruler's top under the line holding cell i: under the last line where the cursor is (below
  // the row's value, where that went under the cells), under the others where they end.
  const float cursor_y = ImGui::GetCursorScreenPos().y;
  const auto ruler_y = [&](int i) {
    const float top = cell_at[static_cast<std::size_t>(i)].y;
    return top == cell_at[0].y ? cursor_y : top + px(22) + ImGui::GetStyle().ItemSpacing.y;
  };
  for (int i = 0; i < width; ++i) {
    const bool edge = i == 0 || i == width - 1 || i == f.mantissa_bits || i == f.mantissa_bits - 1 || i == width - 2;
    if (!edge && i % 4 != 0) continue;
    const std::string label = std::to_string(i);
    const float w = ImGui::CalcTextSize(label.c_str()).x;
    draw->AddText(ImVec2(cell_at[static_cast<std::size_t>(i)].x + (cell - w) / 2, ruler_y(i)), text, label.c_str());
  }
  auto field = [&](int high, int low, const std::string& name, Rgb colour) {
    // The field's parts, one per line: [from, to] bit ranges, from the highest bit down.
    std::vector<std::pair<int, int>> parts;
    for (int i = high; i >= low; --i)
      if (parts.empty() || cell_at[static_cast<std::size_t>(i)].y != cell_at[static_cast<std::size_t>(parts.back().second)].y)
        parts.emplace_back(i, i);
      else
        parts.back().second = i;
    std::size_t longest = 0;
    for (std::size_t p = 0; p < parts.size(); ++p)
      if (parts[p].first - parts[p].second > parts[longest].first - parts[longest].second) longest = p;
    for (std::size_t p = 0; p < parts.size(); ++p) {
      const float x0 = cell_at[static_cast<std::size_t>(parts[p].first)].x, x1 = cell_at[static_cast<std::size_t>(parts[p].second)].x + cell;
      const float line_y = ruler_y(parts[p].first) + ImGui::GetFontSize() * 1.3f;
      draw->AddLine(ImVec2(x0, line_y), ImVec2(x1, line_y), to_imgui(colour), px(2));
      if (p != longest) continue;
      // The longest of the name's forms that fits its span: "exponent (5 bits, bias 15)", "exponent", "e".
      std::string label = name;
      for (const std::string& shorter : {name, name.substr(0, name.find(' ')), name.substr(0, 1)})
        if (ImGui::CalcTextSize(shorter.c_str()).x <= x1 - x0 + px(8)) {
          label = shorter;
          break;
        } else {
          label = shorter;
        }
      const float w = ImGui::CalcTextSize(label.c_str()).x;
      draw->AddText(ImVec2((x0 + x1 - w) / 2, line_y + px(2)), text, label.c_str());
    }
  };
  field(width - 1, width - 1, "S", palette::sign_cell);
  field(width - 2, f.mantissa_bits, fmt::format("exponent ({} bits, bias {})", f.exponent_bits, f.bias()), palette::exponent_cell);
  field(f.mantissa_bits - 1, 0, fmt::format("mantissa ({} bits)", f.mantissa_bits), palette::mantissa_cell);
  ImGui::Dummy(ImVec2(1, ruler_height()));
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
                  self ? to_imgui(palette::scale_line) : to_imgui(palette::label_text), self ? px(3) : px(1));
  }
  const std::string left = scientific(f, around.front()), right = scientific(f, around.back());
  draw->AddText(ImVec2(line.min.x, line.max.y + px(2)), to_imgui(palette::label_text), left.c_str());
  draw->AddText(ImVec2(line.max.x - ImGui::CalcTextSize(right.c_str()).x, line.max.y + px(2)), to_imgui(palette::label_text), right.c_str());
  if (line.hovered()) ImGui::SetTooltip("the representable values nearest the number; the spacing doubles at each power of two");
}

// A value that may run to hundreds of digits: scientific form, every digit wrapped below, copyable.
void long_value(const char* label, Format f, std::uint64_t bits) {
  ImGui::Text("%-10s %s", label, scientific(f, bits).c_str());
  const std::string exact = value_text(f, bits);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", exact.c_str());
  ImGui::SameLine();
  ImGui::PushID(label);
  if (ImGui::SmallButton("copy")) ImGui::SetClipboardText(exact.c_str());
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("copy every digit (%zu characters)", exact.size());
  ImGui::PopID();
}

// A detail's line: its label in a column of its own, its value wrapping under itself where the
// panel is narrower than it.
void detail_line(const char* label, const std::string& value) {
  ImGui::Text("%-10s ", label);
  ImGui::SameLine(0, 0);
  ImGui::TextWrapped("%s", value.c_str());
}

void details(Format f, std::uint64_t bits, const ParsedNumber& number, std::uint8_t flags) {
  const bool negative = sign_of(f, bits);
  const auto biased = biased_exponent_of(f, bits);
  detail_line("class", std::string(float_class_name(classify(f, bits))));
  detail_line("sign", fmt::format("{} ({})", negative ? 1 : 0, negative ? "negative" : "positive"));
  detail_line("exponent", fmt::format("biased {}, bias {}, unbiased {}", static_cast<unsigned long long>(biased), f.bias(),
                                      biased == 0 ? fmt::format("{} (subnormal: emin, hidden bit 0)", f.emin())
                                                  : fmt::format("{} (hidden bit 1)", static_cast<int>(biased) - f.bias())));
  detail_line("mantissa", fmt::format("0x{:X} of {} bits", static_cast<unsigned long long>(mantissa_of(f, bits)), f.mantissa_bits));
  detail_line("exact", value_text(f, bits));
  if (is_finite(f, bits)) {
    long_value("next up", f, next_up(f, bits));
    long_value("next down", f, next_down(f, bits));
    detail_line("ulp", fmt::format("2^{}", ulp_exponent(f, bits)));
    if (number.kind == ParsedNumber::Kind::finite) {
      const ConversionError error = conversion_error(f, bits, number);
      detail_line("error", fmt::format("{} (relative {:.3g})", error.absolute, error.relative));
    }
  }
  detail_line("flags", flags == 0 ? "none" : describe_flags(flags));
  detail_line("range", fmt::format("min subnormal 2^{}, min normal 2^{}, max {}", f.emin() - f.mantissa_bits, f.emin(),
                                   scientific(f, f.max_finite_bits())));
}

Context context_of(const InspectorState& s, RoundingMode mode) {
  Context ctx;
  ctx.rounding = mode;
  ctx.flush_to_zero = s.flush_to_zero;
  ctx.denormals_are_zero = s.denormals_are_zero;
  ctx.saturate = s.saturate;
  return ctx;
}

constexpr const char* op_names[] = {"+", "-", "x", "/", "sqrt"};
constexpr Operation operations[] = {Operation::add, Operation::sub, Operation::mul, Operation::div, Operation::sqrt};

void arithmetic_panel(InspectorState& s, const InspectedFormat& shown) {
  const Format f = shown.format;
  ImGui::SetNextItemWidth(px(140));
  ImGui::InputText("##a", &s.a);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(px(60));
  ImGui::Combo("##op", &s.op, op_names, static_cast<int>(std::size(op_names)));
  if (s.op != 4) {
    ImGui::SameLine();
    ImGui::SetNextItemWidth(px(140));
    ImGui::InputText("##b", &s.b);
  }
  ImGui::TextUnformatted(fmt::format("in {}, rounding {}", shown.name, rounding_mode_name(s.rounding)).c_str());
  std::uint64_t a = 0, b = 0;
  try {
    Context read = context_of(s, s.rounding);
    a = round_text(f, s.a, read);
    if (s.op != 4) b = round_text(f, s.b, read);
  } catch (const std::exception& e) {
    text_colored_wrapped(palette::error_text, "%s", e.what());
    return;
  }
  ImGui::Text("a %s%s", scientific(f, a).c_str(), s.op != 4 ? fmt::format("    b {}", scientific(f, b)).c_str() : "");
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("the operands as %s holds them (each rounded from what was typed)", shown.name.c_str());

  const Operation op = operations[s.op];
  const RoundingChoice choice = explain_rounding(f, op, a, b, context_of(s, s.rounding));
  // The exact result: fp64 holds every operand exactly (at most 11 exponent and 52 mantissa bits);
  // where fp64's result is inexact too (a quotient, a wide product) it is shown as approximate.
  Context wide_ctx, to_wide;
  const std::uint64_t wa = round_text(formats::fp64, value_text(f, a), to_wide);
  const std::uint64_t wb = op == Operation::sqrt ? 0 : round_text(formats::fp64, value_text(f, b), to_wide);
  const std::uint64_t wide = apply_operation(formats::fp64, op, wa, wb, wide_ctx);
  ImGui::Separator();
  if (is_nan(formats::fp64, wide)) {
    ImGui::TextUnformatted("exact result   not a number (an invalid operation)");
  } else {
    ImGui::TextUnformatted("exact result  ");
    ImGui::SameLine(0, 0);
    if ((wide_ctx.flags & flag::inexact) == 0)
      ImGui::TextWrapped("%s", value_text(formats::fp64, wide).c_str());
    else
      ImGui::TextWrapped("~ %s (fp64's nearest: the exact value has more digits than fp64 holds)",
                         fmt::format("{:.17g}", value_of(formats::fp64, wide)).c_str());
  }
  if (choice.lower != choice.upper) {
    ImGui::TextWrapped("lower neighbour %s  (0x%llX)", scientific(f, choice.lower).c_str(), static_cast<unsigned long long>(choice.lower));
    ImGui::TextWrapped("upper neighbour %s  (0x%llX)%s", scientific(f, choice.upper).c_str(), static_cast<unsigned long long>(choice.upper),
                       choice.tie ? "   the exact result is exactly halfway" : "");
  }
  ImGui::PushStyleColor(ImGuiCol_Text, to_imgui(palette::hint_text));
  const char* which = choice.result == choice.upper && choice.lower != choice.upper ? "the upper neighbour, "
                      : choice.result == choice.lower && choice.lower != choice.upper ? "the lower neighbour, " : "";
  ImGui::TextWrapped("%s gives %s (0x%llX): %s%s", rounding_mode_name(s.rounding).c_str(), scientific(f, choice.result).c_str(),
                     static_cast<unsigned long long>(choice.result), choice.reason == RoundingReason::replaced ? "" : which,
                     std::string(rounding_reason_text(choice.reason)).c_str());
  ImGui::PopStyleColor();
  s.report += fmt::format("arithmetic result at y {:.0f} of {:.0f}\n", ImGui::GetItemRectMax().y, ImGui::GetMainViewport()->Size.y);
  ImGui::Text("flags          %s", choice.flags == 0 ? "none" : describe_flags(choice.flags).c_str());
  s.report += fmt::format("arithmetic {} {} {} in {}: 0x{:X}, lower 0x{:X}, upper 0x{:X}, {}; flags {}\n", s.a, op_names[s.op],
                          op == Operation::sqrt ? "" : s.b, shown.name, choice.result, choice.lower, choice.upper,
                          rounding_reason_text(choice.reason), choice.flags == 0 ? "none" : describe_flags(choice.flags));
}

}  // namespace

int inspector_format_index(std::string_view name) {
  try {
    const Format f = parse_format(name);  // any of its names: half, float8_e4m3fn, ...
    for (int i = 0; i < inspector_custom_index; ++i)
      if (parse_format(inspector_named_rows[i]) == f) return i;
  } catch (const UnknownNameError&) {
  }
  return -1;
}

// The OCP MX scale format E8M0 (not a Format: no sign, no mantissa) under the formats: the
// number rounded to it in the chosen mode (saturation as chosen), its 8 cells, code and value;
// a flipped cell puts that scale's value in the number field.
// Every digit of an E8M0 code's value (a float32 holds each exactly), or "nan".
std::string e8m0_text(std::uint8_t code) { return e8m0::is_nan(code) ? "nan" : exact_decimal(formats::fp32, float_bits(e8m0::to_float(code))); }

void e8m0_row(InspectorState& s, const ParsedNumber& number, float name_column, const CellLayout& layout) {
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("e8m0");
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("E8M0, the OCP MX block scale: 8 exponent bits, bias 127, no sign, no mantissa;\n"
                      "0x00..0xFE are 2^-127..2^127, 0xFF is NaN; no zero, no infinity.\n"
                      "Zero, negative numbers and overflow give NaN (saturate: 2^127); below 2^-127, 2^-127.");
  ImGui::SameLine(name_column);
  Context ctx = context_of(s, s.rounding);
  const std::uint8_t code = round_number_e8m0(number, ctx);
  std::vector<ImVec2> cells;
  const std::uint64_t clicked = bit_cells(CellFields::e8m0(), code, "e8m0", layout, cells);
  ImGui::SameLine();
  ImGui::Text(" 0x%02X  %s%s", code, e8m0::is_nan(code) ? "nan" : fmt::format("2^{}", e8m0::exponent_of(code)).c_str(),
              ctx.flags != 0 ? fmt::format("   ({})", describe_flags(ctx.flags)).c_str() : "");
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", e8m0_text(code).c_str());
  if (clicked != code) s.text = e8m0_text(static_cast<std::uint8_t>(clicked));
}

void draw_float_inspector(App& app) {
  InspectorState& s = app.inspector;
  std::string custom_error;
  const std::vector<InspectedFormat> list = inspected_formats(s.custom, custom_error);
  s.detail = std::clamp(s.detail, 0, static_cast<int>(list.size()) - 1);
  const InspectedFormat& shown = list[static_cast<std::size_t>(s.detail)];

  ImGui::SetNextItemWidth(px(300));
  ImGui::InputText("number", &s.text);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("0.1, -6.1e-5, 65520, a hex float 0x1.8p-3, inf, nan;\nor the selected format's bits: 0x3C00 (hex) or 0b0011110000000000");
  same_line_if_room(labelled_width(px(120), "rounding"));
  ImGui::SetNextItemWidth(px(120));
  choice_combo("rounding", s.rounding, all_rounding_modes, rounding_mode_name);
  same_line_if_room(checkbox_width("FTZ"));
  ImGui::Checkbox("FTZ", &s.flush_to_zero);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("flush to zero: tiny results become a signed zero");
  same_line_if_room(checkbox_width("DAZ"));
  ImGui::Checkbox("DAZ", &s.denormals_are_zero);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("denormals are zero: subnormal operands read as zero (arithmetic)");
  same_line_if_room(checkbox_width("saturate"));
  ImGui::Checkbox("saturate", &s.saturate);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("overflow gives the largest finite value (OCP FP8's SAT conversions)");
  same_line_if_room(labelled_width(px(80), "custom"));
  ImGui::SetNextItemWidth(px(80));
  ImGui::InputText("custom", &s.custom);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("the last row's format: eXmY (IEEE), eXmYfn (OCP FN), eXmYfnuz or eXmYfinite (no inf, no NaN), 2 <= X <= 11, 1 <= Y <= 52");

  ParsedNumber number;
  std::string bits_error;
  const std::optional<std::uint64_t> typed_bits = read_bits(s.text, shown.format, bits_error);
  try {
    if (!bits_error.empty()) throw std::invalid_argument(bits_error);
    number = parse_number(typed_bits ? value_text(shown.format, *typed_bits) : s.text);
  } catch (const std::exception& e) {
    text_colored_wrapped(palette::error_text, "%s", e.what());
    ImGui::TextDisabled("Numbers: 0.1, -6.1e-5, 65520, hex floats such as 0x1.8p-3, inf, nan; bits: 0x3C00, 0b0011110000000000.");
    return;
  }
  // One line, always there, says how the field was read: the rows under it stay where they are
  // whether a number, bits or a bad custom format was typed, so the next click lands on its cell.
  const std::string read_as = typed_bits ? fmt::format("read as {}'s bits 0x{:X}", shown.name, *typed_bits)
                                         : std::string("read as a number, rounded into each format");
  if (!custom_error.empty())
    text_colored_wrapped(palette::error_text, "custom format: %s; %s", custom_error.c_str(), read_as.c_str());
  else
    ImGui::TextDisabled("%s", read_as.c_str());

  // Special values of the selected format, and one ulp either way.
  const Format sf = shown.format;
  Context shown_ctx = context_of(s, s.rounding);
  const std::uint64_t shown_bits = typed_bits ? *typed_bits : round_number(sf, number, shown_ctx);
  ImGui::TextUnformatted("values:");
  const std::pair<const char*, std::uint64_t> specials[] = {
      {"0", 0},
      {"-0", sf.sign_mask()},
      {"min subnormal", sf.min_subnormal_bits()},
      {"min normal", sf.min_normal_bits()},
      {"max", sf.max_finite_bits()},
      {"inf", sf.has_infinity() ? infinity(sf, false) : sf.max_finite_bits()},
      {"nan", sf.quiet_nan_bits()}};
  for (const auto& [label, bits] : specials) {
    same_line_if_room(button_width(label));
    if (ImGui::SmallButton(label)) s.text = std::string(label) == "inf" && sf.has_infinity() ? "inf" : value_text(sf, bits);
  }
  same_line_if_room(button_width("-1 ulp"));
  ImGui::BeginDisabled(!is_finite(sf, shown_bits));
  if (ImGui::SmallButton("-1 ulp")) s.text = value_text(sf, next_down(sf, shown_bits));
  same_line_if_room(button_width("+1 ulp"));
  if (ImGui::SmallButton("+1 ulp")) s.text = value_text(sf, next_up(sf, shown_bits));
  ImGui::EndDisabled();

  ImGui::Separator();
  // The names' column fits the longest name (e5m2fnuz, a custom e3m3finite) beside its radio button.
  float name_column = px(70);
  for (const InspectedFormat& row : list)
    name_column = std::max(name_column, ImGui::GetFrameHeight() + ImGui::GetStyle().ItemInnerSpacing.x + ImGui::CalcTextSize(row.name.c_str()).x +
                                            ImGui::GetStyle().ItemSpacing.x + ImGui::GetStyle().WindowPadding.x);
  // Cell width: the widest row (fp64, 64 cells) fits beside its name and value when it can. Where
  // even 11-pixel cells do not fit the view, a row's cells go 32 to a line (16 in a very narrow one).
  const float row_room = ImGui::GetContentRegionAvail().x - name_column;
  CellLayout layout{std::clamp((row_room - px(300)) / 66.0f - px(1), px(11), px(22)), 64, name_column};
  while (layout.per_line > 16 && layout.per_line * (layout.cell + px(1)) + px(12) > row_room) layout.per_line /= 2;
  std::string row_tops;  // --report: where each row starts, which no value may move
  for (int i = 0; i < static_cast<int>(list.size()); ++i) {
    const Format f = list[static_cast<std::size_t>(i)].format;
    Context ctx = context_of(s, s.rounding);
    const std::uint64_t bits = i == s.detail ? shown_bits : round_number(f, number, ctx);
    ImGui::RadioButton(list[static_cast<std::size_t>(i)].name.c_str(), &s.detail, i);
    row_tops += fmt::format(" {:.0f}", ImGui::GetItemRectMin().y);
    ImGui::SameLine(name_column);
    std::vector<ImVec2> cells;
    CellLayout row_layout = layout;
    if (i == s.detail) row_layout.line_gap = ruler_height();  // each line's indices under it
    const std::uint64_t clicked = bit_cells(CellFields::of(f), bits, list[static_cast<std::size_t>(i)].name, row_layout, cells);
    // The bits in hex and the value beside the cells, or under them when the row is too wide for
    // the longest this format writes (its largest negative value's), whatever the value now: a
    // row does not move between one line and two as the number changes.
    const auto row_text_of = [&](std::uint64_t v) { return fmt::format(" 0x{:0{}X}  {}", v, (f.width() + 3) / 4, scientific(f, v)); };
    const std::string row_text = row_text_of(bits);
    float widest = 0;
    for (const std::uint64_t v : {f.sign_mask() | f.max_finite_bits(), f.sign_mask() | f.min_subnormal_bits(), f.sign_mask() | f.min_normal_bits()})
      widest = std::max(widest, ImGui::CalcTextSize(row_text_of(v).c_str()).x);
    const float right_edge = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    if (right_edge - ImGui::GetItemRectMax().x >= widest + ImGui::GetStyle().ItemSpacing.x) {
      ImGui::SameLine();
    } else {
      ImGui::SetCursorPosX(ImGui::GetCursorPosX() + name_column);
    }
    ImGui::TextUnformatted(row_text.c_str());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", value_text(f, bits).c_str());
    if (i == s.detail) index_ruler(f, cells, layout.cell);
    if (clicked != bits) {
      s.text = value_text(f, clicked);
      s.detail = i;
    }
  }
  e8m0_row(s, number, name_column, layout);
  ImGui::Separator();
  s.report = fmt::format("inspector {} 0x{:X} = {}\n", shown.name, shown_bits, value_text(sf, shown_bits));
  s.report += fmt::format("inspector rows at y{}\n", row_tops);
  // The selected format's details and number line beside the Arithmetic panel: both in view
  // under the rows at the default window size, nothing to scroll to as the fields are edited.
  if (!ImGui::BeginTable("##inspector_lower", 2, ImGuiTableFlags_SizingStretchSame | ImGuiTableFlags_BordersInnerV)) return;
  ImGui::TableNextColumn();
  {
    // The selected format's name, its canonical name where it differs (custom), what its flavour
    // lacks, and its dtype's name in PyTorch / ml_dtypes where it has one.
    std::string title = shown.name;
    if (format_name(sf) != shown.name) title += " (" + format_name(sf) + ")";
    if (const std::string flavour = flavour_description(sf.flavour); !flavour.empty()) title += ": " + flavour;
    if (const std::string dtype = dtype_name(sf); !dtype.empty()) title += "; PyTorch / ml_dtypes " + dtype;
    ImGui::TextUnformatted(title.c_str());
  }
  details(sf, shown_bits, number, shown_ctx.flags);
  number_line(sf, shown_bits);
  ImGui::TableNextColumn();
  if (ImGui::CollapsingHeader("Arithmetic: a op b in the selected format", ImGuiTreeNodeFlags_DefaultOpen)) {
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("its exact result, the neighbours in the format and which one the rounding picks");
    arithmetic_panel(s, shown);
  }
  ImGui::EndTable();
}

}  // namespace fpscope::gui
