// Arithmetic in small formats (OCP FP8, bf16, custom e6m9 and e3m4fn) against a reference written
// here in binary64 arithmetic: add, sub, mul, div for every E4M3, E5M2 and e3m4fn operand pair
// (with a random addend for fma, and sqrt of every operand), random pairs for the others.
//
// The exact result comes from binary64 hardware arithmetic rounded to odd (toward zero, last bit
// forced to 1 when inexact): with 53 >= m + 3 bits, rounding that to the format in any mode is
// rounding the exact result (Boldo & Melquiond 2008), and binary64's range holds every product
// and quotient of these formats (bf16's included: 2^-266 .. 2^261). The reference then rounds on the
// format's grid with plain double arithmetic, independent of round_pack's integer code.
#include <doctest/doctest.h>

#include <cfenv>
#include <cmath>
#include <cstring>
#include <random>
#include <unordered_map>

#include "fpscope/core/arithmetic.hpp"
#include "fpscope/core/convert.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

using namespace fpscope;

namespace {

struct Expected {
  std::uint64_t bits;
  std::uint8_t flags;
  bool any_nan;  // a NaN result: any NaN matches
};

// |value| rounded to a multiple of `quantum` in `mode` (value >= 0, `negative` is the sign of
// the number it came from).
double round_to_grid(double value, double quantum, RoundingMode mode, bool negative) {
  const double units = value / quantum;  // exact: scaling by a power of two
  const double below = std::floor(units);
  const double fraction = units - below;
  const bool odd = std::fmod(below, 2.0) != 0;
  double k = below;
  switch (mode) {
    case RoundingMode::nearest_even: k += (fraction > 0.5 || (fraction == 0.5 && odd)) ? 1 : 0; break;
    case RoundingMode::nearest_away: k += fraction >= 0.5 ? 1 : 0; break;
    case RoundingMode::toward_zero: break;
    case RoundingMode::toward_positive: k += (fraction > 0 && !negative) ? 1 : 0; break;
    case RoundingMode::toward_negative: k += (fraction > 0 && negative) ? 1 : 0; break;
    case RoundingMode::odd: k += (fraction > 0 && !odd) ? 1 : 0; break;
    case RoundingMode::stochastic: break;
  }
  return k * quantum;
}

class Reference {
 public:
  explicit Reference(Format f) : f_(f) {
    for (std::uint64_t bits = 0; bits <= f.magnitude_mask(); ++bits) {
      if (!is_finite(f, bits)) continue;
      Context exact;
      const double v = to_double(f, bits, exact);  // widening is exact: checked by the sweeps
      encoding_[v] = bits;
      max_ = std::max(max_, v);
    }
  }

  // The correctly rounded value of the real number x (an exact double), IEEE flags included.
  Expected round(double x, RoundingMode mode) const {
    const bool negative = std::signbit(x);
    const std::uint64_t sign = negative ? f_.sign_mask() : 0;
    const double magnitude = std::fabs(x);
    if (magnitude == 0) return {sign, 0, false};
    int exponent = 0;
    std::frexp(magnitude, &exponent);  // magnitude in [2^(exponent-1), 2^exponent)
    const double unbounded = round_to_grid(magnitude, std::ldexp(1.0, exponent - 1 - f_.mantissa_bits), mode, negative);
    const double min_normal = std::ldexp(1.0, f_.emin());
    if (unbounded > max_) {
      const bool to_max = mode == RoundingMode::toward_zero || mode == RoundingMode::odd ||
                          (mode == RoundingMode::toward_positive && negative) ||
                          (mode == RoundingMode::toward_negative && !negative);
      const std::uint64_t bits = to_max ? encoding_.at(max_) : f_.has_infinity() ? f_.infinity_bits() : f_.quiet_nan_bits();
      return {sign | bits, flag::overflow | flag::inexact, false};
    }
    const double rounded = magnitude < min_normal
                               ? round_to_grid(magnitude, std::ldexp(1.0, f_.emin() - f_.mantissa_bits), mode, negative)
                               : unbounded;
    const bool inexact = rounded != magnitude;
    const bool tiny = unbounded < min_normal;  // tininess after rounding
    const std::uint8_t flags = static_cast<std::uint8_t>((inexact ? flag::inexact : 0) | (tiny && inexact ? flag::underflow : 0));
    return {sign | encoding_.at(rounded), flags, false};
  }

  Format format() const { return f_; }

 private:
  Format f_;
  std::unordered_map<double, std::uint64_t> encoding_;
  double max_ = 0;
};

std::uint8_t mxcsr_flags() {
  const unsigned csr = _mm_getcsr();
  return static_cast<std::uint8_t>(((csr & 0x01) ? flag::invalid : 0) | ((csr & 0x04) ? flag::infinite : 0) |
                                   ((csr & 0x20) ? flag::inexact : 0));
}

// The binary64 operation with rounding direction rc (MXCSR RC: 1 down, 3 toward zero), rounded
// to odd when toward zero. Operands are exact binary64 values.
// op 4 is sqrt(x); op 5 adds y to an exact product held in x (fused multiply-add).
double double_op(int op, double x, double y, unsigned rc, std::uint8_t& flags) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr((saved & ~0x603Fu) | (rc << 13));
  volatile double a = x, b = y;
  double r = 0;
  switch (op) {
    case 0: r = a + b; break;
    case 1: r = a - b; break;
    case 2: r = a * b; break;
    case 3: r = a / b; break;
    case 4: r = std::sqrt(static_cast<double>(a)); break;
    case 5: r = a + b; break;
  }
  volatile double result = r;
  flags = mxcsr_flags();
  _mm_setcsr(saved & ~0x3Fu);
  double value = result;
  if (rc == 3 && (flags & flag::inexact) != 0 && std::isfinite(value)) {
    std::uint64_t bits;
    std::memcpy(&bits, &value, 8);
    bits |= 1;
    std::memcpy(&value, &bits, 8);
  }
  return value;
}

Expected expected_result(const Reference& reference, int op, std::uint64_t a, std::uint64_t b, std::uint64_t c,
                         RoundingMode mode) {
  const Format f = reference.format();
  Context widen;
  double x = to_double(f, a, widen), y = to_double(f, b, widen);
  std::uint8_t op_flags = 0;
  bool signalling = is_signaling_nan(f, a) || (op != 4 && is_signaling_nan(f, b));
  if (op == 5) {  // a * b is exact in binary64 (at most 2 x 24 significant bits); then + c
    std::uint8_t product_flags = 0;
    x = double_op(2, x, y, 3, product_flags);
    op_flags |= product_flags & flag::invalid;
    y = to_double(f, c, widen);
    signalling = signalling || is_signaling_nan(f, c);
  }
  std::uint8_t last_flags = 0;
  const double r = double_op(op == 5 ? 5 : op, x, y, 3, last_flags);
  op_flags |= last_flags;
  const std::uint8_t invalid = (op_flags & flag::invalid) | (signalling ? flag::invalid : 0);
  if (std::isnan(r)) return {0, invalid, true};
  if (std::isinf(r)) {  // from an infinite operand or a division by zero
    const std::uint64_t sign = std::signbit(r) ? f.sign_mask() : 0;
    return {sign | (f.has_infinity() ? f.infinity_bits() : f.quiet_nan_bits()), static_cast<std::uint8_t>(op_flags & flag::infinite), false};
  }
  if (r == 0 && (op <= 1 || op == 5)) {
    // An exact zero: its sign follows IEEE 754-2019 6.3, which the FPU knows in each direction.
    std::uint8_t ignored = 0;
    const double zero = double_op(op == 5 ? 5 : op, x, y, mode == RoundingMode::toward_negative ? 1 : 3, ignored);
    return {std::signbit(zero) ? f.sign_mask() : 0, 0, false};
  }
  Expected e = reference.round(r, mode);
  e.flags |= op_flags & flag::infinite;
  return e;
}

void check_pairs(Format f, bool exhaustive, int random_pairs) {
  const Reference reference(f);
  std::mt19937_64 rng(31);
  const std::uint64_t count = std::uint64_t{1} << f.width();
  const std::uint64_t pairs = exhaustive ? count * count : static_cast<std::uint64_t>(random_pairs);
  int mismatches = 0;
  for (std::uint64_t i = 0; i < pairs; ++i) {
    const std::uint64_t a = exhaustive ? i / count : rng() & f.all_bits_mask();
    const std::uint64_t b = exhaustive ? i % count : rng() & f.all_bits_mask();
    const std::uint64_t c = rng() & f.all_bits_mask();
    for (int op = 0; op < 6; ++op) {
      if (op == 4 && exhaustive && b != 0) continue;  // sqrt: once per operand
      for (int mode = 0; mode < 6; ++mode) {
        const auto rounding = static_cast<RoundingMode>(mode);
        const Expected expected = expected_result(reference, op, a, b, c, rounding);
        Context ctx;
        ctx.rounding = rounding;
        std::uint64_t ours = 0;
        switch (op) {
          case 0: ours = add(f, a, b, ctx); break;
          case 1: ours = sub(f, a, b, ctx); break;
          case 2: ours = mul(f, a, b, ctx); break;
          case 3: ours = div(f, a, b, ctx); break;
          case 4: ours = fpscope::sqrt(f, a, ctx); break;
          case 5: ours = fma(f, a, b, c, ctx); break;
        }
        const bool same_value = expected.any_nan ? is_nan(f, ours) : ours == expected.bits;
        if ((!same_value || ctx.flags != expected.flags) && ++mismatches <= 10)
          MESSAGE("e" << f.exponent_bits << "m" << f.mantissa_bits << " op " << op << " mode " << mode << " a=" << a << " b=" << b << " c=" << c
                      << ": ours " << ours << "/" << int{ctx.flags} << " reference " << expected.bits << "/" << int{expected.flags});
      }
    }
  }
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("OCP E4M3 arithmetic: every operand pair, add sub mul div sqrt fma, six modes") { check_pairs(formats::e4m3, true, 0); }
TEST_CASE("OCP E5M2 arithmetic: every operand pair, add sub mul div sqrt fma, six modes") { check_pairs(formats::e5m2, true, 0); }
TEST_CASE("bfloat16 arithmetic: random operand pairs, add sub mul div sqrt fma, six modes") { check_pairs(formats::bf16, false, 60000); }
TEST_CASE("custom e6m9 arithmetic: random operand pairs, add sub mul div sqrt fma, six modes") {
  check_pairs(Format{6, 9, Flavour::ieee}, false, 60000);
}
TEST_CASE("custom e3m4fn arithmetic: every operand pair, add sub mul div sqrt fma, six modes") {
  check_pairs(Format{3, 4, Flavour::ocp_fn}, true, 0);
}

#endif
