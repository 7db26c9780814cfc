// NaN results: the platform's default NaN, quieting, and which operand's NaN an operation returns.
// A finite format (no NaN) takes a zero of the NaN's sign wherever a NaN would go.
#pragma once

#include <cstdint>

#include "fpscope/core/bits.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/core/hd.hpp"

namespace fpscope {

// The NaN an invalid operation produces (x86: sign set, fp16 0xFE00; RISC-V: 0x7E00).
FPSCOPE_HD inline std::uint64_t default_nan(Format f, const Context& ctx) {
  return signed_zero(f, ctx.platform.default_nan_negative) | f.quiet_nan_bits();
}

// A NaN of f made quiet (IEEE: the quiet bit set; OCP FN and FNUZ have a single NaN).
FPSCOPE_HD inline std::uint64_t quieted(Format f, std::uint64_t nan_bits) {
  return f.flavour == Flavour::ieee ? nan_bits | f.quiet_bit() : nan_bits;
}

// The NaN result of an operation with at least one NaN operand (a or b; c for fused
// multiply-add): invalid if any is signalling; x86 SSE returns the first NaN operand, quieted;
// platforms that do not propagate payloads return the default NaN.
FPSCOPE_HD inline std::uint64_t propagate_nan(Format f, std::uint64_t a, std::uint64_t b,
                                              Context& ctx) {
  if (is_signaling_nan(f, a) || is_signaling_nan(f, b)) ctx.raise(flag::invalid);
  if (!ctx.platform.propagate_nan_payload) return default_nan(f, ctx);
  return quieted(f, is_nan(f, a) ? a : b);
}

// A NaN of `from` carried into `to`: sign kept, payload aligned at the top of the mantissa and
// truncated or zero-extended, quiet bit set (SoftFloat's x86 "common NaN" path). The single
// NaN of an OCP FN or FNUZ format carries no payload; a finite format has no NaN: a zero of the
// NaN's sign, and invalid (as for a conversion of NaN to an integer).
FPSCOPE_HD inline std::uint64_t convert_nan(Format from, Format to,
                                            std::uint64_t bits, Context& ctx) {
  if (is_signaling_nan(from, bits) || !to.has_nan()) ctx.raise(flag::invalid);
  if (!ctx.platform.propagate_nan_payload) return default_nan(to, ctx);
  const bool sign = sign_of(from, bits);
  if (to.flavour != Flavour::ieee) return signed_zero(to, sign) | to.quiet_nan_bits();
  const std::uint64_t payload = from.flavour == Flavour::ieee ? mantissa_of(from, bits) : 0;  // FN NaN: no payload
  const int dist = to.mantissa_bits - from.mantissa_bits;
  const std::uint64_t aligned = dist >= 0 ? payload << dist : payload >> (-dist);
  return signed_zero(to, sign) | to.exponent_mask() | to.quiet_bit() | (aligned & to.mantissa_mask());
}

}  // namespace fpscope
