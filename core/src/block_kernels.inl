// MX block quantization with the branch-free cast; included once per instruction set by
// bulk_kernels.inl. It must give exactly what the scalar path (block_scaling.cpp) gives: the
// element v / 2^X is made by subtracting X from v's exponent field, which is exact whenever the
// result is a normal float32; the rare elements where it is not (v or v / 2^X below float32's
// normal range) are redone through the scalar element rule.
#include "block_walk.hpp"
#include "fpscope/core/block_format.hpp"

namespace {

// One block of `count` elements: `in` the float32 bits (contiguous), `out` the codes. Element j
// draws stochastic word random_base + j * random_stride. Flags go to `flags`, counts to the
// returned outcome. MX (Multiply false): v / 2^shared_exponent by the exponent field. NVFP4
// (Multiply true): v * factor in float32, as the scalar rule does, which needs no second look.
// Lean: the MX elements in round to nearest even without flush-to-zero go through the lean
// cast (cast.hpp), which fast lanes (normal float32 or zero) satisfy.
template <Format F, RoundingMode Mode, bool Multiply = false, bool Lean = false>
BlockOutcome mx_block(const std::uint32_t* __restrict in, std::uint8_t* __restrict out, std::size_t count, int shared_exponent,
                      float factor, const CastOptions& options,
                      std::uint64_t seed, std::uint64_t random_base, std::size_t random_stride, CastFlags& flags,
                      const Context& slow_ctx) {
  using detail::mask;
  using detail::Mask;
  using detail::select;
  constexpr std::uint32_t magnitude_mask = static_cast<std::uint32_t>(F.magnitude_mask());
  constexpr std::uint32_t exponent_mask = static_cast<std::uint32_t>(F.exponent_mask());
  const std::uint32_t exponent_shift = static_cast<std::uint32_t>(shared_exponent) << 23;  // wraps for X < 0: adds |X|
  // Everything the loop accumulates is local: stores to `out` (bytes, which may alias anything)
  // would otherwise keep these in memory and stop the loop from vectorising.
  std::uint32_t flushed = 0, subnormal = 0, saturated = 0;
  Mask any_slow = 0, inexact = 0, underflow = 0, overflow = 0;
  for (std::size_t j = 0; j < count; ++j) {
    const std::uint32_t u = in[j];
    const std::uint32_t magnitude = u & 0x7FFFFFFFu;
    const std::int32_t biased = static_cast<std::int32_t>(magnitude >> 23);
    const Mask zero = mask(magnitude == 0);
    const std::uint32_t scaled = Multiply ? float_bits(bits_float(u) * factor) : select(zero, u, u - exponent_shift);
    // Fast lanes: MX, v / 2^X a normal float32 (or zero); NVFP4, any product for the full cast,
    // a normal or zero one for the lean cast.
    const std::uint32_t scaled_biased = (scaled >> 23) & 0xFFu;
    const Mask fast = Multiply ? (Lean ? mask(scaled_biased != 0) | mask((scaled & 0x7FFFFFFFu) == 0) : ~Mask{0})
                               : zero | (mask(biased != 0) & mask(biased > shared_exponent));
    const std::uint64_t random = Mode == RoundingMode::stochastic ? stochastic_random(seed, random_base + j * random_stride) : 0;
    CastFlags raised;
    std::uint32_t code = 0;
    if constexpr (Lean) code = saturating_nearest_even_from_normal<F>(scaled, options.tininess == Tininess::before_rounding, raised);
    else code = cast_from_f32<F, Mode>(scaled, options, random, raised);
    out[j] = static_cast<std::uint8_t>(code);
    inexact |= fast & raised.inexact;
    underflow |= fast & raised.underflow;
    overflow |= fast & raised.overflow;
    flushed += fast & ~zero & mask((code & magnitude_mask) == 0) & 1u;
    subnormal += fast & mask((code & exponent_mask) == 0) & mask((code & magnitude_mask) != 0) & 1u;
    saturated += fast & mask(raised.overflow != 0) & 1u;
    any_slow |= ~fast;
  }
  flags.inexact |= inexact;
  flags.underflow |= underflow;
  flags.overflow |= overflow;
  if (any_slow != 0) {
    for (std::size_t j = 0; j < count; ++j) {
      const std::uint32_t magnitude = in[j] & 0x7FFFFFFFu;
      if (Multiply) {
        const std::uint32_t product = float_bits(bits_float(in[j]) * factor) & 0x7FFFFFFFu;
        if (product == 0 || (product >> 23) != 0) continue;  // it was a fast lane
      } else {
        const std::int32_t biased = static_cast<std::int32_t>(magnitude >> 23);
        if (magnitude == 0 || (biased != 0 && biased > shared_exponent)) continue;
      }
      Context element_ctx = slow_ctx;
      element_ctx.stochastic_counter = random_base + j * random_stride;
      const std::uint32_t code = Multiply ? nvfp4_element_code(bits_float(in[j]), factor, element_ctx)
                                          : mx_element_code(F, bits_float(in[j]), shared_exponent, element_ctx);
      out[j] = static_cast<std::uint8_t>(code);
      if ((element_ctx.flags & flag::inexact) != 0) flags.inexact = 1;
      if ((element_ctx.flags & flag::underflow) != 0) flags.underflow = 1;
      if ((element_ctx.flags & flag::overflow) != 0) flags.overflow = 1;
      flushed += (code & magnitude_mask) == 0;
      subnormal += (code & exponent_mask) == 0 && (code & magnitude_mask) != 0;
      saturated += (element_ctx.flags & flag::overflow) != 0;
    }
  }
  return {flushed, subnormal, saturated};
}

}  // namespace

namespace fpscope::BULK_ISA {

bool mx_blocks(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, const std::uint32_t* values, std::uint8_t* codes,
               std::uint8_t* scales, float& tensor_scale, Context& ctx, BlockStatistics* statistics, BlockOutcome* outcomes) {
  const bool nvfp4 = format.scale == BlockFormat::Scale::e4m3_nvfp4;
  Context element_ctx = ctx;
  element_ctx.saturate = true;
  element_ctx.flags = 0;
  CastOptions options = CastOptions::from(element_ctx);
  // An MX element scaled here is never a float32 subnormal (those go the scalar way); NVFP4's
  // products are read as the scalar rule reads them.
  if (!nvfp4) options.denormals_are_zero = false;
  const std::uint64_t seed = ctx.stochastic_seed, first_random = ctx.stochastic_counter;
  tensor_scale = 1.0f;
  if (nvfp4) {
    std::uint32_t tensor_amax = 0;
    for (std::size_t i = 0; i < layout.element_count(); ++i) {
      const std::uint32_t magnitude = values[i] & 0x7FFFFFFFu;
      tensor_amax = tensor_amax > magnitude ? tensor_amax : magnitude;
    }
    tensor_scale = nvfp4_tensor_scale(tensor_amax);
  }
  const bool done = with_format_and_mode(format.element, ctx.rounding, [&]<Format F, RoundingMode Mode>() {
    if constexpr (F.width() <= 8) {
      CastFlags flags;
      std::uint32_t gathered[block_walk::max_block_size], magnitudes[block_walk::max_block_size];
      std::uint8_t block_codes[block_walk::max_block_size];
      block_walk::RelativeExponentCounter relative;
      for (std::size_t scale_row = 0; scale_row < layout.scale_rows(); ++scale_row) {
        for (std::size_t scale_col = 0; scale_col < layout.scale_cols(); ++scale_col) {
          const std::size_t block_index = scale_row * layout.scale_cols() + scale_col;
          const block_walk::BlockSpan span = block_walk::block_span(layout, scale_row, scale_col);
          const bool contiguous = span.stride == 1;
          const std::uint32_t* in = values + span.first;
          if (!contiguous) {
            for (std::size_t j = 0; j < span.count; ++j) gathered[j] = values[span.first + j * span.stride];
            in = gathered;
          }
          std::uint32_t amax = 0;
          for (std::size_t j = 0; j < span.count; ++j) {
            magnitudes[j] = in[j] & 0x7FFFFFFFu;
            amax = amax > magnitudes[j] ? amax : magnitudes[j];
          }
          const std::uint32_t scale_code = nvfp4 ? nvfp4_block_scale_code(amax, tensor_scale) : mx_scale_code(format, rule, amax);
          scales[block_index] = static_cast<std::uint8_t>(scale_code);
          const bool nan_block = nvfp4 ? is_nan(formats::e4m3, scale_code) : e8m0::is_nan(static_cast<std::uint8_t>(scale_code));
          std::uint8_t* out = contiguous ? codes + span.first : block_codes;
          BlockOutcome outcome;
          if (nan_block) {
            const std::uint8_t code = block_walk::nan_block_element(format);
            for (std::size_t j = 0; j < span.count; ++j) out[j] = code;
          } else {
            if (nvfp4) {
              const float factor = nvfp4_element_factor(tensor_scale, block_scale_value(format, scale_code));
              // The lean cast wants what it was proven on: nearest even, no flush-to-zero, and no
              // denormals-are-zero (which would read a subnormal product as zero).
              const bool lean = Mode == RoundingMode::nearest_even && !options.flush_to_zero && !options.denormals_are_zero;
              if constexpr (Mode == RoundingMode::nearest_even && F.flavour != Flavour::fnuz) {
                if (lean) {
                  outcome = mx_block<F, Mode, true, true>(in, out, span.count, 0, factor, options, seed, first_random + span.first,
                                                          span.stride, flags, element_ctx);
                } else {
                  outcome = mx_block<F, Mode, true>(in, out, span.count, 0, factor, options, seed, first_random + span.first, span.stride,
                                                    flags, element_ctx);
                }
              } else {
                outcome = mx_block<F, Mode, true>(in, out, span.count, 0, factor, options, seed, first_random + span.first, span.stride,
                                                  flags, element_ctx);
              }
            } else {
              const int shared_exponent = e8m0::exponent_of(static_cast<std::uint8_t>(scale_code));
              if constexpr (Mode == RoundingMode::nearest_even && F.flavour != Flavour::fnuz) {
                if (!options.flush_to_zero) {
                  outcome = mx_block<F, Mode, false, true>(in, out, span.count, shared_exponent, 0.0f, options, seed, first_random + span.first,
                                                           span.stride, flags, element_ctx);
                } else {
                  outcome = mx_block<F, Mode>(in, out, span.count, shared_exponent, 0.0f, options, seed, first_random + span.first,
                                              span.stride, flags, element_ctx);
                }
              } else {
                outcome = mx_block<F, Mode>(in, out, span.count, shared_exponent, 0.0f, options, seed, first_random + span.first, span.stride,
                                            flags, element_ctx);
              }
            }
            if (statistics != nullptr) relative.add_block(magnitudes, span.count, amax);
          }
          if (!contiguous)
            for (std::size_t j = 0; j < span.count; ++j) codes[span.first + j * span.stride] = block_codes[j];
          if (outcomes != nullptr) outcomes[block_index] = outcome;
          if (statistics != nullptr) block_walk::add_block(*statistics, scale_code, span.count, nan_block, outcome);
        }
      }
      if (statistics != nullptr) relative.add_to(*statistics);
      ctx.raise(flags.flags());
    }
  });
  if (done) ctx.stochastic_counter = first_random + layout.element_count();
  return done;
}

}  // namespace fpscope::BULK_ISA
