// Bulk loops over the branch-free casts; included once per instruction set by bulk_*.cpp,
// inside a namespace named for that instruction set.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fpscope/core/cast.hpp"
#include "fpscope/core/hd.hpp"

namespace {

using namespace fpscope;

template <Format F, RoundingMode Mode, typename Out>
std::uint32_t narrow_loop(const std::uint32_t* in, Out* out, std::size_t n, CastOptions options,
                          std::uint64_t seed, std::uint64_t counter) {
  CastFlags raised;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t random = Mode == RoundingMode::stochastic ? stochastic_random(seed, counter + i) : 0;
    out[i] = static_cast<Out>(cast_from_f32<F, Mode>(in[i], options, random, raised));
  }
  return raised.flags();
}

template <Format F, RoundingMode Mode>
std::uint32_t round_loop(const std::uint32_t* in, std::uint32_t* out, std::size_t n, CastOptions options,
                         std::uint64_t seed, std::uint64_t counter) {
  CastFlags raised;
  std::uint32_t widen_flags = 0;  // widening a narrowed value raises nothing new
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t random = Mode == RoundingMode::stochastic ? stochastic_random(seed, counter + i) : 0;
    out[i] = cast_to_f32<F>(cast_from_f32<F, Mode>(in[i], options, random, raised), options, widen_flags);
  }
  return raised.flags();
}

template <Format F, typename In>
std::uint32_t widen_loop(const In* in, std::uint32_t* out, std::size_t n, CastOptions options) {
  std::uint32_t flags = 0;
  for (std::size_t i = 0; i < n; ++i) out[i] = cast_to_f32<F>(in[i], options, flags);
  return flags;
}

// Calls body.template operator()<F, Mode>() for the named narrow format f and ctx's mode;
// returns false when f is not one of them.
template <typename Body>
bool with_format_and_mode(Format f, RoundingMode mode, Body&& body) {
  auto with_mode = [&]<Format F>() {
    switch (mode) {
      case RoundingMode::nearest_even: body.template operator()<F, RoundingMode::nearest_even>(); break;
      case RoundingMode::nearest_away: body.template operator()<F, RoundingMode::nearest_away>(); break;
      case RoundingMode::toward_zero: body.template operator()<F, RoundingMode::toward_zero>(); break;
      case RoundingMode::toward_positive: body.template operator()<F, RoundingMode::toward_positive>(); break;
      case RoundingMode::toward_negative: body.template operator()<F, RoundingMode::toward_negative>(); break;
      case RoundingMode::odd: body.template operator()<F, RoundingMode::odd>(); break;
      case RoundingMode::stochastic: body.template operator()<F, RoundingMode::stochastic>(); break;
    }
    return true;
  };
  if (f == formats::fp16) return with_mode.template operator()<formats::fp16>();
  if (f == formats::bf16) return with_mode.template operator()<formats::bf16>();
  if (f == formats::tf32) return with_mode.template operator()<formats::tf32>();
  if (f == formats::e4m3) return with_mode.template operator()<formats::e4m3>();
  if (f == formats::e5m2) return with_mode.template operator()<formats::e5m2>();
  if (f == formats::e2m1) return with_mode.template operator()<formats::e2m1>();
  if (f == formats::e2m3) return with_mode.template operator()<formats::e2m3>();
  if (f == formats::e3m2) return with_mode.template operator()<formats::e3m2>();
  return false;
}

template <typename Body>
bool with_format(Format f, Body&& body) {
  if (f == formats::fp16) return body.template operator()<formats::fp16>(), true;
  if (f == formats::bf16) return body.template operator()<formats::bf16>(), true;
  if (f == formats::tf32) return body.template operator()<formats::tf32>(), true;
  if (f == formats::e4m3) return body.template operator()<formats::e4m3>(), true;
  if (f == formats::e5m2) return body.template operator()<formats::e5m2>(), true;
  if (f == formats::e2m1) return body.template operator()<formats::e2m1>(), true;
  if (f == formats::e2m3) return body.template operator()<formats::e2m3>(), true;
  if (f == formats::e3m2) return body.template operator()<formats::e3m2>(), true;
  return false;
}

}  // namespace

namespace fpscope::BULK_ISA {

bool compiled() { return true; }

bool f32_to_bits16(Format f, const std::uint32_t* in, std::uint16_t* out, std::size_t n, Context& ctx) {
  const CastOptions options = CastOptions::from(ctx);
  return with_format_and_mode(f, ctx.rounding, [&]<Format F, RoundingMode Mode>() {
    ctx.raise(static_cast<std::uint8_t>(narrow_loop<F, Mode>(in, out, n, options, ctx.stochastic_seed, ctx.stochastic_counter)));
  });
}

bool f32_to_bits8(Format f, const std::uint32_t* in, std::uint8_t* out, std::size_t n, Context& ctx) {
  const CastOptions options = CastOptions::from(ctx);
  return with_format_and_mode(f, ctx.rounding, [&]<Format F, RoundingMode Mode>() {
    if constexpr (F.width() <= 8)
      ctx.raise(static_cast<std::uint8_t>(narrow_loop<F, Mode>(in, out, n, options, ctx.stochastic_seed, ctx.stochastic_counter)));
  });
}

bool round_f32(Format f, const std::uint32_t* in, std::uint32_t* out, std::size_t n, Context& ctx) {
  const CastOptions options = CastOptions::from(ctx);
  return with_format_and_mode(f, ctx.rounding, [&]<Format F, RoundingMode Mode>() {
    ctx.raise(static_cast<std::uint8_t>(round_loop<F, Mode>(in, out, n, options, ctx.stochastic_seed, ctx.stochastic_counter)));
  });
}

bool bits16_to_f32(Format f, const std::uint16_t* in, std::uint32_t* out, std::size_t n, Context& ctx) {
  const CastOptions options = CastOptions::from(ctx);
  return with_format(f, [&]<Format F>() { ctx.raise(static_cast<std::uint8_t>(widen_loop<F>(in, out, n, options))); });
}

bool bits8_to_f32(Format f, const std::uint8_t* in, std::uint32_t* out, std::size_t n, Context& ctx) {
  const CastOptions options = CastOptions::from(ctx);
  return with_format(f, [&]<Format F>() {
    if constexpr (F.width() <= 8) ctx.raise(static_cast<std::uint8_t>(widen_loop<F>(in, out, n, options)));
  });
}

// The largest of `top` and the values' magnitude bits (hd.hpp's magnitude_bits): a reduction the
// compiler vectorises for the unit's instruction set (unsigned maxima, which the baseline's SSE2 lacks).
std::uint32_t largest_magnitude_bits(const std::uint32_t* in, std::size_t n, std::uint32_t top) {
  for (std::size_t i = 0; i < n; ++i) top = std::max(top, magnitude_bits(bits_float(in[i])));
  return top;
}

}  // namespace fpscope::BULK_ISA

#include "block_kernels.inl"
