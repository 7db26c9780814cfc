// Comparisons (quiet and signalling) and IEEE 754-2019 minimum/maximum(Number).
#pragma once

#include <cstdint>

#include "fpscope/core/bits.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/core/hd.hpp"
#include "fpscope/core/nan.hpp"

namespace fpscope {

enum class Ordering : std::uint8_t { less, equal, greater, unordered };

// Signalling comparisons raise invalid on any NaN operand, quiet ones only on a signalling NaN.
FPSCOPE_HD inline Ordering compare(Format f, std::uint64_t a, std::uint64_t b, bool signaling,
                                   Context& ctx) {
  if (is_nan(f, a) || is_nan(f, b)) {
    if (signaling || is_signaling_nan(f, a) || is_signaling_nan(f, b)) ctx.raise(flag::invalid);
    return Ordering::unordered;
  }
  a = read_operand(f, a, ctx);
  b = read_operand(f, b, ctx);
  // Sign-magnitude to a signed key: +0 and -0 both map to 0.
  auto key = [&](std::uint64_t bits) {
    const auto magnitude = static_cast<std::int64_t>(magnitude_of(f, bits));
    return sign_of(f, bits) ? -magnitude : magnitude;
  };
  const std::int64_t ka = key(a), kb = key(b);
  return ka < kb ? Ordering::less : ka > kb ? Ordering::greater : Ordering::equal;
}

FPSCOPE_HD inline bool eq(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  return compare(f, a, b, false, ctx) == Ordering::equal;
}
FPSCOPE_HD inline bool eq_signaling(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  return compare(f, a, b, true, ctx) == Ordering::equal;
}
FPSCOPE_HD inline bool lt(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  return compare(f, a, b, true, ctx) == Ordering::less;
}
FPSCOPE_HD inline bool le(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  const Ordering o = compare(f, a, b, true, ctx);
  return o == Ordering::less || o == Ordering::equal;
}
FPSCOPE_HD inline bool lt_quiet(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  return compare(f, a, b, false, ctx) == Ordering::less;
}
FPSCOPE_HD inline bool le_quiet(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  const Ordering o = compare(f, a, b, false, ctx);
  return o == Ordering::less || o == Ordering::equal;
}

namespace detail {
// Total order on non-NaN values where -0 < +0 (IEEE 754-2019 minimum/maximum).
FPSCOPE_HD inline bool below_with_signed_zero(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  if (is_zero(f, a) && is_zero(f, b)) return sign_of(f, a) && !sign_of(f, b);
  return compare(f, a, b, false, ctx) == Ordering::less;
}
}  // namespace detail

// IEEE 754-2019 minimum / maximum: a NaN operand gives a NaN; -0 < +0.
FPSCOPE_HD inline std::uint64_t minimum(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  if (is_nan(f, a) || is_nan(f, b)) return propagate_nan(f, a, b, ctx);
  a = read_operand(f, a, ctx);
  b = read_operand(f, b, ctx);
  return detail::below_with_signed_zero(f, b, a, ctx) ? b : a;
}
FPSCOPE_HD inline std::uint64_t maximum(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  if (is_nan(f, a) || is_nan(f, b)) return propagate_nan(f, a, b, ctx);
  a = read_operand(f, a, ctx);
  b = read_operand(f, b, ctx);
  return detail::below_with_signed_zero(f, a, b, ctx) ? b : a;
}
namespace detail {
// minimumNumber / maximumNumber around minimum / maximum: a number beats a NaN (a signalling
// NaN still raises invalid); two NaNs give a quiet NaN.
template <typename Pick>
FPSCOPE_HD inline std::uint64_t number_variant(Format f, std::uint64_t a, std::uint64_t b, Context& ctx, Pick pick) {
  const bool nan_a = is_nan(f, a), nan_b = is_nan(f, b);
  if (nan_a && nan_b) return propagate_nan(f, a, b, ctx);
  if (nan_a || nan_b) {
    if (is_signaling_nan(f, a) || is_signaling_nan(f, b)) ctx.raise(flag::invalid);
    return read_operand(f, nan_a ? b : a, ctx);
  }
  return pick(f, a, b, ctx);
}
}  // namespace detail

// IEEE 754-2019 minimumNumber / maximumNumber; -0 < +0.
FPSCOPE_HD inline std::uint64_t minimum_number(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  return detail::number_variant(f, a, b, ctx, [](Format g, std::uint64_t x, std::uint64_t y, Context& c) { return minimum(g, x, y, c); });
}
FPSCOPE_HD inline std::uint64_t maximum_number(Format f, std::uint64_t a, std::uint64_t b, Context& ctx) {
  return detail::number_variant(f, a, b, ctx, [](Format g, std::uint64_t x, std::uint64_t y, Context& c) { return maximum(g, x, y, c); });
}

}  // namespace fpscope
