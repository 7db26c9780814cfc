// exp, tanh and erf in float32, written once over a "lane" type: a float (the scalar reference, the
// CUDA kernels) or a vector of floats (the CPU backend's AVX2 and AVX-512 passes,
// gpu/src/cpu/lanes_avx2.hpp and lanes_avx512.hpp). Every step is one IEEE operation rounded to nearest even -- add,
// subtract, multiply, divide, fused multiply-add, compare, select, and exact exponent arithmetic --
// so each function gives the same bits on every instruction set and on the GPU, for every input.
//
// Accuracy against the exact function, over all float32 inputs (tests/exhaustive/elementwise_math.cpp
// holds these bounds): exp within 1 ulp, tanh and erf within 1.5 ulp, subnormal results included.
//
// The polynomials' coefficients are our own fits (Lawson's weighted least squares, approaching the
// minimax polynomial) to the functions computed in 40-digit arithmetic, rounded to float32.
//
// A lane type V provides: V(float) (every lane that value), + - * / between Vs, and the free
// functions fused_multiply_add, less, every_less, select, magnitude, with_sign_of, is_nan,
// clamped and times_two_to_the (below for float).
//
// Where a function has two branches and every lane takes the first, the second is not computed:
// the select would have taken none of it, so the bits are the same, and a vector of small inputs
// (GELU's, early in training) costs one polynomial.
#pragma once

#include <math.h>

#include <cstdint>

#include "fpscope/core/hd.hpp"

namespace fpscope::element {

// ---- float lanes ----
FPSCOPE_HD inline float fused_multiply_add(float a, float b, float c) { return fmaf(a, b, c); }
FPSCOPE_HD inline bool less(float a, float b) { return a < b; }
FPSCOPE_HD inline float select(bool where, float yes, float no) { return where ? yes : no; }
// Whether every lane of a is less than b's (a bool, never a mask: with lane arguments the call
// finds each lane type's own by argument-dependent lookup, as the other functions here do).
FPSCOPE_HD inline bool every_less(float a, float b) { return a < b; }
FPSCOPE_HD inline float magnitude(float x) { return fabsf(x); }
FPSCOPE_HD inline float with_sign_of(float value, float sign) { return copysignf(value, sign); }
FPSCOPE_HD inline bool is_nan(float x) { return x != x; }
// x clamped to [low, high]; a NaN comes out as high (exp_of returns the NaN itself, and computes
// nothing undefined on the way). A vector lane type may clamp with min then max instructions.
FPSCOPE_HD inline float clamped(float x, float low, float high) { return select(less(x, low), low, select(less(x, high), x, high)); }
// p * 2^k for an integral k in [-150, 128], rounded once: p * 2^(k - k/2) is exact for the p's
// here (in [0.5, 2)), and the second power of two rounds it once (to a subnormal, zero or infinity).
FPSCOPE_HD inline float times_two_to_the(float p, float k) {
  const int whole = static_cast<int>(k);
  const int half = whole / 2;
  return p * bits_float(static_cast<std::uint32_t>(whole - half + 127) << 23) * bits_float(static_cast<std::uint32_t>(half + 127) << 23);
}

// c0 + x (c1 + x (c2 + ...)), each step a fused multiply-add.
template <typename V>
FPSCOPE_HD_KERNEL V horner(V, float c0) {
  return V(c0);
}
template <typename V, typename... Rest>
FPSCOPE_HD_KERNEL V horner(V x, float c0, Rest... rest) {
  return fused_multiply_add(horner(x, rest...), x, V(c0));
}

// e^x. x = k ln 2 + r, |r| <= ln 2 / 2, k = x log2(e) rounded to nearest even by adding and
// subtracting 1.5 * 2^23; e^r = 1 + r + r^2 q(r). Inputs are clamped to [-104, 89] first (e^89
// overflows, e^-104 is below half the smallest subnormal), and a NaN is returned as it came.
template <typename V>
FPSCOPE_HD_KERNEL V exp_of(V x) {
  const V within = clamped(x, V(-104.0f), V(89.0f));
  const V shifter(12582912.0f);  // 1.5 * 2^23
  const V k = fused_multiply_add(within, V(1.44269502f), shifter) - shifter;
  V r = fused_multiply_add(k, V(-0.693147182f), within);  // ln 2 rounded to float32
  r = fused_multiply_add(k, V(1.90465421e-9f), r);         // ln 2 less that
  const V q = horner(r, 0.5f, 0.1666666716337204f, 0.04166646674275398f, 0.008333360776305199f, 0.0013933597365394235f,
                     0.00019857795268762857f);
  const V p = fused_multiply_add(r * r, q, r) + V(1.0f);
  return select(is_nan(x), x, times_two_to_the(p, k));
}

// tanh x: |x| < 0.9: x + x^3 P(x^2); beyond, 1 - 2 / (e^2|x| + 1) with x's sign (1 once e^2|x|
// overflows). A NaN is returned as it came.
template <typename V>
FPSCOPE_HD_KERNEL V tanh_of(V x) {
  const V a = magnitude(x);
  const V u = x * x;
  const V near_zero = fused_multiply_add(x * u,
                                         horner(u, -0.3333333432674408f, 0.1333332657814026f, -0.05396651849150658f, 0.0218519140034914f,
                                                -0.00877426378428936f, 0.0033404561690986156f, -0.0010391949908807874f,
                                                0.00018209162226412445f),
                                         x);
  if (every_less(a, V(0.9f))) return near_zero;
  const V far = V(1.0f) - V(2.0f) / (exp_of(a + a) + V(1.0f));
  return select(less(a, V(0.9f)), near_zero, select(is_nan(x), x, with_sign_of(far, x)));
}

// erf x: |x| < 1: x + x P(x^2) (2/sqrt(pi) - 1 its leading term); beyond, 1 - e^Q(|x|) with Q a fit to log erfc on [1, 3.92], |x|
// clamped to 3.92 (where erf rounds to 1), with x's sign. A NaN is returned as it came.
template <typename V>
FPSCOPE_HD_KERNEL V erf_of(V x) {
  const V a = magnitude(x);
  const V near_zero = fused_multiply_add(
      x,
      horner(x * x, 0.12837916612625122f, -0.37612637877464294f, 0.11283782124519348f, -0.0268654003739357f,
             0.005220945458859205f, -0.0008482828852720559f, 0.0001125694761867635f, -9.64151604421204e-06f),
      x);
  if (every_less(a, V(1.0f))) return near_zero;
  const V t = select(less(V(3.92f), a), V(3.92f), a);
  const V log_erfc = horner(t, 0.00024000041594263166f, -1.1297991275787354f, -0.6328573822975159f, -0.10866843163967133f,
                            0.025188641622662544f, -0.0040425267070531845f, 0.0003151896526105702f, 2.7708805646398105e-05f,
                            -1.0708639820222743e-05f, 1.1935259180972935e-06f, -5.0678927721037326e-08f);
  const V far = with_sign_of(V(1.0f) - exp_of(log_erfc), x);
  return select(less(a, V(1.0f)), near_zero, select(is_nan(x), x, far));
}

}  // namespace fpscope::element
