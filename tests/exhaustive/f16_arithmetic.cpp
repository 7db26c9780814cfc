// Exhaustive: all 2^32 pairs of fp16 operands through add, sub, mul and div in six modes (and
// every operand through sqrt), bits and flags, against an independent reference built from
// the x86 FPU.
//
// Reference: the operation in float32 hardware arithmetic rounded toward zero, with the last
// bit forced to 1 when inexact -- round to odd at 24 bits. Rounding to odd at p >= q + 2 bits
// and then rounding to q bits in any mode equals rounding the exact result to q bits in that
// mode (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms
// using rounding to odd", IEEE TC 2008), so there is no double-rounding error: 24 >= 11 + 2.
// No float32 operation on fp16 values can overflow or underflow (products and quotients stay
// within 2^-48 .. 2^40), so the float32 step only raises inexact, divide by zero and invalid.
// The float32 -> fp16 step is F16C's VCVTPS2PH for the four IEEE modes (flags from MXCSR);
// ties-away is decided here from the round-toward-zero neighbour and the midpoint in binary64;
// round to odd is the round-toward-zero result with its last bit set when inexact.
#include <cmath>
#include <cstdio>
#include <atomic>
#include <cstring>

#include "fpscope/core/arithmetic.hpp"
#include "fpscope/core/bits.hpp"
#include "sweep.hpp"

using namespace fpscope;

namespace {

float widened[65536];
bool signalling[65536];

constexpr RoundingMode modes[] = {RoundingMode::nearest_even, RoundingMode::nearest_away, RoundingMode::toward_zero,
                                  RoundingMode::toward_positive, RoundingMode::toward_negative, RoundingMode::odd};

struct Expected {
  std::uint16_t bits[6];
  std::uint8_t flags[6];
};

std::uint16_t f16c(float value, int mode_index, std::uint8_t& flags) {
  __m128i h;
  __m128 v = _mm_set_ss(value);
  sweep::clear_mxcsr_flags();
  sweep::pin(v);
  switch (mode_index) {
    case 0: h = _mm_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT); break;
    case 2: h = _mm_cvtps_ph(v, _MM_FROUND_TO_ZERO); break;
    case 3: h = _mm_cvtps_ph(v, _MM_FROUND_TO_POS_INF); break;
    default: h = _mm_cvtps_ph(v, _MM_FROUND_TO_NEG_INF); break;
  }
  sweep::pin(h);
  flags = sweep::mxcsr_flags();
  return static_cast<std::uint16_t>(_mm_extract_epi16(h, 0));
}

double f16_value(std::uint16_t magnitude) {  // magnitude bits only; 0x7C00 counts as 2^16
  return magnitude >= 0x7C00 ? 65536.0 : static_cast<double>(widened[magnitude]);
}

// Rounds the odd-rounded float32 `r` into fp16 in all six modes; `invalid` and `inexact_op`
// come from the float32 step.
void round_all_modes(float r, std::uint8_t op_flags, Expected& out) {
  std::uint8_t rz_flags = 0;
  const std::uint16_t rz = f16c(r, 2, rz_flags);
  for (const int m : {0, 2, 3, 4}) {
    std::uint8_t flags = 0;
    out.bits[m] = m == 2 ? rz : f16c(r, m, flags);
    out.flags[m] = static_cast<std::uint8_t>((m == 2 ? rz_flags : flags) | op_flags);
  }
  const bool nan = std::isnan(r);
  const bool inexact = (rz_flags & flag::inexact) != 0;
  // Round to odd: the truncation with its last bit set if anything was dropped.
  out.bits[5] = static_cast<std::uint16_t>(rz | (inexact && !nan ? 1 : 0));
  out.flags[5] = static_cast<std::uint8_t>(rz_flags | op_flags);
  // Ties away: compare with the midpoint above the truncation.
  if (nan || !inexact) {
    out.bits[1] = rz;
    out.flags[1] = static_cast<std::uint8_t>(rz_flags | op_flags);
    return;
  }
  const std::uint16_t sign = rz & 0x8000, low = rz & 0x7FFF;
  const double magnitude = std::fabs(static_cast<double>(r));
  const double midpoint = (f16_value(low) + f16_value(static_cast<std::uint16_t>(low + 1))) / 2;
  const bool away = magnitude >= midpoint;
  const std::uint16_t rounded = static_cast<std::uint16_t>(low + (away ? 1 : 0));
  std::uint8_t flags = flag::inexact;
  if (rounded >= 0x7C00) flags |= flag::overflow;
  if (magnitude < std::ldexp(1.0, -14) - std::ldexp(1.0, -26)) flags |= flag::underflow;  // tiny after rounding
  out.bits[1] = static_cast<std::uint16_t>(sign | rounded);
  out.flags[1] = static_cast<std::uint8_t>(flags | op_flags);
}

// float32 op in the rounding direction `rc` (MXCSR RC field: 0 nearest, 1 down, 2 up, 3 zero),
// rounded to odd when rc is toward zero, plus the flags it raised (signalling operands count
// as invalid).
float float_op(int op, std::uint16_t a, std::uint16_t b, unsigned rc, std::uint8_t& op_flags) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr((saved & ~0x603Fu) | (rc << 13));  // rounding direction, flags clear
  volatile float x = widened[a], y = widened[b];
  float r = 0;
  switch (op) {
    case 0: r = x + y; break;
    case 1: r = x - y; break;
    case 2: r = x * y; break;
    case 3: r = x / y; break;
    case 4: r = std::sqrt(static_cast<float>(x)); break;
  }
  volatile float result = r;
  op_flags = sweep::mxcsr_flags();
  _mm_setcsr(saved & ~0x3Fu);
  float value = result;
  if (rc == 3 && (op_flags & flag::inexact) != 0) {
    std::uint32_t bits;
    std::memcpy(&bits, &value, 4);
    bits |= 1;
    std::memcpy(&value, &bits, 4);
  }
  op_flags &= flag::invalid | flag::infinite | flag::inexact;
  if (signalling[a] || (op != 4 && signalling[b])) op_flags |= flag::invalid;
  return value;
}

std::uint64_t ours(int op, std::uint16_t a, std::uint16_t b, int m, std::uint8_t& flags) {
  Context ctx;
  ctx.rounding = modes[m];
  std::uint64_t r = 0;
  switch (op) {
    case 0: r = add(formats::fp16, a, b, ctx); break;
    case 1: r = sub(formats::fp16, a, b, ctx); break;
    case 2: r = mul(formats::fp16, a, b, ctx); break;
    case 3: r = div(formats::fp16, a, b, ctx); break;
    case 4: r = fpscope::sqrt(formats::fp16, a, ctx); break;
  }
  flags = ctx.flags;
  return r;
}

const char* op_names[] = {"add", "sub", "mul", "div", "sqrt"};

std::uint64_t check(int op, std::uint16_t a, std::uint16_t b) {
  std::uint8_t op_flags = 0;
  const float r = float_op(op, a, b, 3, op_flags);
  Expected expected{};
  round_all_modes(r, op_flags, expected);
  // An exact zero sum of opposite-signed operands is -0 when rounding down and +0 otherwise
  // (IEEE 754-2019 6.3), which the toward-zero step cannot know: ask the FPU rounding down.
  if (r == 0.0f && op <= 1) {
    std::uint8_t down_flags = 0;
    const float down = float_op(op, a, b, 1, down_flags);
    expected.bits[4] = std::signbit(down) ? 0x8000 : 0x0000;
  }
  std::uint64_t mismatches = 0;
  for (int m = 0; m < 6; ++m) {
    std::uint8_t flags = 0;
    const std::uint64_t got = ours(op, a, b, m, flags);
    if (got != expected.bits[m] || flags != expected.flags[m]) {
      static std::atomic<int> printed{0};
      if (++mismatches, printed++ < 20) {
        std::lock_guard lock(sweep::print_lock());
        std::printf("MISMATCH f16_%s mode %d %04X %04X: ours %04llX/%02X reference %04X/%02X\n", op_names[op], m, a, b,
                    static_cast<unsigned long long>(got), flags, expected.bits[m], expected.flags[m]);
      }
    }
  }
  return mismatches;
}

}  // namespace

int main() {
  if (!__builtin_cpu_supports("f16c")) {
    std::printf("this processor has no F16C: the sweep needs it for its reference\n");
    return 1;
  }
  for (std::uint32_t h = 0; h < 65536; ++h) {
    widened[h] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h))));
    signalling[h] = is_signaling_nan(formats::fp16, h);
  }
  std::uint64_t total = 0, bad = 0;
  {
    std::uint64_t mismatches = 0;
    for (std::uint32_t a = 0; a < 65536; ++a) mismatches += check(4, static_cast<std::uint16_t>(a), 0);
    std::printf("f16_sqrt: 65536 operands x 6 modes, %llu mismatches\n", static_cast<unsigned long long>(mismatches));
    total += 65536 * 6;
    bad += mismatches;
  }
  for (int op = 0; op < 4; ++op) {
    const sweep::Result r = sweep::run(std::uint64_t{1} << 32, [op](std::uint64_t first, std::uint64_t last) {
      std::uint64_t mismatches = 0;
      for (std::uint64_t i = first; i < last; ++i)
        mismatches += check(op, static_cast<std::uint16_t>(i >> 16), static_cast<std::uint16_t>(i & 0xFFFF));
      return mismatches;
    });
    std::printf("f16_%s: 4294967296 pairs x 6 modes, %llu mismatches (%.1f s)\n", op_names[op],
                static_cast<unsigned long long>(r.mismatches), r.seconds);
    std::fflush(stdout);
    total += (std::uint64_t{1} << 32) * 6;
    bad += r.mismatches;
  }
  std::printf("%llu passed, %llu failed\n", static_cast<unsigned long long>(total - bad), static_cast<unsigned long long>(bad));
  return bad == 0 ? 0 : 1;
}
