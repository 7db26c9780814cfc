// MX block quantization with the branch-free cast; included once per instruction set by
// bulk_kernels.inl. It must give exactly what the scalar path (block_scaling.cpp) gives: the
// element v / 2^X is made by subtracting X from v's exponent field, which is exact whenever the
// result is a normal float32; the rare elements where it is not (v or v / 2^X below float32's
// normal range) are redone through the scalar element rule.
#include <algorithm>
#include <vector>

#include "block_walk.hpp"
#include "fpscope/core/block_format.hpp"
#if defined(FPSCOPE_KERNEL_AVX512)
#include "mx_blocks_avx512.hpp"
namespace fpscope { namespace mx_wide = mx_avx512; }
#elif defined(FPSCOPE_KERNEL_AVX2)
#include "mx_blocks_avx2.hpp"
namespace fpscope { namespace mx_wide = mx_avx2; }
#endif

namespace {

// A run: consecutive blocks whose elements lie one after another (blocks along a row), or one
// block (where per-block outcomes are asked for, or down columns in stochastic rounding). Each element
// carries its block's parameters, so the element loop runs over the whole run in vectors and
// reduces its counts once per run, not once per block.
inline constexpr std::size_t run_capacity = 512;
static_assert(run_capacity >= static_cast<std::size_t>(block_walk::max_block_size));

struct RunParameters {
  alignas(64) std::int32_t shared[run_capacity];         // MX and MXINT8: the block's scale exponent X
  alignas(64) std::int32_t amax_exponent[run_capacity];  // floor(log2 amax) + 127 of the element's block
  alignas(64) float factor[run_capacity];                // NVFP4: the block's element factor
};

struct RunResult {
  BlockOutcome outcome;
  bool any_slow = false;  // some element went the scalar way (a float32 subnormal input among them)
};

// The relative-exponent bin of a normal float32 input (block_walk::RelativeBinCounter):
// floor(log2 amax) - floor(log2 |v|), which for normal v and its block's amax (then normal too) is
// a difference of exponent fields, at most 253. Zeros and subnormal inputs get the marks the
// counter reads; subnormal ones are binned by the walker.
inline std::uint32_t relative_bin(std::int32_t amax_exponent, std::uint32_t magnitude) {
  using detail::mask;
  using detail::select;
  const std::uint32_t biased = magnitude >> 23;
  return select(mask(magnitude == 0), block_walk::RelativeBinCounter::zero_mark,
                select(mask(biased == 0), block_walk::RelativeBinCounter::elsewhere_mark, static_cast<std::uint32_t>(amax_exponent) - biased));
}

// One run of `count` elements: `in` the float32 bits (contiguous), `out` the codes, `bins` each
// element's relative-exponent byte. Element j draws stochastic word random_base + j * random_stride.
// Flags go to `flags`. MX (Multiply false): v / 2^X by the exponent field. NVFP4 (Multiply true):
// v * factor in float32, as the scalar rule does, which needs no second look. Lean: the MX
// elements in round to nearest even without flush-to-zero go through the lean cast (cast.hpp),
// which fast lanes (normal float32 or zero) satisfy.
template <Format F, RoundingMode Mode, bool Multiply = false, bool Lean = false>
RunResult mx_run(const std::uint32_t* __restrict in, std::uint8_t* __restrict out, std::uint32_t* __restrict bins, std::size_t count,
                 const RunParameters& run, const CastOptions& given_options, std::uint64_t seed, std::uint64_t random_base,
                 std::size_t random_stride, CastFlags& flags, const Context& slow_ctx) {
  using detail::mask;
  using detail::Mask;
  using detail::select;
  constexpr std::uint32_t magnitude_mask = static_cast<std::uint32_t>(F.magnitude_mask());
  constexpr std::uint32_t exponent_mask = static_cast<std::uint32_t>(F.exponent_mask());
  const CastOptions options = given_options;  // a local copy: the byte stores to `out` cannot alias it
  const std::int32_t* __restrict shared = run.shared;
  const std::int32_t* __restrict amax_exponent = run.amax_exponent;
  const float* __restrict factor = run.factor;
  // Everything the loop accumulates is local: stores to `out` (bytes, which may alias anything)
  // would otherwise keep these in memory and stop the loop from vectorising.
  alignas(64) std::uint32_t wide_codes[run_capacity];
  std::uint32_t flushed = 0, subnormal = 0, saturated = 0;
  Mask any_slow = 0, inexact = 0, underflow = 0, overflow = 0;
  for (std::size_t j = 0; j < count; ++j) {
    const std::uint32_t u = in[j];
    const std::uint32_t magnitude = u & 0x7FFFFFFFu;
    const std::int32_t biased = static_cast<std::int32_t>(magnitude >> 23);
    const Mask zero = mask(magnitude == 0);
    const std::uint32_t exponent_shift = static_cast<std::uint32_t>(shared[j]) << 23;  // wraps for X < 0: adds |X|
    const std::uint32_t scaled = Multiply ? float_bits(bits_float(u) * factor[j]) : select(zero, u, u - exponent_shift);
    // Fast lanes: MX, v / 2^X a normal float32 (or zero); NVFP4, any product for the full cast,
    // a normal or zero one for the lean cast.
    const std::uint32_t scaled_biased = (scaled >> 23) & 0xFFu;
    const Mask fast = Multiply ? (Lean ? mask(scaled_biased != 0) | mask((scaled & 0x7FFFFFFFu) == 0) : ~Mask{0})
                               : zero | (mask(biased != 0) & mask(biased > shared[j]));
    const std::uint64_t random = Mode == RoundingMode::stochastic ? stochastic_random(seed, random_base + j * random_stride) : 0;
    CastFlags raised;
    std::uint32_t code = 0;
    if constexpr (Lean) code = saturating_nearest_even_from_normal<F>(scaled, options.tininess == Tininess::before_rounding, raised);
    else code = cast_from_f32<F, Mode>(scaled, options, random, raised);
    wide_codes[j] = code;
    bins[j] = relative_bin(amax_exponent[j], magnitude);
    inexact |= fast & raised.inexact;
    underflow |= fast & raised.underflow;
    overflow |= fast & raised.overflow;
    flushed += fast & ~zero & mask((code & magnitude_mask) == 0) & 1u;
    subnormal += fast & mask((code & exponent_mask) == 0) & mask((code & magnitude_mask) != 0) & 1u;
    saturated += fast & mask(raised.overflow != 0) & 1u;
    any_slow |= ~fast | (mask(biased == 0) & ~zero);
  }
  for (std::size_t j = 0; j < count; ++j) out[j] = static_cast<std::uint8_t>(wide_codes[j]);
  flags.inexact |= inexact;
  flags.underflow |= underflow;
  flags.overflow |= overflow;
  if (any_slow != 0) {
    for (std::size_t j = 0; j < count; ++j) {
      const std::uint32_t magnitude = in[j] & 0x7FFFFFFFu;
      if (Multiply) {
        const std::uint32_t product = float_bits(bits_float(in[j]) * factor[j]) & 0x7FFFFFFFu;
        if (!Lean || product == 0 || (product >> 23) != 0) continue;  // it was a fast lane
      } else {
        const std::int32_t biased = static_cast<std::int32_t>(magnitude >> 23);
        if (magnitude == 0 || (biased != 0 && biased > shared[j])) continue;
      }
      Context element_ctx = slow_ctx;
      element_ctx.stochastic_counter = random_base + j * random_stride;
      const std::uint32_t code = Multiply ? nvfp4_element_code(bits_float(in[j]), factor[j], element_ctx)
                                          : mx_element_code(F, bits_float(in[j]), shared[j], element_ctx);
      out[j] = static_cast<std::uint8_t>(code);
      if ((element_ctx.flags & flag::inexact) != 0) flags.inexact = 1;
      if ((element_ctx.flags & flag::underflow) != 0) flags.underflow = 1;
      if ((element_ctx.flags & flag::overflow) != 0) flags.overflow = 1;
      flushed += (code & magnitude_mask) == 0;
      subnormal += (code & exponent_mask) == 0 && (code & magnitude_mask) != 0;
      saturated += (element_ctx.flags & flag::overflow) != 0;
    }
  }
  return {{flushed, subnormal, saturated}, any_slow != 0};
}

// One MXINT8 run in round to nearest even: round(v / 2^X * 64), clamped to ±127. Lanes where
// v / 2^X * 64 is a normal float32 (or zero) are rounded here with integer operations, as
// mxint8_element_code rounds them; the rest through that scalar rule.
inline RunResult mxint8_run(const std::uint32_t* __restrict in, std::uint8_t* __restrict out, std::uint32_t* __restrict bins,
                            std::size_t count, const RunParameters& run, std::uint64_t random_base, std::size_t random_stride,
                            CastFlags& flags, const Context& slow_ctx) {
  using detail::mask;
  using detail::Mask;
  using detail::select;
  const std::int32_t* __restrict shared = run.shared;
  const std::int32_t* __restrict amax_exponent = run.amax_exponent;
  alignas(64) std::uint32_t wide_codes[run_capacity];
  std::uint32_t flushed = 0, saturated = 0;
  Mask any_slow = 0, inexact = 0, overflow = 0;
  for (std::size_t j = 0; j < count; ++j) {
    const std::uint32_t u = in[j];
    const std::uint32_t magnitude = u & 0x7FFFFFFFu;
    const std::int32_t biased = static_cast<std::int32_t>(magnitude >> 23);
    const std::int32_t down = shared[j] - 6;  // v * 2^(6 - X): the exponent field moves by -down
    const std::uint32_t exponent_shift = static_cast<std::uint32_t>(down) << 23;
    const Mask zero = mask(magnitude == 0);
    const Mask fast = zero | (mask(biased != 0) & mask(biased > down));
    const std::uint32_t scaled = select(zero, 0u, magnitude - exponent_shift);  // the magnitude times 2^(6 - X)
    const std::uint32_t scaled_biased = scaled >> 23;
    // scaled = significand * 2^(biased - 150): an integer once shifted right by 150 - biased.
    const Mask big = mask(scaled_biased >= 150);  // 2^23 or more: far beyond 127
    const std::uint32_t wanted = 150u - (scaled_biased < 150 ? scaled_biased : 149u);
    const std::uint32_t shift = select(mask(wanted < 25), wanted, 25);
    const std::uint32_t significand = (scaled & 0x7FFFFFu) | 0x800000u;
    const std::uint32_t kept = significand >> shift;
    const std::uint32_t dropped = significand & ((1u << shift) - 1);
    const std::uint32_t half = 1u << (shift - 1);
    const std::uint32_t rounded = select(zero, 0u, kept + (mask(dropped > half) & 1u) + (mask(dropped == half) & kept & 1u));
    const Mask saturate = ~zero & (big | mask(rounded > 127));
    const std::uint32_t n = select(saturate, 127u, rounded);
    wide_codes[j] = select(mask((u >> 31) != 0), (256u - n) & 0xFFu, n);
    bins[j] = relative_bin(amax_exponent[j], magnitude);
    inexact |= fast & ~zero & (mask(dropped != 0) | saturate);
    overflow |= fast & saturate;
    flushed += fast & ~zero & mask(n == 0) & 1u;
    saturated += fast & saturate & 1u;
    any_slow |= ~fast;
  }
  for (std::size_t j = 0; j < count; ++j) out[j] = static_cast<std::uint8_t>(wide_codes[j]);
  flags.inexact |= inexact;
  flags.overflow |= overflow;
  if (any_slow != 0) {
    for (std::size_t j = 0; j < count; ++j) {
      const std::uint32_t magnitude = in[j] & 0x7FFFFFFFu;
      const std::int32_t biased = static_cast<std::int32_t>(magnitude >> 23);
      if (magnitude == 0 || (biased != 0 && biased > shared[j] - 6)) continue;
      Context element_ctx = slow_ctx;
      element_ctx.stochastic_counter = random_base + j * random_stride;
      const std::uint32_t code = mxint8_element_code(bits_float(in[j]), shared[j], element_ctx);
      out[j] = static_cast<std::uint8_t>(code);
      if ((element_ctx.flags & flag::inexact) != 0) flags.inexact = 1;
      if ((element_ctx.flags & flag::overflow) != 0) flags.overflow = 1;
      flushed += code == 0;
      saturated += (element_ctx.flags & flag::overflow) != 0;
    }
  }
  return {{flushed, 0, saturated}, any_slow != 0};
}

// Walks the blocks of `layout`: each block's amax, its scale (MX or NVFP4), NaN blocks, the
// statistics and outcomes; `elements(in, out, bins, count, run, random_base, random_stride)`
// quantizes one run's elements from contiguous bits, element j drawing stochastic word
// random_base + j * random_stride. Blocks down columns are walked a band of rows at a time,
// transposed so that each column's block lies contiguous and the band's blocks one after another
// (their codes go back the same way); under stochastic rounding (`random_per_element`) their runs
// are single blocks, whose elements' words are affine in j. A block with a NaN scale ends a run:
// its elements are NaN codes and not counted.
//
// `whole_blocks(in, out, scales, count)`, where it is given (`uses_whole_blocks`), is offered each
// row's stretch of whole blocks and returns how many leading ones it quantized, statistics
// included; the walker goes on from the first it left, one block at a time.
// `whole_blocks.columns(in, stride, out, scales, groups)`, where columns_at_once is not 0, is
// offered a full band's (blocks down columns) `groups` groups of that many adjacent columns from
// `in` on, where they lie in the tensor, and returns how many leading groups it took whole; the
// walker transposes only the group it stopped at (and a band's last columns short of a group),
// then offers the rest again.
struct NoWholeBlocks {
  static constexpr bool uses_whole_blocks = false;
  static constexpr std::size_t columns_at_once = 0;
  std::size_t operator()(const std::uint32_t*, std::uint8_t*, std::uint8_t*, std::size_t, std::uint64_t) const { return 0; }
  std::size_t columns(const std::uint32_t*, std::size_t, std::uint8_t*, std::uint8_t*, std::size_t, std::uint64_t) const { return 0; }
};

template <typename Elements, typename WholeBlocks = NoWholeBlocks>
void walk_blocks(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, const std::uint32_t* values, std::uint8_t* codes,
                 std::uint8_t* scales, float tensor_scale, std::uint64_t first_random, bool random_per_element, BlockStatistics* statistics,
                 BlockOutcome* outcomes, Elements elements, WholeBlocks whole_blocks = {}) {
  const bool nvfp4 = format.scale == BlockFormat::Scale::e4m3_nvfp4;
  const bool along_rows = layout.axis == BlockAxis::rows;
  const std::size_t block = static_cast<std::size_t>(layout.block_size), cols = layout.cols;
  // Where whole blocks are taken elsewhere, the blocks left here are the exceptions: one at a time.
  const bool one_block_runs = WholeBlocks::uses_whole_blocks || outcomes != nullptr || (!along_rows && random_per_element);
  RunParameters run;
  alignas(64) std::uint32_t bins[run_capacity];
  block_walk::RelativeBinCounter relative;
  std::vector<std::uint32_t> band(along_rows ? 0 : block * cols);
  std::vector<std::uint8_t> band_codes(band.size());

  const std::uint32_t* run_in = nullptr;
  std::uint8_t* run_out = nullptr;
  std::uint64_t run_random = 0;
  std::size_t run_count = 0, run_block = 0;
  const auto finish_run = [&] {
    if (run_count == 0) return;
    const RunResult result = elements(run_in, run_out, bins, run_count, run, run_random, along_rows ? 1 : cols);
    if (outcomes != nullptr) outcomes[run_block] = result.outcome;
    if (statistics != nullptr) {
      block_walk::add_outcome(*statistics, result.outcome);
      relative.add(bins, run_count, *statistics);
      if (result.any_slow)
        for (std::size_t j = 0; j < run_count; ++j) relative.add_subnormal(run_in[j] & 0x7FFFFFFFu, run.amax_exponent[j] - 127, *statistics);
    }
    run_count = 0;
  };

  // The band's columns [first_col, end_col) transposed into `band`, and their codes back.
  const auto transpose_in = [&](std::size_t first_row, std::size_t band_rows, std::size_t first_col, std::size_t end_col) {
    for (std::size_t r = 0; r < band_rows; ++r)
      for (std::size_t c = first_col; c < end_col; ++c) band[c * band_rows + r] = values[(first_row + r) * cols + c];
  };
  const auto transpose_out = [&](std::size_t first_row, std::size_t band_rows, std::size_t first_col, std::size_t end_col) {
    for (std::size_t r = 0; r < band_rows; ++r)
      for (std::size_t c = first_col; c < end_col; ++c) codes[(first_row + r) * cols + c] = band_codes[c * band_rows + r];
  };
  // Block (scale_row, scale_col) through the portable kernels (down columns, from the band).
  const auto one_block = [&](std::size_t scale_row, std::size_t scale_col, std::size_t band_rows) {
    const std::size_t block_index = scale_row * layout.scale_cols() + scale_col;
    const block_walk::BlockSpan span = block_walk::block_span(layout, scale_row, scale_col);
    const std::uint32_t* in = along_rows ? values + span.first : band.data() + scale_col * band_rows;
    std::uint8_t* out = along_rows ? codes + span.first : band_codes.data() + scale_col * band_rows;
    std::uint32_t amax = 0;
    for (std::size_t j = 0; j < span.count; ++j) {
      const std::uint32_t magnitude = in[j] & 0x7FFFFFFFu;
      amax = amax > magnitude ? amax : magnitude;
    }
    const std::uint32_t scale_code = nvfp4 ? nvfp4_block_scale_code(amax, tensor_scale) : mx_scale_code(format, rule, amax);
    scales[block_index] = static_cast<std::uint8_t>(scale_code);
    const bool nan_block = nvfp4 ? is_nan(formats::e4m3, scale_code) : e8m0::is_nan(static_cast<std::uint8_t>(scale_code));
    if (statistics != nullptr) block_walk::add_block(*statistics, scale_code, span.count, nan_block, BlockOutcome{});
    if (nan_block) {
      finish_run();
      const std::uint8_t code = block_nan_element_code(format);
      for (std::size_t j = 0; j < span.count; ++j) out[j] = code;
      if (outcomes != nullptr) outcomes[block_index] = BlockOutcome{};
      return;
    }
    if (run_count == 0) {
      run_in = in;
      run_out = out;
      run_random = first_random + span.first;
      run_block = block_index;
    }
    const std::int32_t shared = nvfp4 ? 0 : e8m0::exponent_of(static_cast<std::uint8_t>(scale_code));
    const std::int32_t amax_exponent = amax == 0 ? 0 : floor_log2_of_magnitude(amax) + 127;
    const float factor = nvfp4 ? nvfp4_element_factor(tensor_scale, block_scale_value(format, scale_code)) : 0.0f;
    for (std::size_t j = run_count; j < run_count + span.count; ++j) {
      run.shared[j] = shared;
      run.amax_exponent[j] = amax_exponent;
      run.factor[j] = factor;
    }
    run_count += span.count;
    // A run ends with its capacity, at the end of a row or band, and after each block where runs are single blocks.
    if (run_count + block > run_capacity || scale_col + 1 == layout.scale_cols() || one_block_runs) finish_run();
  };

  for (std::size_t scale_row = 0; scale_row < layout.scale_rows(); ++scale_row) {
    const std::size_t first_row = scale_row * block, band_rows = along_rows ? 1 : std::min(block, layout.rows - first_row);
    const bool by_columns = !along_rows && WholeBlocks::columns_at_once != 0 && band_rows == block;
    if (!along_rows && !by_columns) transpose_in(first_row, band_rows, 0, cols);
    const std::size_t whole = along_rows ? cols / block : 0;  // whole blocks lie one after another in a row up to its last full one
    for (std::size_t scale_col = 0; scale_col < layout.scale_cols(); ++scale_col) {
      if constexpr (WholeBlocks::uses_whole_blocks) {
        if (by_columns) {
          constexpr std::size_t lanes = WholeBlocks::columns_at_once;
          const std::size_t groups = (cols - scale_col) / lanes, at = first_row * cols + scale_col;
          // The first column not taken: its group, or the band's last columns, the portable way.
          const std::size_t left =
              scale_col + (groups == 0 ? 0
                                       : lanes * whole_blocks.columns(values + at, cols, codes + at, scales + scale_row * layout.scale_cols() + scale_col,
                                                                      groups, first_random + at));
          const std::size_t end_col = std::min(cols, left + lanes);
          if (left < end_col) {
            transpose_in(first_row, band_rows, left, end_col);
            for (std::size_t c = left; c < end_col; ++c) one_block(scale_row, c, band_rows);
            transpose_out(first_row, band_rows, left, end_col);
          }
          scale_col = end_col - 1;
          continue;
        }
        if (scale_col < whole) {
          const std::size_t first = scale_row * cols + scale_col * block;
          scale_col += whole_blocks(values + first, codes + first, scales + scale_row * layout.scale_cols() + scale_col, whole - scale_col,
                                    first_random + first);
          if (scale_col == layout.scale_cols()) break;
        }
      }
      one_block(scale_row, scale_col, band_rows);
    }
    if (!along_rows && !by_columns) transpose_out(first_row, band_rows, 0, cols);
  }
  if (statistics != nullptr) relative.flush(*statistics);
}

}  // namespace

namespace fpscope::BULK_ISA {

// The baseline build walks every case; an instruction set's build only what its whole-block
// kernels take (nearest even through the lean cast, and stochastic rounding, without per-block
// outcomes), and returns false, having touched nothing, for the rest -- the directed modes, FNUZ
// elements, flush-to-zero, per-block outcomes -- which bulk_mx_blocks then gives the baseline
// build. Those cases are rare and not in the engine's path; compiled in every build they would
// cost each fresh build their compile time once per instruction set.
#if defined(FPSCOPE_KERNEL_AVX2)
constexpr bool walks_every_case = false;
#else
constexpr bool walks_every_case = true;
#endif

bool mx_blocks(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, const std::uint32_t* values, std::uint8_t* codes,
               std::uint8_t* scales, float tensor_scale, Context& ctx, BlockStatistics* statistics, BlockOutcome* outcomes) {
  const bool nvfp4 = format.scale == BlockFormat::Scale::e4m3_nvfp4;
  Context element_ctx = ctx;
  element_ctx.saturate = true;
  element_ctx.flags = 0;
  CastOptions options = CastOptions::from(element_ctx);
  // An MX element scaled here is never a float32 subnormal (those go the scalar way); NVFP4's
  // products are read as the scalar rule reads them.
  if (!nvfp4) options.denormals_are_zero = false;
  const std::uint64_t seed = ctx.stochastic_seed, first_random = ctx.stochastic_counter;
  const bool stochastic = ctx.rounding == RoundingMode::stochastic;
#if defined(FPSCOPE_KERNEL_AVX2)
  // Whole blocks through a vector kernel (`walker` over `wide_blocks`, its codes streamed past the
  // caches where it can), the rest through `elements`; the flags of both into `flags`.
  const auto walk_with_kernel = [&](auto& wide_blocks, auto walker, const auto& elements, CastFlags& flags) {
    if constexpr (requires { wide_blocks.stream_codes(true); }) wide_blocks.stream_codes(whole_block::streams_codes(layout.element_count()));
    walk_blocks(format, rule, layout, values, codes, scales, tensor_scale, first_random, stochastic, statistics, outcomes, elements, walker);
    wide_blocks.finish(statistics, flags);
  };
#endif
  if (format.elements == BlockFormat::Elements::int8) {
    if (ctx.rounding != RoundingMode::nearest_even) return false;  // the scalar rule does the other modes
    CastFlags flags;
    const auto elements = [&](const std::uint32_t* in, std::uint8_t* out, std::uint32_t* bins, std::size_t count, const RunParameters& run,
                              std::uint64_t random_base, std::size_t stride) {
      return mxint8_run(in, out, bins, count, run, random_base, stride, flags, element_ctx);
    };
#if defined(FPSCOPE_KERNEL_AVX2)
    // Whole blocks through the widest kernel (mx_blocks_avx512.hpp, mx_blocks_avx2.hpp), MXINT8's
    // magnitudes rounded as a float format's (whole_blocks.hpp, mxint8_magnitudes); the rest here.
    if (mx_wide::takes(format) && outcomes == nullptr && mx_wide::float_arithmetic_is_default()) {
      mx_wide::Blocks<whole_block::mxint8_magnitudes> wide_blocks(format, rule, false, tensor_scale);
      walk_with_kernel(wide_blocks, mx_wide::WholeBlocks<whole_block::mxint8_magnitudes>{&wide_blocks, statistics}, elements, flags);
      ctx.raise(flags.flags());
      ctx.stochastic_counter = first_random + layout.element_count();
      return true;
    }
#endif
    if constexpr (!walks_every_case) return false;
    walk_blocks(format, rule, layout, values, codes, scales, tensor_scale, first_random, stochastic, statistics, outcomes, elements);
    ctx.raise(flags.flags());
    ctx.stochastic_counter = first_random + layout.element_count();
    return true;
  }
  bool handled = false;
  with_format_and_mode(format.element, ctx.rounding, [&]<Format F, RoundingMode Mode>() {
    // The lean cast wants what it was proven on: nearest even, no flush-to-zero, and (for NVFP4's
    // products, which may be float32 subnormals) no denormals-are-zero.
    constexpr bool lean_mode = Mode == RoundingMode::nearest_even && F.flavour != Flavour::fnuz;
    constexpr bool stochastic_mode = Mode == RoundingMode::stochastic && F.flavour != Flavour::fnuz;
    if constexpr (F.width() <= 8 && (walks_every_case || lean_mode || stochastic_mode)) {
      CastFlags flags;
      const bool lean = lean_mode && !options.flush_to_zero && (!nvfp4 || !options.denormals_are_zero);
      const auto elements = [&](const std::uint32_t* in, std::uint8_t* out, std::uint32_t* bins, std::size_t count, const RunParameters& run,
                                std::uint64_t random_base, std::size_t stride) {
        if (nvfp4) {
          if constexpr (lean_mode)
            if (lean) return mx_run<F, Mode, true, true>(in, out, bins, count, run, options, seed, random_base, stride, flags, element_ctx);
          return mx_run<F, Mode, true>(in, out, bins, count, run, options, seed, random_base, stride, flags, element_ctx);
        }
        if constexpr (lean_mode)
          if (lean) return mx_run<F, Mode, false, true>(in, out, bins, count, run, options, seed, random_base, stride, flags, element_ctx);
        return mx_run<F, Mode>(in, out, bins, count, run, options, seed, random_base, stride, flags, element_ctx);
      };
#if defined(FPSCOPE_KERNEL_AVX2)
      // MX and NVFP4 blocks in the lean cast's case, without per-block outcomes: whole blocks
      // through the widest kernel (mx_blocks_avx512.hpp, mx_blocks_avx2.hpp), the rest here.
      if constexpr (lean_mode) {
        if (lean && mx_wide::takes(format) && outcomes == nullptr && mx_wide::float_arithmetic_is_default()) {
          mx_wide::Blocks<F> wide_blocks(format, rule, options.tininess == Tininess::before_rounding, tensor_scale);
          walk_with_kernel(wide_blocks, mx_wide::WholeBlocks<F>{&wide_blocks, statistics}, elements, flags);
          ctx.raise(flags.flags());
          handled = true;
          return;
        }
      }
#endif
#if defined(FPSCOPE_KERNEL_AVX2)
      // MX and NVFP4 blocks rounded stochastically, without per-block outcomes: whole blocks
      // through the widest kernel, drawing each element's word as mx_run does.
      if constexpr (stochastic_mode) {
        if (!options.flush_to_zero && mx_wide::takes(format) && outcomes == nullptr && mx_wide::float_arithmetic_is_default()) {
          mx_wide::Blocks<F> wide_blocks(format, rule, options.tininess == Tininess::before_rounding, tensor_scale);
          wide_blocks.round_stochastically(seed, options.tininess == Tininess::before_rounding);
          walk_with_kernel(wide_blocks, mx_wide::WholeBlocks<F>{&wide_blocks, statistics}, elements, flags);
          ctx.raise(flags.flags());
          handled = true;
          return;
        }
      }
#endif
      if constexpr (walks_every_case) {
        walk_blocks(format, rule, layout, values, codes, scales, tensor_scale, first_random, stochastic, statistics, outcomes, elements);
        ctx.raise(flags.flags());
        handled = true;
      }
    }
  });
  if (handled) ctx.stochastic_counter = first_random + layout.element_count();
  return handled;
}

}  // namespace fpscope::BULK_ISA
