// Sixteen float32 lanes in an AVX-512 register, with the operations elementwise_math.hpp's
// functions are written in, each the one instruction that rounds as the scalar operation does.
// Included only by a unit after FPSCOPE_BEGIN_AVX512_UNIT (elementwise_avx512.cpp).
#pragma once

#include <immintrin.h>

#include <cstddef>

namespace fpscope::element::elementwise_avx512 {

struct Lanes {
  using Lane = Lanes;  // its own memory policy (elementwise_passes.hpp)
  static constexpr std::size_t width = 16;
  __m512 v;
  Lanes(float value) : v(_mm512_set1_ps(value)) {}
  explicit Lanes(__m512 value) : v(value) {}

  static Lanes load(const float* p) { return Lanes(_mm512_loadu_ps(p)); }
  static void store(float* p, Lanes x) { _mm512_storeu_ps(p, x.v); }
  // The first n < 16 lanes (the rest read as zeros, never touched in memory).
  static Lanes load_first(const float* p, std::size_t n) { return Lanes(_mm512_maskz_loadu_ps(first_lanes(n), p)); }
  static void store_first(float* p, Lanes x, std::size_t n) { _mm512_mask_storeu_ps(p, first_lanes(n), x.v); }
  static __mmask16 first_lanes(std::size_t n) { return static_cast<__mmask16>((1u << n) - 1); }
};

inline Lanes operator+(Lanes a, Lanes b) { return Lanes(_mm512_add_ps(a.v, b.v)); }
inline Lanes operator-(Lanes a, Lanes b) { return Lanes(_mm512_sub_ps(a.v, b.v)); }
inline Lanes operator*(Lanes a, Lanes b) { return Lanes(_mm512_mul_ps(a.v, b.v)); }
inline Lanes operator/(Lanes a, Lanes b) { return Lanes(_mm512_div_ps(a.v, b.v)); }
inline Lanes fused_multiply_add(Lanes a, Lanes b, Lanes c) { return Lanes(_mm512_fmadd_ps(a.v, b.v, c.v)); }
inline __mmask16 less(Lanes a, Lanes b) { return _mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ); }
inline __mmask16 is_nan(Lanes x) { return _mm512_cmp_ps_mask(x.v, x.v, _CMP_UNORD_Q); }
inline Lanes select(__mmask16 where, Lanes yes, Lanes no) { return Lanes(_mm512_mask_blend_ps(where, no.v, yes.v)); }
inline bool every_less(Lanes a, Lanes b) { return less(a, b) == 0xFFFF; }
// The scalar rule's clamp (elementwise_math.hpp) as min then max: min returns its second operand
// where the first is a NaN, so a NaN comes out as high there too.
inline Lanes clamped(Lanes x, Lanes low, Lanes high) { return Lanes(_mm512_max_ps(_mm512_min_ps(x.v, high.v), low.v)); }
inline Lanes magnitude(Lanes x) {
  return Lanes(_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x.v), _mm512_set1_epi32(0x7fffffff))));
}
// value's magnitude bits, sign's sign bit (ternary logic 0xca: where the mask has a bit, value's, else sign's).
inline Lanes with_sign_of(Lanes value, Lanes sign) {
  return Lanes(_mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_set1_epi32(0x7fffffff), _mm512_castps_si512(value.v),
                                                             _mm512_castps_si512(sign.v), 0xca)));
}
// p * 2^k for an integral k, rounded once (the scalar rule, elementwise_math.hpp): VSCALEFPS is
// that product, p * 2^floor(k) rounded once to nearest even, subnormal results included (the
// engine never sets MXCSR's flush-to-zero or denormals-are-zero). One instruction where the
// scalar rule's two exact-then-rounding multiplies by built powers of two take eleven.
inline Lanes times_two_to_the(Lanes p, Lanes k) { return Lanes(_mm512_scalef_ps(p.v, k.v)); }

}  // namespace fpscope::element::elementwise_avx512
