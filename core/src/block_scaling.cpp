// Block quantization over arrays: each block's amax, its scale, its elements and their counts.
#include "fpscope/core/block_scaling.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fpscope {

namespace {

constexpr int max_block_size = 256;

void check_layout(const BlockFormat& format, const BlockLayout& layout) {
  if (layout.block_size != format.block_size)
    throw std::invalid_argument("block layout of " + std::to_string(layout.block_size) + " elements for a format with blocks of " +
                                std::to_string(format.block_size));
  if (layout.block_size < 1 || layout.block_size > max_block_size)
    throw std::invalid_argument("block size " + std::to_string(layout.block_size) + " is outside 1 ..= " + std::to_string(max_block_size));
}

// The linear indices of the elements of block (scale_row, scale_col), in order; returns how many.
std::size_t block_indices(const BlockLayout& layout, std::size_t scale_row, std::size_t scale_col, std::size_t* indices) {
  const std::size_t block = static_cast<std::size_t>(layout.block_size);
  if (layout.axis == BlockAxis::rows) {
    const std::size_t first = scale_col * block;
    const std::size_t count = std::min(block, layout.cols - first);
    for (std::size_t j = 0; j < count; ++j) indices[j] = scale_row * layout.cols + first + j;
    return count;
  }
  const std::size_t first = scale_row * block;
  const std::size_t count = std::min(block, layout.rows - first);
  for (std::size_t j = 0; j < count; ++j) indices[j] = (first + j) * layout.cols + scale_col;
  return count;
}

std::uint32_t magnitude_bits(float v) { return float_bits(v) & 0x7FFFFFFFu; }

// An element code that stands for "no value" in a block whose scale is NaN.
std::uint8_t nan_block_element(const BlockFormat& format) {
  if (format.elements == BlockFormat::Elements::floating && format.element.has_nan())
    return static_cast<std::uint8_t>(format.element.quiet_nan_bits());
  return 0;
}

}  // namespace

float block_element_value(const BlockFormat& format, std::uint32_t code) {
  if (format.elements == BlockFormat::Elements::int8) return mxint8_element_value(code);
  Context ignored;
  return to_float(format.element, code, ignored);
}

float block_scale_value(const BlockFormat& format, std::uint32_t scale_code) {
  if (format.scale == BlockFormat::Scale::e8m0) return e8m0::to_float(static_cast<std::uint8_t>(scale_code));
  Context ignored;
  return to_float(formats::e4m3, scale_code, ignored);
}

void block_quantize(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                    std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float& tensor_scale,
                    Context& ctx, BlockStatistics* statistics, std::span<BlockOutcome> outcomes) {
  check_layout(format, layout);
  const std::size_t count = layout.element_count();
  if (values.size() != count || element_codes.size() != count)
    throw std::invalid_argument("block_quantize: " + std::to_string(values.size()) + " values and " +
                                std::to_string(element_codes.size()) + " element codes for a layout of " + std::to_string(count));
  if (scale_codes.size() != layout.block_count())
    throw std::invalid_argument("block_quantize: " + std::to_string(scale_codes.size()) + " scale codes for " +
                                std::to_string(layout.block_count()) + " blocks");
  if (!outcomes.empty() && outcomes.size() != layout.block_count())
    throw std::invalid_argument("block_quantize: " + std::to_string(outcomes.size()) + " outcomes for " +
                                std::to_string(layout.block_count()) + " blocks");

  const bool nvfp4 = format.scale == BlockFormat::Scale::e4m3_nvfp4;
  tensor_scale = 1.0f;
  if (nvfp4) {
    std::uint32_t tensor_amax = 0;
    for (const float v : values) tensor_amax = std::max(tensor_amax, magnitude_bits(v));
    tensor_scale = nvfp4_tensor_scale(tensor_amax);
  }

  Context element_ctx = ctx;
  element_ctx.saturate = true;
  const std::uint64_t first_random = ctx.stochastic_counter;
  std::size_t indices[max_block_size];

  for (std::size_t scale_row = 0; scale_row < layout.scale_rows(); ++scale_row) {
    for (std::size_t scale_col = 0; scale_col < layout.scale_cols(); ++scale_col) {
      const std::size_t block_index = scale_row * layout.scale_cols() + scale_col;
      const std::size_t n = block_indices(layout, scale_row, scale_col, indices);
      std::uint32_t amax = 0;
      for (std::size_t j = 0; j < n; ++j) amax = std::max(amax, magnitude_bits(values[indices[j]]));

      std::uint32_t scale_code = 0;
      int shared_exponent = 0;
      float factor = 0.0f;
      bool nan_block = false;
      if (nvfp4) {
        scale_code = nvfp4_block_scale_code(amax, tensor_scale);
        nan_block = is_nan(formats::e4m3, scale_code);
        if (!nan_block) factor = nvfp4_element_factor(tensor_scale, block_scale_value(format, scale_code));
      } else {
        scale_code = mx_scale_code(format, rule, amax);
        nan_block = e8m0::is_nan(static_cast<std::uint8_t>(scale_code));
        if (!nan_block) shared_exponent = e8m0::exponent_of(static_cast<std::uint8_t>(scale_code));
      }
      scale_codes[block_index] = static_cast<std::uint8_t>(scale_code);

      BlockOutcome outcome;
      if (nan_block) {
        const std::uint8_t code = nan_block_element(format);
        for (std::size_t j = 0; j < n; ++j) element_codes[indices[j]] = code;
      } else {
        const int amax_exponent = amax != 0 ? floor_log2_of_magnitude(amax) : 0;
        for (std::size_t j = 0; j < n; ++j) {
          const std::size_t i = indices[j];
          const float v = values[i];
          element_ctx.stochastic_counter = first_random + i;
          element_ctx.flags = 0;
          std::uint32_t code = 0;
          bool subnormal = false;
          if (format.elements == BlockFormat::Elements::int8) {
            code = mxint8_element_code(v, shared_exponent, element_ctx);
          } else {
            code = nvfp4 ? nvfp4_element_code(v, factor, element_ctx)
                         : mx_element_code(format.element, v, shared_exponent, element_ctx);
            subnormal = is_subnormal(format.element, code);
          }
          element_codes[i] = static_cast<std::uint8_t>(code);
          ctx.raise(element_ctx.flags);
          const std::uint32_t magnitude = magnitude_bits(v);
          const bool element_zero = format.elements == BlockFormat::Elements::int8 ? code == 0 : is_zero(format.element, code);
          if (magnitude != 0 && element_zero) ++outcome.flushed_to_zero;
          if (subnormal) ++outcome.made_subnormal;
          if ((element_ctx.flags & flag::overflow) != 0) ++outcome.saturated;
          if (statistics != nullptr) {
            if (magnitude == 0) ++statistics->zeros;
            else ++statistics->relative_exponents[static_cast<std::size_t>(amax_exponent - floor_log2_of_magnitude(magnitude))];
          }
        }
      }
      if (!outcomes.empty()) outcomes[block_index] = outcome;
      if (statistics != nullptr) {
        ++statistics->scale_codes[scale_code & 0xFF];
        ++statistics->blocks;
        statistics->elements += n;
        if (nan_block) ++statistics->nan_blocks;
        statistics->flushed_to_zero += outcome.flushed_to_zero;
        statistics->made_subnormal += outcome.made_subnormal;
        statistics->saturated += outcome.saturated;
      }
    }
  }
  ctx.stochastic_counter = first_random + count;
}

void block_dequantize(const BlockFormat& format, const BlockLayout& layout, std::span<const std::uint8_t> element_codes,
                      std::span<const std::uint8_t> scale_codes, float tensor_scale, std::span<float> values) {
  check_layout(format, layout);
  const std::size_t count = layout.element_count();
  if (values.size() != count || element_codes.size() != count || scale_codes.size() != layout.block_count())
    throw std::invalid_argument("block_dequantize: spans do not match the layout of " + std::to_string(count) + " elements in " +
                                std::to_string(layout.block_count()) + " blocks");
  const bool nvfp4 = format.scale == BlockFormat::Scale::e4m3_nvfp4;
  const float nan = bits_float(0x7FC00000u);
  std::size_t indices[max_block_size];
  for (std::size_t scale_row = 0; scale_row < layout.scale_rows(); ++scale_row) {
    for (std::size_t scale_col = 0; scale_col < layout.scale_cols(); ++scale_col) {
      const std::uint8_t scale_code = scale_codes[scale_row * layout.scale_cols() + scale_col];
      const std::size_t n = block_indices(layout, scale_row, scale_col, indices);
      const float scale = block_scale_value(format, scale_code);  // NaN for a NaN scale
      for (std::size_t j = 0; j < n; ++j) {
        const float element = block_element_value(format, element_codes[indices[j]]);
        // MX: element * 2^X is one exact product (or an infinity beyond float32's range).
        // NVFP4: element * block scale is exact (2 by 4 significant bits); the division rounds once.
        values[indices[j]] = scale != scale ? nan : nvfp4 ? (element * scale) / tensor_scale : element * scale;
      }
    }
  }
}

}  // namespace fpscope
