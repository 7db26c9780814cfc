// SVG plots: well-formed, the format's regions where they belong, one bar per nonzero binade.
#include <doctest/doctest.h>

#include <limits>

#include <cmath>
#include <string>

#include "fpscope/analyzer/heatmap.hpp"
#include "fpscope/analyzer/plot.hpp"
#include "fpscope/analyzer/smoothing.hpp"

using namespace fpscope;

namespace {
std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}
}  // namespace

TEST_CASE("histogram SVG: a bar per nonzero binade over the four fp16 regions, counts in the legend") {
  ExponentHistogram h;
  h.set_count(-30, 10);  // flushed at scale 1
  h.set_count(-20, 20);  // subnormal
  h.set_count(0, 30);    // normal
  h.set_count(16, 5);    // overflow
  const std::string svg = histogram_svg(h, PlotOptions{formats::fp16, 0, "test <tensor>"});
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(occurrences(svg, "class=\"bar\"") == 4);
  CHECK(svg.find("<title>2^-30: 10</title>") != std::string::npos);
  CHECK(svg.find("test &lt;tensor&gt;") != std::string::npos);  // escaped
  for (const char* region : {"#f4b6b6", "#fbe3a0", "#c9e8c4", "#d9b8ec"}) CHECK(svg.find(region) != std::string::npos);
  CHECK(svg.find("flushed to zero 10 (15.38%)") != std::string::npos);
  CHECK(svg.find("overflow 5 (7.69%)") != std::string::npos);
  // Scaled by 2^5, nothing is flushed any more: the legend says so.
  CHECK(histogram_svg(h, PlotOptions{formats::fp16, 5, ""}).find("flushed to zero 0 (0.00%)") != std::string::npos);
}

TEST_CASE("heatmap SVG: at most 600 columns however many steps, limits drawn") {
  std::vector<std::pair<std::int64_t, ExponentHistogram>> steps;
  for (int s = 0; s < 2000; ++s) {
    ExponentHistogram h;
    h.set_count(-20, 1);
    steps.emplace_back(s, h);
  }
  const std::string svg = heatmap_svg(steps, PlotOptions{formats::fp16, 0, ""});
  // One cell per column (the only nonzero binade), plus the background rects.
  CHECK(occurrences(svg, "<rect") == 600 + 2);
  CHECK(svg.find("smallest subnormal") != std::string::npos);
  CHECK(svg.find("step 1999") != std::string::npos);
  CHECK(heatmap_svg({}, PlotOptions{formats::fp16, 0, ""}).find("</svg>") != std::string::npos);
}

TEST_CASE("heatmap columns: a steady tensor looks the same in columns of 2 and of 3 steps by mean, and max keeps a spike") {
  // 11 steps into 4 columns: 3, 3, 3, 2 each (step i goes to column i * 4 / 11); the last records nothing.
  std::vector<ExponentHistogram> made(10);
  std::vector<StepHistogram> steps;
  for (int s = 0; s < 10; ++s) {
    made[static_cast<std::size_t>(s)].set_count(-20, 100);
    if (s == 7) made[static_cast<std::size_t>(s)].set_count(-10, 9);  // one step's spike
    steps.push_back({s, &made[static_cast<std::size_t>(s)]});
  }
  steps.push_back({10, nullptr});  // a step that did not record the tensor: not in any mean
  const HeatmapColumns heat = heatmap_columns(steps, 4);
  REQUIRE(heat.size() == 4);
  CHECK(heat.steps == std::vector<std::uint32_t>{3, 3, 3, 2});
  CHECK(heat.recorded == std::vector<std::uint32_t>{3, 3, 3, 1});
  for (std::size_t c = 0; c < 4; ++c) {
    CAPTURE(c);
    CHECK(heat.value(c, -20, HeatmapColumns::Aggregate::mean) == 100.0);  // a sum would read 300, 300, 300, 100
    CHECK(heat.value(c, -20, HeatmapColumns::Aggregate::max) == 100.0);
  }
  const std::size_t spike = 2;  // step 7 is in column 7 * 4 / 11 = 2
  CHECK(heat.value(spike, -10, HeatmapColumns::Aggregate::max) == 9.0);
  CHECK(heat.value(spike, -10, HeatmapColumns::Aggregate::mean) == 3.0);
  CHECK(heat.value(0, -10, HeatmapColumns::Aggregate::max) == 0.0);
}

TEST_CASE("curve smoothing is TensorBoard's debiased moving average; NaN losses stay out of it") {
  // w = 0.5 over 1, 3: the averages 0.5 and 1.75, debiased by 1 - 0.5 and 1 - 0.25.
  const std::vector<double> two = smoothed_curve({1, 3}, 0.5);
  CHECK(two[0] == 1.0);
  CHECK(two[1] == doctest::Approx(1.75 / 0.75).epsilon(1e-15));
  // A constant stays constant from the first point on (what debiasing is for).
  for (double v : smoothed_curve(std::vector<double>(50, 2.5), 0.99)) CHECK(v == doctest::Approx(2.5).epsilon(1e-12));
  const std::vector<double> with_nan = smoothed_curve({1, std::nan(""), 3}, 0.5);
  CHECK(std::isnan(with_nan[1]));
  CHECK(with_nan[2] == doctest::Approx(1.75 / 0.75).epsilon(1e-15));
  CHECK(smoothed_curve({4, 5}, 0) == std::vector<double>{4, 5});
}

TEST_CASE("histogram SVGs given the same binades share their x-axis: a before/after pair lines up") {
  ExponentHistogram before, after;
  before.set_count(-30, 50);  // flushed in fp16
  after.set_count(-5, 50);    // the same values at a loss scale of 2^25
  PlotOptions o{formats::fp16, 0, "t"};
  o.binades = std::make_pair(-48, 18);
  const auto band = [](const std::string& svg) {  // the subnormal band's rect: where it sits on the x-axis
    const std::size_t at = svg.find("#fbe3a0");
    REQUIRE(at != std::string::npos);
    return svg.substr(svg.rfind("<rect", at), at - svg.rfind("<rect", at));
  };
  CHECK(band(histogram_svg(before, o)) == band(histogram_svg(after, o)));
  // Without a common span each plot follows its data, and the band moves.
  PlotOptions free{formats::fp16, 0, "t"};
  CHECK(band(histogram_svg(before, free)) != band(histogram_svg(after, free)));
}

TEST_CASE("heatmap columns sit where their steps are: a run thinned at its start keeps its step axis, gaps hold the column before") {
  // Steps 0, 8, 16, ..., 72 (thinned) then 73 ..= 99 (every step): 100 steps' range in 25 columns
  // of 4 steps each. Index-wise, the 10 thinned steps would take a third of the columns.
  std::vector<ExponentHistogram> made(100);
  std::vector<StepHistogram> steps;
  for (int s = 0; s < 100; ++s) {
    if (s < 73 && s % 8 != 0) continue;
    made[static_cast<std::size_t>(s)].set_count(s < 50 ? -30 : -5, 10);  // a scale applied at step 50 moves the values
    steps.push_back({s, &made[static_cast<std::size_t>(s)]});
  }
  const HeatmapColumns heat = heatmap_columns(steps, 25);
  REQUIRE(heat.size() == 25);
  CHECK(heat.axis.first == 0);
  CHECK(heat.axis.span == 100);
  for (std::size_t c = 0; c < 25; ++c) {
    CAPTURE(c);
    const auto [begin, end] = heat.axis.covered_steps(c);
    CHECK(begin == static_cast<std::int64_t>(4 * c));
    CHECK(end == static_cast<std::int64_t>(4 * c + 4));
    // Column c's values are those of its own steps, or where none was kept, of the step before.
    const bool own = heat.held[c] == 0;
    CHECK(own == (4 * c >= 73 - 1 || (4 * c) % 8 == 0));
    CHECK(heat.first_step[c] <= static_cast<std::int64_t>(4 * c + 3));
    if (own) CHECK(heat.first_step[c] >= static_cast<std::int64_t>(4 * c));
    // The move at step 50 shows from the first column with a step kept after it: 14 (step 56).
    const bool moved = heat.value(c, -5, HeatmapColumns::Aggregate::mean) > 0;
    CHECK(moved == (heat.last_step[c] >= 50));
  }
  CHECK(heat.value(12, -30, HeatmapColumns::Aggregate::mean) == 10.0);  // step 48
  CHECK(heat.value(18, -5, HeatmapColumns::Aggregate::mean) == 10.0);   // steps 72 ..= 75, all kept
  CHECK(heat.held[13] == 1);
  CHECK(heat.value(19, -5, HeatmapColumns::Aggregate::mean) == 10.0);   // 76..79, every one recorded
  CHECK(heat.steps[19] == 4);
  // A crafted log whose steps run backwards or span 2^64 still lands in the columns.
  ExponentHistogram one;
  one.set_count(0, 1);
  const std::vector<StepHistogram> odd{{std::numeric_limits<std::int64_t>::max(), &one}, {std::numeric_limits<std::int64_t>::min(), &one}};
  CHECK(heatmap_columns(odd, 10).size() == 1);
  const std::vector<StepHistogram> wide{{std::numeric_limits<std::int64_t>::min(), &one}, {std::numeric_limits<std::int64_t>::max(), &one}};
  const HeatmapColumns w = heatmap_columns(wide, 10);
  CHECK(w.size() == 10);
  CHECK(w.steps.front() == 1);
  CHECK(w.steps.back() == 1);
}
