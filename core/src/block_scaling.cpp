// Block quantization over arrays: each block's amax, its scale, its elements and their counts.
#include "fpscope/core/block_scaling.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "block_walk.hpp"
#include "whole_blocks_table.hpp"
#include "fpscope/core/cast.hpp"
#include "bulk_isa.hpp"

namespace fpscope {

namespace {

using block_walk::max_block_size;

void check_layout(const BlockFormat& format, const BlockLayout& layout) {
  if (layout.block_size != format.block_size)
    throw std::invalid_argument("block layout of " + std::to_string(layout.block_size) + " elements for a format with blocks of " +
                                std::to_string(format.block_size));
  if (layout.block_size < 1 || layout.block_size > max_block_size)
    throw std::invalid_argument("block size " + std::to_string(layout.block_size) + " is outside 1 ..= " + std::to_string(max_block_size));
}

// NVFP4's tensor scale, as the rules and kernels take it: a finite positive float32; MX formats have
// none (1).
void check_tensor_scale(const BlockFormat& format, float tensor_scale) {
  if (format.scale != BlockFormat::Scale::e4m3_nvfp4) {
    if (tensor_scale != 1.0f) throw std::invalid_argument("block_quantize: a tensor scale for an MX format, which has none (1)");
    return;
  }
  if (!(tensor_scale > 0) || !std::isfinite(tensor_scale))
    throw std::invalid_argument("block_quantize: NVFP4's tensor scale must be a finite positive float32");
}

void check_spans(const BlockLayout& layout, std::size_t values, std::size_t element_codes, std::size_t scale_codes, std::size_t outcomes) {
  const std::size_t count = layout.element_count();
  if (values != count || element_codes != count)
    throw std::invalid_argument("block_quantize: " + std::to_string(values) + " values and " + std::to_string(element_codes) +
                                " element codes for a layout of " + std::to_string(count));
  if (scale_codes != layout.block_count())
    throw std::invalid_argument("block_quantize: " + std::to_string(scale_codes) + " scale codes for " +
                                std::to_string(layout.block_count()) + " blocks");
  if (outcomes != 0 && outcomes != layout.block_count())
    throw std::invalid_argument("block_quantize: " + std::to_string(outcomes) + " outcomes for " + std::to_string(layout.block_count()) +
                                " blocks");
}

// The largest finite magnitude's bits, in a loop the compiler vectorises (built for AVX2 and for
// the baseline, which has no unsigned 32-bit maximum; the loader picks one).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx2", "default")))
#endif
std::uint32_t nvfp4_amax_bits_of(const std::uint32_t* values, std::size_t count) {
  return block_walk::nvfp4_amax_bits(values, count);
}


// The fewest elements a thread is started for (a tensor smaller than two of these is quantized on
// the caller's thread alone).
constexpr std::size_t elements_worth_a_thread = std::size_t{1} << 19;

// NVFP4's tensor amax as bits, found on up to `threads` threads.
std::uint32_t nvfp4_amax_bits_in_parts(std::span<const float> values, int threads) {
  const auto* bits = reinterpret_cast<const std::uint32_t*>(values.data());
  const std::size_t parts = std::clamp<std::size_t>(values.size() / elements_worth_a_thread, 1, static_cast<std::size_t>(std::max(threads, 1)));
  std::vector<std::uint32_t> amax(parts, 0);
  {
    const std::size_t each = (values.size() + parts - 1) / parts;
    std::vector<std::jthread> helpers;
    for (std::size_t p = 1; p < parts; ++p)
      helpers.emplace_back([&, p] { amax[p] = nvfp4_amax_bits_of(bits + p * each, std::min(each, values.size() - std::min(values.size(), p * each))); });
    amax[0] = nvfp4_amax_bits_of(bits, std::min(each, values.size()));
  }
  return *std::max_element(amax.begin(), amax.end());
}

// NVFP4's float32 scale for the whole tensor (1 for every other format), its amax found on up
// to `threads` threads.
float tensor_scale_of(const BlockFormat& format, std::span<const float> values, int threads) {
  if (format.scale != BlockFormat::Scale::e4m3_nvfp4) return 1.0f;
  return nvfp4_tensor_scale(nvfp4_amax_bits_in_parts(values, threads));
}

// The largest magnitude (as bits; a NaN's above every other) of each square tile of
// block_size x block_size elements, one per block of the layout: the amax of the tile the block
// lies in, shared by the blocks beside it across the block axis.
std::vector<std::uint32_t> square_tile_amaxes(const BlockLayout& layout, std::span<const float> values) {
  const std::size_t block = static_cast<std::size_t>(layout.block_size);
  const std::size_t tile_rows = (layout.rows + block - 1) / block, tile_cols = (layout.cols + block - 1) / block;
  std::vector<std::uint32_t> tile(tile_rows * tile_cols, 0);
  for (std::size_t r = 0; r < layout.rows; ++r)
    for (std::size_t c = 0; c < layout.cols; ++c) {
      std::uint32_t& amax = tile[(r / block) * tile_cols + c / block];
      amax = std::max(amax, magnitude_bits(values[r * layout.cols + c]));
    }
  std::vector<std::uint32_t> per_block(layout.block_count());
  for (std::size_t scale_row = 0; scale_row < layout.scale_rows(); ++scale_row)
    for (std::size_t scale_col = 0; scale_col < layout.scale_cols(); ++scale_col) {
      // Axis rows: scale row r is matrix row r, scale column c the columns' tile c; axis cols the other way.
      const std::size_t tile_row = layout.axis == BlockAxis::rows ? scale_row / block : scale_row;
      const std::size_t tile_col = layout.axis == BlockAxis::rows ? scale_col : scale_col / block;
      per_block[scale_row * layout.scale_cols() + scale_col] = tile[tile_row * tile_cols + tile_col];
    }
  return per_block;
}

// The scalar path: every block through quantize_one_block (round_pack, or the MXINT8 and NVFP4
// element rules), NVFP4 under the given tensor scale; each block scaled by its own amax, or by
// tile_amax[block] where given (square tiles).
void quantize_scalar(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                     std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float tensor_scale, Context& ctx,
                     BlockStatistics* statistics, std::span<BlockOutcome> outcomes, std::span<const std::uint32_t> tile_amax = {}) {
  const std::uint64_t first_random = ctx.stochastic_counter;
  std::uint32_t magnitudes[max_block_size];
  block_walk::RelativeExponentCounter relative;

  for (std::size_t scale_row = 0; scale_row < layout.scale_rows(); ++scale_row) {
    for (std::size_t scale_col = 0; scale_col < layout.scale_cols(); ++scale_col) {
      const std::size_t block_index = scale_row * layout.scale_cols() + scale_col;
      const block_walk::BlockSpan span = block_walk::block_span(layout, scale_row, scale_col);
      std::uint32_t amax = 0;
      for (std::size_t j = 0; j < span.count; ++j) {
        magnitudes[j] = magnitude_bits(values[span.first + j * span.stride]);
        amax = std::max(amax, magnitudes[j]);
      }

      if (!tile_amax.empty()) amax = tile_amax[block_index];
      std::uint8_t codes[max_block_size];
      const QuantizedBlock block =
          quantize_one_block(format, rule, tensor_scale, ctx, first_random, values.data(), span.first, span.stride, span.count, amax, codes);
      for (std::size_t j = 0; j < span.count; ++j) element_codes[span.first + j * span.stride] = codes[j];
      scale_codes[block_index] = static_cast<std::uint8_t>(block.scale_code);
      ctx.raise(block.flags);
      if (!outcomes.empty()) outcomes[block_index] = block.outcome;
      if (statistics != nullptr) {
        if (!block.nan_block) relative.add_block(magnitudes, span.count, amax);
        block_walk::add_block(*statistics, block.scale_code, span.count, block.nan_block, block.outcome);
      }
    }
  }
  if (statistics != nullptr) relative.add_to(*statistics);
  ctx.stochastic_counter = first_random + layout.element_count();
}

// One band of a tensor through the instruction-set kernel (MX and NVFP4 blocks of a format the
// branch-free cast knows), else the scalar path; blocks scaled by square tiles (tile_amax, one
// per block of the band) through the scalar path.
void quantize_band(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                   std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float tensor_scale, Context& ctx,
                   BlockStatistics* statistics, std::span<BlockOutcome> outcomes, std::span<const std::uint32_t> tile_amax = {}) {
  if (!tile_amax.empty()) {
    quantize_scalar(format, rule, layout, values, element_codes, scale_codes, tensor_scale, ctx, statistics, outcomes, tile_amax);
    return;
  }
  if (bulk_mx_blocks(format, rule, layout, reinterpret_cast<const std::uint32_t*>(values.data()), element_codes.data(), scale_codes.data(),
                     tensor_scale, ctx, statistics, outcomes.empty() ? nullptr : outcomes.data()))
    return;
  quantize_scalar(format, rule, layout, values, element_codes, scale_codes, tensor_scale, ctx, statistics, outcomes);
}


// The tensor cut into `parts` bands of whole scale rows, each quantized on its own thread (the
// caller takes the first): a band is a tensor of its own (its rows are consecutive in memory),
// its elements draw the stochastic words of their places in the whole, and its statistics,
// flags and outcomes are the whole's restricted to it, so the sums are the same numbers. Square
// tiles (tile_amax, one per block, found over the whole tensor): each band's blocks' amaxes passed
// along, so a band may cut a tile.
void quantize_in_bands(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                       std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float tensor_scale, Context& ctx,
                       BlockStatistics* statistics, std::span<BlockOutcome> outcomes, std::size_t parts,
                       std::span<const std::uint32_t> tile_amax = {}) {
  const std::size_t scale_rows = layout.scale_rows(), scale_cols = layout.scale_cols();
  const std::size_t rows_per_scale_row = layout.axis == BlockAxis::rows ? 1 : static_cast<std::size_t>(layout.block_size);
  std::vector<Context> contexts(parts, ctx);
  std::vector<BlockStatistics> band_statistics(statistics != nullptr ? parts : 0);
  std::vector<std::exception_ptr> errors(parts);
  const auto run_band = [&](std::size_t part) {
    try {
      const std::size_t first = scale_rows * part / parts, last = scale_rows * (part + 1) / parts;
      const std::size_t first_row = first * rows_per_scale_row, end_row = std::min(layout.rows, last * rows_per_scale_row);
      const BlockLayout band{end_row - first_row, layout.cols, layout.axis, layout.block_size};
      const std::size_t offset = first_row * layout.cols, count = band.element_count();
      contexts[part].stochastic_counter = ctx.stochastic_counter + offset;
      contexts[part].flags = 0;
      quantize_band(format, rule, band, values.subspan(offset, count), element_codes.subspan(offset, count),
                    scale_codes.subspan(first * scale_cols, (last - first) * scale_cols), tensor_scale, contexts[part],
                    statistics != nullptr ? &band_statistics[part] : nullptr,
                    outcomes.empty() ? outcomes : outcomes.subspan(first * scale_cols, (last - first) * scale_cols),
                    tile_amax.empty() ? tile_amax : tile_amax.subspan(first * scale_cols, (last - first) * scale_cols));
    } catch (...) {
      errors[part] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (std::size_t part = 1; part < parts; ++part) helpers.emplace_back(run_band, part);
    run_band(0);
  }
  for (const std::exception_ptr& error : errors)
    if (error) std::rethrow_exception(error);
  for (std::size_t part = 0; part < parts; ++part) {
    ctx.raise(contexts[part].flags);
    if (statistics != nullptr) statistics->merge(band_statistics[part]);
  }
  ctx.stochastic_counter += layout.element_count();
}

}  // namespace

const std::array<float, 256>& nvfp4_scale_values() {
  static const auto values = [] {
    std::array<float, 256> table{};
    for (std::uint32_t c = 0; c < 256; ++c) table[c] = block_scale_value(block_formats::nvfp4, c);
    return table;
  }();
  return values;
}

void block_quantize(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                    std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float& tensor_scale,
                    Context& ctx, BlockStatistics* statistics, std::span<BlockOutcome> outcomes, int threads) {
  check_layout(format, layout);
  check_spans(layout, values.size(), element_codes.size(), scale_codes.size(), outcomes.size());
  if (threads == 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  tensor_scale = tensor_scale_of(format, values, threads);
  block_quantize_under_tensor_scale(format, rule, layout, values, element_codes, scale_codes, tensor_scale, ctx, statistics, outcomes, threads);
}

float nvfp4_tensor_amax(std::span<const float> values, int threads) {
  if (threads == 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  return bits_float(nvfp4_amax_bits_in_parts(values, threads));
}

void block_quantize_under_tensor_scale(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                                       std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float tensor_scale,
                                       Context& ctx, BlockStatistics* statistics, std::span<BlockOutcome> outcomes, int threads) {
  check_layout(format, layout);
  check_spans(layout, values.size(), element_codes.size(), scale_codes.size(), outcomes.size());
  check_tensor_scale(format, tensor_scale);
  if (threads == 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  const std::size_t parts = std::min({static_cast<std::size_t>(std::max(threads, 1)), layout.scale_rows(),
                                      std::max<std::size_t>(layout.element_count() / elements_worth_a_thread, 1)});
  if (parts > 1) {
    quantize_in_bands(format, rule, layout, values, element_codes, scale_codes, tensor_scale, ctx, statistics, outcomes, parts);
    return;
  }
  quantize_band(format, rule, layout, values, element_codes, scale_codes, tensor_scale, ctx, statistics, outcomes);
}

void block_quantize_scalar(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                           std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float& tensor_scale,
                           Context& ctx, BlockStatistics* statistics, std::span<BlockOutcome> outcomes) {
  check_layout(format, layout);
  check_spans(layout, values.size(), element_codes.size(), scale_codes.size(), outcomes.size());
  tensor_scale = tensor_scale_of(format, values, 1);
  block_quantize_scalar_under_tensor_scale(format, rule, layout, values, element_codes, scale_codes, tensor_scale, ctx, statistics, outcomes);
}

void block_quantize_scalar_under_tensor_scale(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                                              std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float tensor_scale,
                                              Context& ctx, BlockStatistics* statistics, std::span<BlockOutcome> outcomes) {
  check_layout(format, layout);
  check_spans(layout, values.size(), element_codes.size(), scale_codes.size(), outcomes.size());
  check_tensor_scale(format, tensor_scale);
  quantize_scalar(format, rule, layout, values, element_codes, scale_codes, tensor_scale, ctx, statistics, outcomes);
}

void block_dequantize(const BlockFormat& format, const BlockLayout& layout, std::span<const std::uint8_t> element_codes,
                      std::span<const std::uint8_t> scale_codes, float tensor_scale, std::span<float> values) {
  check_layout(format, layout);
  const std::size_t count = layout.element_count();
  if (values.size() != count || element_codes.size() != count || scale_codes.size() != layout.block_count())
    throw std::invalid_argument("block_dequantize: spans do not match the layout of " + std::to_string(count) + " elements in " +
                                std::to_string(layout.block_count()) + " blocks");
  const bool nvfp4 = format.scale == BlockFormat::Scale::e4m3_nvfp4;
  // Codes are bytes: each one's element value once, then a table read per element.
  std::array<float, 256> element_values;
  element_values.fill(bits_float(0x7FC00000u));  // codes wider than the element format: none are made
  const std::uint32_t codes_in_format = block_element_code_count(format);
  for (std::uint32_t code = 0; code < codes_in_format; ++code) element_values[code] = block_element_value(format, code);
  for (std::size_t scale_row = 0; scale_row < layout.scale_rows(); ++scale_row) {
    for (std::size_t scale_col = 0; scale_col < layout.scale_cols(); ++scale_col) {
      const std::uint8_t scale_code = scale_codes[scale_row * layout.scale_cols() + scale_col];
      const block_walk::BlockSpan span = block_walk::block_span(layout, scale_row, scale_col);
      const float scale = block_scale_value(format, scale_code);  // NaN for a NaN scale
      for (std::size_t j = 0; j < span.count; ++j) {
        const std::size_t i = span.first + j * span.stride;
        values[i] = dequantized_element(nvfp4, element_values[element_codes[i]], scale, tensor_scale);
      }
    }
  }
}

void block_quantize_square_tiles(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, std::span<const float> values,
                                 std::span<std::uint8_t> element_codes, std::span<std::uint8_t> scale_codes, float& tensor_scale, Context& ctx,
                                 BlockStatistics* statistics, std::span<BlockOutcome> outcomes, int threads) {
  check_layout(format, layout);
  check_spans(layout, values.size(), element_codes.size(), scale_codes.size(), outcomes.size());
  if (threads == 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  tensor_scale = tensor_scale_of(format, values, threads);
  const std::vector<std::uint32_t> tile_amax = square_tile_amaxes(layout, values);
  // The scalar path takes some tens of nanoseconds an element: a thread is worth starting for far
  // fewer elements than the kernels' bands need.
  constexpr std::size_t scalar_elements_worth_a_thread = std::size_t{1} << 15;
  const std::size_t tile_rows = (layout.rows + static_cast<std::size_t>(layout.block_size) - 1) / static_cast<std::size_t>(layout.block_size);
  const std::size_t parts = std::min({static_cast<std::size_t>(std::max(threads, 1)), tile_rows,
                                      std::max<std::size_t>(layout.element_count() / scalar_elements_worth_a_thread, 1)});
  if (parts > 1) {
    quantize_in_bands(format, rule, layout, values, element_codes, scale_codes, tensor_scale, ctx, statistics, outcomes, parts, tile_amax);
    return;
  }
  quantize_scalar(format, rule, layout, values, element_codes, scale_codes, tensor_scale, ctx, statistics, outcomes, tile_amax);
}

}  // namespace fpscope
