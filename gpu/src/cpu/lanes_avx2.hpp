// Eight float32 lanes in an AVX2 register, with the operations elementwise_math.hpp's functions
// are written in, each the one instruction that rounds as the scalar operation does (FMA3's fused
// multiply-add). Included only by a unit after FPSCOPE_BEGIN_AVX2_UNIT (elementwise_avx2.cpp).
#pragma once

#include <immintrin.h>

#include <cstddef>

namespace fpscope::element::elementwise_avx2 {

struct Mask {
  __m256 bits;  // all ones in a lane where true
};

struct Lanes {
  using Lane = Lanes;  // its own memory policy (elementwise_passes.hpp)
  static constexpr std::size_t width = 8;
  __m256 v;
  Lanes(float value) : v(_mm256_set1_ps(value)) {}
  explicit Lanes(__m256 value) : v(value) {}

  static Lanes load(const float* p) { return Lanes(_mm256_loadu_ps(p)); }
  static void store(float* p, Lanes x) { _mm256_storeu_ps(p, x.v); }
  // The first n < 8 lanes (the rest read as zeros, never touched in memory).
  static Lanes load_first(const float* p, std::size_t n) { return Lanes(_mm256_maskload_ps(p, first_lanes(n))); }
  static void store_first(float* p, Lanes x, std::size_t n) { _mm256_maskstore_ps(p, first_lanes(n), x.v); }
  static __m256i first_lanes(std::size_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
};

inline Lanes operator+(Lanes a, Lanes b) { return Lanes(_mm256_add_ps(a.v, b.v)); }
inline Lanes operator-(Lanes a, Lanes b) { return Lanes(_mm256_sub_ps(a.v, b.v)); }
inline Lanes operator*(Lanes a, Lanes b) { return Lanes(_mm256_mul_ps(a.v, b.v)); }
inline Lanes operator/(Lanes a, Lanes b) { return Lanes(_mm256_div_ps(a.v, b.v)); }
inline Lanes fused_multiply_add(Lanes a, Lanes b, Lanes c) { return Lanes(_mm256_fmadd_ps(a.v, b.v, c.v)); }
inline Mask less(Lanes a, Lanes b) { return Mask{_mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ)}; }
inline Mask is_nan(Lanes x) { return Mask{_mm256_cmp_ps(x.v, x.v, _CMP_UNORD_Q)}; }
inline Lanes select(Mask where, Lanes yes, Lanes no) { return Lanes(_mm256_blendv_ps(no.v, yes.v, where.bits)); }
inline bool every_less(Lanes a, Lanes b) { return _mm256_movemask_ps(less(a, b).bits) == 0xFF; }
// The scalar rule's clamp (elementwise_math.hpp) as min then max: min returns its second operand
// where the first is a NaN, so a NaN comes out as high there too.
inline Lanes clamped(Lanes x, Lanes low, Lanes high) { return Lanes(_mm256_max_ps(_mm256_min_ps(x.v, high.v), low.v)); }
inline Lanes magnitude(Lanes x) { return Lanes(_mm256_and_ps(x.v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)))); }
inline Lanes with_sign_of(Lanes value, Lanes sign) {
  const __m256 sign_bit = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
  return Lanes(_mm256_or_ps(_mm256_andnot_ps(sign_bit, value.v), _mm256_and_ps(sign_bit, sign.v)));
}
// The scalar rule (elementwise_math.hpp): k truncated to an integer (exact), halved toward zero.
inline Lanes times_two_to_the(Lanes p, Lanes k) {
  const __m256i whole = _mm256_cvttps_epi32(k.v);
  const __m256i half = _mm256_srai_epi32(_mm256_add_epi32(whole, _mm256_srli_epi32(whole, 31)), 1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 first = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(whole, half), bias), 23));
  const __m256 second = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
  return Lanes(_mm256_mul_ps(_mm256_mul_ps(p.v, first), second));
}

}  // namespace fpscope::element::elementwise_avx2
