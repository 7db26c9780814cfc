// Checks that a screenshot of fpscope-gui shows what its view must show: the palette's colours, in quantity.
// Usage: check_screenshot PNG VIEW. Prints each check with the pixel count it found.
#include <stb_image.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "../../gui/src/palette.hpp"

using fpscope::gui::Rgb;
namespace palette = fpscope::gui::palette;

namespace {

struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;
};

bool near(const unsigned char* p, Rgb c, int tolerance) {
  return std::abs(p[0] - c.r) <= tolerance && std::abs(p[1] - c.g) <= tolerance && std::abs(p[2] - c.b) <= tolerance;
}

long count_colour(const Image& image, Rgb c, int tolerance = 2) {
  long n = 0;
  for (std::size_t i = 0; i < image.rgb.size(); i += 3) n += near(&image.rgb[i], c, tolerance) ? 1 : 0;
  return n;
}

// The histogram plot's first row: the first with a run of the flushed band's colour (the table's
// swatches above it use the bars' colours); the image's height where there is none.
int plot_top_of(const Image& image) {
  for (int y = 0; y < image.height; ++y) {
    int band_pixels = 0;
    for (int x = 0; x < image.width; ++x) band_pixels += near(&image.rgb[(static_cast<std::size_t>(y) * image.width + x) * 3], palette::flushed_band, 0);
    if (band_pixels >= 50) return y;
  }
  return image.height;
}

int failures = 0;
void expect(const Image& image, const char* what, Rgb colour, long at_least, int tolerance = 2) {
  const long n = count_colour(image, colour, tolerance);
  const bool ok = n >= at_least;
  std::printf("%s %-28s %8ld pixels (need %ld)\n", ok ? "ok  " : "FAIL", what, n, at_least);
  failures += ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: check_screenshot PNG VIEW\n");
    return 2;
  }
  Image image;
  int channels = 0;
  unsigned char* data = stbi_load(argv[1], &image.width, &image.height, &channels, 3);
  if (data == nullptr) {
    std::fprintf(stderr, "check_screenshot: cannot read %s as an image\n", argv[1]);
    return 2;
  }
  image.rgb.assign(data, data + static_cast<std::size_t>(image.width) * image.height * 3);
  stbi_image_free(data);
  const std::string view = argv[2];

  // Not blank: a drawn window has many colours.
  std::set<unsigned> colours;
  for (std::size_t i = 0; i < image.rgb.size(); i += 3) colours.insert(image.rgb[i] << 16 | image.rgb[i + 1] << 8 | image.rgb[i + 2]);
  const bool varied = colours.size() >= 20;
  std::printf("%s %-28s %8zu colours (need 20)\n", varied ? "ok  " : "FAIL", "not blank", colours.size());
  failures += varied ? 0 : 1;

  if (view == "training") {
    expect(image, "state swatch: finished", palette::state_finished, 200);
  } else if (view == "histogram") {
    expect(image, "band: flushed to zero", palette::flushed_band, 2000);
    expect(image, "band: subnormal", palette::subnormal_band, 2000);
    expect(image, "band: normal", palette::normal_band, 2000);
    expect(image, "band: overflow", palette::overflow_band, 2000);
    expect(image, "bars: flushed to zero", palette::flushed_bar, 2000);
    expect(image, "bars: subnormal", palette::subnormal_bar, 2000);
  } else if (view == "histogram-ghost") {
    // The preview's outline, and where it ends: the last line is "ghost x FIRST LAST", the columns
    // holding the outline's colour, for the caller to compare between two preview scales.
    expect(image, "preview outline", palette::ghost_outline, 300, 0);
    int first = image.width, last = -1;
    for (int y = 0; y < image.height; ++y)
      for (int x = 0; x < image.width; ++x)
        if (near(&image.rgb[(static_cast<std::size_t>(y) * image.width + x) * 3], palette::ghost_outline, 0)) {
          first = std::min(first, x);
          last = std::max(last, x);
        }
    std::printf("ghost x %d %d\n", first, last);
    const int plot_top = plot_top_of(image);
    // The recorded bars' extent in the plot (their region colours, exactly), for the ghost's offset
    // from them within one picture: (preview - recorded scale) binades.
    int bars_first = image.width, bars_last = -1;
    for (int y = plot_top; y < image.height; ++y)
      for (int x = 0; x < image.width; ++x) {
        const unsigned char* p = &image.rgb[(static_cast<std::size_t>(y) * image.width + x) * 3];
        if (near(p, palette::flushed_bar, 0) || near(p, palette::subnormal_bar, 0) || near(p, palette::normal_bar, 0) ||
            near(p, palette::overflow_bar, 0)) {
          bars_first = std::min(bars_first, x);
          bars_last = std::max(bars_last, x);
        }
      }
    std::printf("bars x %d %d\n", bars_first, bars_last);
    // Where the bands begin, along the plot's top rows (above every bar): the first x of the
    // subnormal, normal and overflow bands, to compare between pictures.
    if (plot_top < image.height) {
      const int row = std::min(image.height - 1, plot_top + 3);
      auto first_of = [&](Rgb c) {
        for (int x = 0; x < image.width; ++x)
          if (near(&image.rgb[(static_cast<std::size_t>(row) * image.width + x) * 3], c, 0)) return x;
        return -1;
      };
      std::printf("band edges %d %d %d\n", first_of(palette::subnormal_band), first_of(palette::normal_band), first_of(palette::overflow_band));
    }
  } else if (view == "histogram-caveat") {
    // A followed log's preview says in the subnormal bars' colour what its outline cannot see, above
    // the plot. In a narrow window the sentence wraps: prints "caveat lines N" (runs of rows holding
    // that colour above the plot) for the caller; cut off at the view's edge it would be one line.
    const int plot_top = plot_top_of(image);
    int lines = 0;
    bool in_line = false;
    for (int y = 0; y < plot_top; ++y) {
      int text_pixels = 0;
      for (int x = 0; x < image.width; ++x) text_pixels += near(&image.rgb[(static_cast<std::size_t>(y) * image.width + x) * 3], palette::subnormal_bar, 0);
      const bool text_row = text_pixels >= 10;
      lines += text_row && !in_line ? 1 : 0;
      in_line = text_row;
    }
    std::printf("caveat lines %d\n", lines);
  } else if (view == "step-slider") {
    // The step slider's grab in the views' part of the window (right of the training panel, which
    // holds the loss-scale slider): ImGui's dark style's SliderGrab, (0.24, 0.52, 0.88).
    const Rgb slider_grab{61, 133, 224};
    long n = 0;
    for (int y = 0; y < image.height; ++y)
      for (int x = image.width * 2 / 5; x < image.width; ++x) n += near(&image.rgb[(static_cast<std::size_t>(y) * image.width + x) * 3], slider_grab, 0);
    const bool ok = n >= 100;
    std::printf("%s %-28s %8ld pixels (need 100)\n", ok ? "ok  " : "FAIL", "step slider's grab", n);
    failures += ok ? 0 : 1;
  } else if (view == "blocks") {  // relative exponents over the element format's window
    expect(image, "band: flushed to zero", palette::flushed_band, 2000);
    expect(image, "band: subnormal", palette::subnormal_band, 2000);
    expect(image, "band: normal", palette::normal_band, 2000);
    expect(image, "bars: flushed to zero", palette::flushed_bar, 1000);
    expect(image, "bars: subnormal", palette::subnormal_bar, 1000);
    expect(image, "bars: normal", palette::normal_bar, 2000);
  } else if (view == "histogram-specials") {
    expect(image, "bar: exact zeros", palette::zero_bar, 2000);
  } else if (view == "histogram-non-finite") {
    expect(image, "bars: inf and NaN", palette::non_finite_bar, 5000);
  } else if (view == "histogram-one-nan") {  // one NaN among a layer's weight gradients: a short bar
    expect(image, "bar: NaN", palette::non_finite_bar, 1000);
  } else if (view == "what-if-non-finite") {  // the line naming the window's infinities and NaNs, in their colour
    expect(image, "text: infinite or NaN", palette::non_finite_bar, 150);
  } else if (view == "curves-followed") {  // a followed log has no fp32 baseline beside it
    expect(image, "loss curve", palette::loss_line, 300, 12);
    expect(image, "loss scale curve", palette::scale_line, 300, 12);
  } else if (view == "curves-fp8") {  // a followed log of a per-tensor FP8 run: one operand's amax and scale
    expect(image, "loss curve", palette::loss_line, 300, 12);
    expect(image, "operand amax curve", palette::amax_line, 300, 12);
    expect(image, "operand FP8 scale curve", palette::fp8_scale_line, 300, 12);
  } else if (view == "swatch-running") {
    expect(image, "state swatch: running", palette::state_running, 200);
  } else if (view == "swatch-paused") {
    expect(image, "state swatch: paused", palette::state_paused, 200);
  } else if (view == "swatch-idle") {
    expect(image, "state swatch: idle", palette::state_idle, 200, 0);
    const long running = count_colour(image, palette::state_running, 0);
    std::printf("%s %-28s %8ld pixels (need none)\n", running == 0 ? "ok  " : "FAIL", "no running swatch", running);
    failures += running == 0 ? 0 : 1;
  } else if (view == "swatch-finished") {
    expect(image, "state swatch: finished", palette::state_finished, 200);
  } else if (view == "heatmap") {
    // The ramp's colours exactly (tolerance 0), looked up by their 24 bits.
    const auto packed = [](int r, int g, int b) { return (static_cast<std::size_t>(r) << 16) | (g << 8) | b; };
    std::vector<bool> on_the_ramp(std::size_t{1} << 24);
    for (int i = 1; i <= 4000; ++i) {
      const Rgb c = palette::heat(i / 4000.0);
      on_the_ramp[packed(c.r, c.g, c.b)] = true;
    }
    long on_ramp = 0;
    for (std::size_t i = 0; i < image.rgb.size(); i += 3) on_ramp += on_the_ramp[packed(image.rgb[i], image.rgb[i + 1], image.rgb[i + 2])] ? 1 : 0;
    const bool ok = on_ramp >= 20000;
    std::printf("%s %-28s %8ld pixels (need 20000)\n", ok ? "ok  " : "FAIL", "heatmap cells", on_ramp);
    failures += ok ? 0 : 1;
    expect(image, "line: smallest subnormal", palette::min_subnormal_line, 300, 10);
    expect(image, "line: smallest normal", palette::min_normal_line, 300, 10);
    expect(image, "line: overflow", palette::overflow_line, 300, 10);
  } else if (view == "curves") {
    expect(image, "loss curve", palette::loss_line, 300, 12);
    expect(image, "fp32 baseline curve", palette::baseline_line, 300, 12);
    expect(image, "loss scale curve", palette::scale_line, 300, 12);
  } else if (view == "what-if") {
    expect(image, "share: flushed to zero", palette::flushed_bar, 1000);
    expect(image, "share: subnormal", palette::subnormal_bar, 500);
    expect(image, "share: normal", palette::normal_bar, 1000);
  } else if (view == "inspector") {
    expect(image, "bit cells: sign", palette::sign_cell, 1500);
    expect(image, "bit cells: exponent", palette::exponent_cell, 5000);
    expect(image, "bit cells: mantissa", palette::mantissa_cell, 5000);
  } else if (view == "inspector-narrow") {
    // In a window 1000 wide every row of bit cells stays in the view: fp64's 64 cells go 32 to a
    // line. Cut off, its cells ran on to where the view clips them, beside its scrollbar (x 978 of
    // 1000); the rows laid out to fit end more than 40 pixels before the window's edge.
    expect(image, "bit cells: sign", palette::sign_cell, 1500);
    expect(image, "bit cells: mantissa", palette::mantissa_cell, 5000);
    int right_end = -1;
    for (int y = 0; y < image.height; ++y)
      for (int x = 0; x < image.width; ++x) {
        const unsigned char* p = &image.rgb[(static_cast<std::size_t>(y) * image.width + x) * 3];
        if (near(p, palette::exponent_cell, 0) || near(p, palette::mantissa_cell, 0)) right_end = std::max(right_end, x);
      }
    const bool inside = right_end >= 0 && right_end < image.width - 40;
    std::printf("%s %-28s %8d of %d (need below %d)\n", inside ? "ok  " : "FAIL", "bit cells' right end at x", right_end, image.width,
                image.width - 40);
    failures += inside ? 0 : 1;
  } else if (view == "export") {
    expect(image, "state swatch: finished", palette::state_finished, 200);
  } else if (view == "follow-error") {
    expect(image, "state swatch: failed", palette::state_failed, 200);
  } else {
    std::fprintf(stderr, "check_screenshot: unknown view '%s'\n", view.c_str());
    return 2;
  }
  return failures == 0 ? 0 : 1;
}
