// Block quantization reports: statistics, error against the originals, scale rules compared.
#include "fpscope/analyzer/block_analysis.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "fpscope/core/bits.hpp"

namespace fpscope {

QuantizationError quantization_error(const BlockFormat& format, const BlockLayout& layout, std::span<const float> original,
                                     std::span<const std::uint8_t> element_codes, std::span<const std::uint8_t> scale_codes, float tensor_scale) {
  if (original.size() != layout.element_count() || element_codes.size() != layout.element_count() ||
      scale_codes.size() != layout.block_count())
    throw std::invalid_argument("quantization_error: spans do not match the layout");
  const bool nvfp4 = format.scale == BlockFormat::Scale::e4m3_nvfp4;
  QuantizationError error;
  double sum_squared = 0, sum_squared_value = 0;
  for (std::size_t scale_row = 0; scale_row < layout.scale_rows(); ++scale_row) {
    for (std::size_t scale_col = 0; scale_col < layout.scale_cols(); ++scale_col) {
      const float scale = block_scale_value(format, scale_codes[scale_row * layout.scale_cols() + scale_col]);
      if (std::isnan(scale)) continue;  // NaN blocks are counted as such, not as error
      const BlockSpan span = block_span(layout, scale_row, scale_col);
      for (std::size_t j = 0; j < span.count; ++j) {
        const std::size_t i = span.first + j * span.stride;
        const double v = original[i];
        if (!std::isfinite(v)) continue;
        const float element = block_element_value(format, element_codes[i]);
        // Exact for MX (a few significant bits times a power of two); NVFP4's quotient rounds
        // once, in double.
        const double q = nvfp4 ? static_cast<double>(element) * scale / tensor_scale : static_cast<double>(element) * scale;
        error.beyond_float32 += std::isinf(dequantized_element(nvfp4, element, scale, tensor_scale)) ? 1 : 0;
        const double difference = std::fabs(q - v);
        error.max_abs = std::max(error.max_abs, difference);
        sum_squared += difference * difference;
        sum_squared_value += v * v;
        ++error.compared;
      }
    }
  }
  if (error.compared > 0) {
    error.rms = std::sqrt(sum_squared / static_cast<double>(error.compared));
    error.rms_value = std::sqrt(sum_squared_value / static_cast<double>(error.compared));
  }
  return error;
}

RelativeWindow relative_window(const BlockFormat& format) {
  if (format.elements == BlockFormat::Elements::int8) return {-format.element_mantissa_bits() - 1, -format.element_mantissa_bits() - 1};
  const Format& e = format.element;
  return {e.emin() - e.emax(), e.emin() - e.mantissa_bits - 1 - e.emax()};
}

std::optional<ScaleExponentRange> scale_exponent_range(const BlockFormat& format, const BlockStatistics& statistics) {
  std::optional<ScaleExponentRange> range;
  for (std::size_t code = 0; code < statistics.scale_codes.size(); ++code) {
    if (statistics.scale_codes[code] == 0) continue;
    const float scale = block_scale_value(format, static_cast<std::uint32_t>(code));
    if (!(scale > 0)) continue;  // NaN, or NVFP4's zero scale
    const int exponent = static_cast<int>(std::floor(std::log2(scale)));
    if (!range) range = ScaleExponentRange{exponent, exponent};
    range->low = std::min(range->low, exponent);
    range->high = std::max(range->high, exponent);
  }
  return range;
}

BlockRuleReport analyze_blocks(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                               const Context& ctx, std::optional<float> given_tensor_scale, bool square_tiles) {
  if (square_tiles && given_tensor_scale) throw std::invalid_argument("analyze_blocks: square tiles take the values' own tensor scale");
  BlockRuleReport report;
  report.rule = rule;
  std::vector<std::uint8_t> codes(values.size());
  report.scale_codes.resize(layout.block_count());
  float tensor_scale = 1;
  Context run = ctx;
  if (square_tiles) {
    block_quantize_square_tiles(format, rule, layout, values, codes, report.scale_codes, tensor_scale, run, &report.statistics, {}, 0);
  } else if (given_tensor_scale) {
    tensor_scale = *given_tensor_scale;
    block_quantize_under_tensor_scale(format, rule, layout, values, codes, report.scale_codes, tensor_scale, run, &report.statistics, {}, 0);
  } else {
    block_quantize(format, rule, layout, values, codes, report.scale_codes, tensor_scale, run, &report.statistics, {}, 0);  // every core
  }
  report.error = quantization_error(format, layout, values, codes, report.scale_codes, tensor_scale);
  report.scale_range = scale_exponent_range(format, report.statistics);
  return report;
}

std::vector<BlockRuleReport> compare_scale_rules(const BlockFormat& format, const BlockLayout& layout, std::span<const float> values,
                                                 const Context& ctx, bool square_tiles) {
  std::vector<BlockRuleReport> reports;
  for (const ScaleRule rule : all_scale_rules) {
    reports.push_back(analyze_blocks(format, rule, layout, values, ctx, std::nullopt, square_tiles));
    for (std::size_t b = 0; b < reports.back().scale_codes.size(); ++b)
      reports.back().blocks_differing += reports.back().scale_codes[b] != reports.front().scale_codes[b];
    if (format.scale != BlockFormat::Scale::e8m0) break;  // NVFP4's E4M3 scale has one rule
  }
  return reports;
}

}  // namespace fpscope
