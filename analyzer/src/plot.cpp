// SVG plots, written as text: a histogram with range bands, and a steps x binades heatmap.
#include "fpscope/analyzer/plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "fpscope/analyzer/heatmap.hpp"
#include "fpscope/analyzer/range_analysis.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/core/printable_text.hpp"

namespace fpscope {

namespace {

// Colours of the four regions (fill) and their names.
constexpr const char* flushed_colour = "#f4b6b6";
constexpr const char* subnormal_colour = "#fbe3a0";
constexpr const char* normal_colour = "#c9e8c4";
constexpr const char* overflow_colour = "#d9b8ec";
constexpr const char* bar_colour = "#2b5c8a";

// Text for an SVG element: control characters and bytes that are not UTF-8 (XML allows neither)
// written as \xNN by printable_text, then the XML specials escaped.
std::string escape(const std::string& raw) {
  const std::string text = printable_text(raw, 200);
  std::string out;
  for (const char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  return buffer;
}

std::string percent(std::uint64_t part, std::uint64_t whole) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f%%", whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return buffer;
}

std::string rect(double x, double y, double w, double h, const char* fill, const std::string& extra = "") {
  return "<rect x=\"" + number(x) + "\" y=\"" + number(y) + "\" width=\"" + number(w) + "\" height=\"" + number(h) +
         "\" fill=\"" + fill + "\"" + extra + "/>\n";
}

// A rect with a tooltip (shown by browsers on hover).
std::string rect_with_title(double x, double y, double w, double h, const char* fill, const std::string& title) {
  return "<rect x=\"" + number(x) + "\" y=\"" + number(y) + "\" width=\"" + number(w) + "\" height=\"" + number(h) +
         "\" fill=\"" + fill + "\" class=\"bar\"><title>" + title + "</title></rect>\n";
}

std::string text(double x, double y, const std::string& content, const std::string& attributes = "") {
  return "<text x=\"" + number(x) + "\" y=\"" + number(y) + "\"" + attributes + ">" + escape(content) + "</text>\n";
}

const char* region_colour(int scaled_binade, Format f) {
  switch (region_of_binade(f, scaled_binade)) {
    case BinadeRegion::overflow: return overflow_colour;
    case BinadeRegion::normal: return normal_colour;
    case BinadeRegion::subnormal: return subnormal_colour;
    case BinadeRegion::flushed_to_zero: return flushed_colour;
  }
  return normal_colour;
}

// The binades to draw: the data's, widened to show the format's range after scaling.
std::pair<int, int> binade_span(int data_low, int data_high, const PlotOptions& o) {
  const FormatEdges edges = format_edges(o.format);
  const int format_low = edges.smallest_subnormal - 2 - o.scale_log2;
  const int format_high = edges.overflow + 1 - o.scale_log2;
  int low = data_low >= min_binade ? std::min(data_low - 1, format_low) : format_low;
  int high = data_high >= min_binade ? std::max(data_high + 1, format_high) : format_high;
  if (o.binades) low = std::min(low, o.binades->first), high = std::max(high, o.binades->second);
  return {std::max(low, min_binade), std::min(high, max_binade)};
}

std::string svg_open(int width, int height) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" + std::to_string(height) +
         "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
         "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\" shape-rendering=\"crispEdges\">\n" +
         rect(0, 0, width, height, "#ffffff");
}

std::string subtitle(const PlotOptions& o) {
  return format_name(o.format) + (o.format_note.empty() ? "" : " (" + o.format_note + ")") + ", " +
         (o.scale_text.empty() ? "values scaled by 2^" + std::to_string(o.scale_log2) : o.scale_text);
}

// The options with the scale clamped as range_analysis.hpp says (no int overflow below).
PlotOptions clamped(const PlotOptions& options) {
  PlotOptions o = options;
  o.scale_log2 = clamp_scale_log2(o.scale_log2);
  return o;
}

}  // namespace

std::string histogram_svg(const ExponentHistogram& h, const PlotOptions& options) {
  const PlotOptions o = clamped(options);
  constexpr int width = 960, height = 470, left = 80, right = 20, top = 60, bottom = 110;
  const auto [low, high] = binade_span(h.lowest_binade(), h.highest_binade(), o);
  const int columns = high - low + 1;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const double column_w = plot_w / columns;
  const RangeReport report = analyze_range(h, o.format, o.scale_log2);
  std::uint64_t tallest = 1;
  for (int b = low; b <= high; ++b) tallest = std::max(tallest, h.count(b));
  const std::uint64_t total = std::max<std::uint64_t>(report.total, 1);
  const double top_share = static_cast<double>(tallest) / static_cast<double>(total);

  std::string svg = svg_open(width, height);
  svg += text(left, 24, o.title.empty() ? "exponent histogram" : o.title, " font-size=\"16\" font-weight=\"bold\"");
  svg += text(left, 44, subtitle(o) + "; " + std::to_string(report.total) + " values", " fill=\"#444\"");
  // Region bands behind the bars: one rectangle per run of binades in the same region.
  for (int start = low; start <= high;) {
    const char* colour = region_colour(start + o.scale_log2, o.format);
    int end = start;
    while (end + 1 <= high && region_colour(end + 1 + o.scale_log2, o.format) == colour) ++end;
    svg += rect(left + (start - low) * column_w, top, (end - start + 1) * column_w, plot_h, colour);
    start = end + 1;
  }
  // Bars: share of all values in each binade.
  for (int b = low; b <= high; ++b) {
    const std::uint64_t count = h.count(b);
    if (count == 0) continue;
    const double bar_h = plot_h * (static_cast<double>(count) / static_cast<double>(total)) / top_share;
    svg += rect_with_title(left + (b - low) * column_w + column_w * 0.15, top + plot_h - bar_h, column_w * 0.7, bar_h, bar_colour,
                           "2^" + std::to_string(b) + ": " + std::to_string(count));
  }
  // Axes and ticks.
  svg += "<line x1=\"" + number(left) + "\" y1=\"" + number(top + plot_h) + "\" x2=\"" + number(left + plot_w) + "\" y2=\"" +
         number(top + plot_h) + "\" stroke=\"#000\"/>\n";
  svg += "<line x1=\"" + number(left) + "\" y1=\"" + number(top) + "\" x2=\"" + number(left) + "\" y2=\"" + number(top + plot_h) +
         "\" stroke=\"#000\"/>\n";
  const int tick_every = columns > 120 ? 20 : columns > 60 ? 10 : 5;
  for (int b = low; b <= high; ++b) {
    if (b % tick_every != 0) continue;
    const double x = left + (b - low + 0.5) * column_w;
    svg += "<line x1=\"" + number(x) + "\" y1=\"" + number(top + plot_h) + "\" x2=\"" + number(x) + "\" y2=\"" +
           number(top + plot_h + 5) + "\" stroke=\"#000\"/>\n";
    svg += text(x, top + plot_h + 19, std::to_string(b), " text-anchor=\"middle\"");
  }
  svg += text(left + plot_w / 2, top + plot_h + 38,
              o.scale_text.empty() ? "binade: floor(log2 |x|) of the unscaled values" : "binade: floor(log2 |x|) of the values the cast rounds",
              " text-anchor=\"middle\"");
  svg += text(16, top + plot_h / 2, "share of all values", " transform=\"rotate(-90 16 " + number(top + plot_h / 2) + ")\" text-anchor=\"middle\"");
  for (int i = 0; i <= 4; ++i) {
    const double y = top + plot_h - plot_h * i / 4.0;
    svg += text(left - 6, y + 4, percent(static_cast<std::uint64_t>(top_share * i / 4.0 * 1e6), 1000000), " text-anchor=\"end\" font-size=\"10\"");
  }
  // Legend with the region counts.
  struct Entry { const char* colour; const char* name; std::uint64_t count; };
  const Entry entries[] = {{flushed_colour, "flushed to zero", report.flushed_to_zero},
                           {subnormal_colour, "subnormal", report.subnormal},
                           {normal_colour, "normal", report.normal},
                           {overflow_colour, "overflow", report.overflow}};
  double x = left;
  const double legend_y = height - 36;
  for (const Entry& e : entries) {
    svg += rect(x, legend_y - 11, 14, 14, e.colour, " stroke=\"#666\"");
    const std::string label = std::string(e.name) + " " + std::to_string(e.count) + " (" + percent(e.count, total) + ")";
    svg += text(x + 20, legend_y, label);
    x += 28 + 7.0 * static_cast<double>(label.size());
  }
  svg += text(left, height - 12,
              "zeros " + std::to_string(report.zero) + ", infinities and NaNs " + std::to_string(report.non_finite) +
                  "; binade granularity: the binade under the smallest subnormal counts as kept" + (o.note.empty() ? "" : "; " + o.note),
              " fill=\"#444\" font-size=\"11\"");
  return svg + "</svg>\n";
}

std::string heatmap_svg(const std::vector<std::pair<std::int64_t, ExponentHistogram>>& steps, const PlotOptions& options) {
  const PlotOptions o = clamped(options);
  constexpr int width = 960, height = 560, left = 70, right = 30, top = 60, bottom = 70;
  // Neighbouring steps summed into at most 600 columns.
  std::vector<StepHistogram> step_histograms;
  for (const auto& [step, h] : steps) step_histograms.push_back({step, &h});
  const HeatmapColumns heat = heatmap_columns(step_histograms, 600);
  const std::vector<ExponentHistogram>& merged = heat.histograms;
  int data_low = max_binade + 1, data_high = min_binade - 1;
  for (const ExponentHistogram& h : merged)
    if (h.highest_binade() >= min_binade) data_low = std::min(data_low, h.lowest_binade()), data_high = std::max(data_high, h.highest_binade());
  const auto [low, high] = binade_span(data_high >= min_binade ? data_low : min_binade - 1, data_high, o);
  const int rows = high - low + 1;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const std::size_t columns = std::max<std::size_t>(1, merged.size());
  std::uint64_t largest = 1;
  for (const auto& h : merged)
    for (int b = low; b <= high; ++b) largest = std::max(largest, h.count(b));
  const double column_w = plot_w / static_cast<double>(columns), row_h = plot_h / rows;

  std::string svg = svg_open(width, height);
  svg += text(left, 24, o.title.empty() ? "exponent histogram per step" : o.title, " font-size=\"16\" font-weight=\"bold\"");
  svg += text(left, 44, subtitle(o) + "; shade: log of the count", " fill=\"#444\"");
  svg += rect(left, top, plot_w, plot_h, "#f7f7f7");
  for (std::size_t c = 0; c < merged.size(); ++c) {
    for (int b = low; b <= high; ++b) {
      const std::uint64_t count = merged[c].count(b);
      if (count == 0) continue;
      // Light blue (one value) to dark blue (the largest count), by log count.
      const double t = std::log1p(static_cast<double>(count)) / std::log1p(static_cast<double>(largest));
      auto channel = [t](int light, int dark) { return static_cast<int>(std::lround(light + (dark - light) * t)); };
      char colour[8];
      std::snprintf(colour, sizeof colour, "#%02x%02x%02x", channel(0xde, 0x08), channel(0xeb, 0x30), channel(0xf7, 0x6b));
      svg += rect(left + static_cast<double>(c) * column_w, top + (high - b) * row_h, column_w + 0.01, row_h + 0.01, colour);
    }
  }
  // The format's limits, in unscaled binades: smallest subnormal, smallest normal, largest.
  const FormatEdges edges = format_edges(o.format);
  const struct { int binade; const char* colour; const char* label; } limits[] = {
      {edges.smallest_subnormal - o.scale_log2, "#d62728", "smallest subnormal"},
      {edges.smallest_normal - o.scale_log2, "#ff7f0e", "smallest normal"},
      {edges.overflow - o.scale_log2, "#9467bd", "overflow"}};
  for (const auto& limit : limits) {
    if (limit.binade < low || limit.binade > high + 1) continue;
    const double y = top + (high + 1 - limit.binade) * row_h;
    svg += "<line x1=\"" + number(left) + "\" y1=\"" + number(y) + "\" x2=\"" + number(left + plot_w) + "\" y2=\"" + number(y) +
           "\" stroke=\"" + limit.colour + "\" stroke-width=\"2\" stroke-dasharray=\"6,3\"/>\n";
    svg += text(left + plot_w - 4, y - 5, limit.label,
                std::string(" text-anchor=\"end\" fill=\"") + limit.colour + "\" stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\"");
  }
  const int tick_every = rows > 120 ? 20 : rows > 60 ? 10 : 5;
  for (int b = low; b <= high; ++b)
    if (b % tick_every == 0) svg += text(left - 6, top + (high - b + 0.5) * row_h + 4, std::to_string(b), " text-anchor=\"end\"");
  svg += text(18, top + plot_h / 2, "binade", " transform=\"rotate(-90 18 " + number(top + plot_h / 2) + ")\" text-anchor=\"middle\"");
  if (!steps.empty()) {
    svg += text(left, top + plot_h + 18, "step " + std::to_string(steps.front().first));
    svg += text(left + plot_w, top + plot_h + 18, "step " + std::to_string(steps.back().first), " text-anchor=\"end\"");
  }
  svg += text(left + plot_w / 2, top + plot_h + 40, "recorded step", " text-anchor=\"middle\"");
  return svg + "</svg>\n";
}

}  // namespace fpscope
