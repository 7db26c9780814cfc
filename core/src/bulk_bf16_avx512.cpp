// AVX-512 BF16's VCVTNEPS2BF16 as an accelerator for float32 -> bf16 in round to nearest even
// with default options. For every input that is not a float32 subnormal the instruction gives
// fpscope's bits (Intel SDM pseudo-code: round-to-nearest-even by integer add, NaNs truncated
// and quieted); it raises no flags, so the flags are computed here from the inputs, and blocks
// holding a float32 subnormal (flushed by the instruction) take the branch-free kernel.
// tests/exhaustive/f32_to_bf16_bulk.cpp checks every float32 input, bits and flags.
#include "bulk_bf16_avx512.hpp"

#include "fpscope/core/cast.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace fpscope::bulk_bf16_avx512 {

namespace {

// One block of 16 inputs; false when it holds a float32 subnormal (the caller takes the kernel).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) bool convert_block(const float* in, std::uint16_t* out,
                                                                                   CastFlags& raised) {
  const __m512i bits = _mm512_loadu_si512(in);
  const __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 subnormal = _mm512_cmplt_epu32_mask(magnitude, _mm512_set1_epi32(0x00800000)) &
                              _mm512_test_epi32_mask(magnitude, magnitude);
  if (subnormal != 0) return false;
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), (__m256i)_mm512_cvtneps_pbh(_mm512_castsi512_ps(bits)));
  const __mmask16 finite = _mm512_cmplt_epu32_mask(magnitude, _mm512_set1_epi32(0x7F800000));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7F800000));
  // Inexact: dropped low half nonzero. Overflow: rounds to infinity, from 0x7F7F8000 up.
  const __mmask16 inexact = finite & _mm512_test_epi32_mask(bits, _mm512_set1_epi32(0xFFFF));
  const __mmask16 overflow = finite & _mm512_cmpge_epu32_mask(magnitude, _mm512_set1_epi32(0x7F7F8000));
  const __mmask16 signaling = nan & _mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0x00400000));
  raised.inexact |= inexact;
  raised.overflow |= overflow;
  raised.invalid |= signaling;
  return true;
}

bool has_avx512_bf16() {
  static const bool supported = __builtin_cpu_supports("avx512bf16") != 0 && __builtin_cpu_supports("avx512bw") != 0 &&
                                __builtin_cpu_supports("avx512vl") != 0;
  return supported;
}

}  // namespace

bool applies(Format f, const Context& ctx) {
  return has_avx512_bf16() && f == formats::bf16 && ctx.rounding == RoundingMode::nearest_even && !ctx.flush_to_zero &&
         !ctx.denormals_are_zero && !ctx.saturate && ctx.platform.propagate_nan_payload;
}

std::uint8_t f32_to_bf16(const float* in, std::uint16_t* out, std::size_t n, const Context& ctx) {
  const CastOptions options = CastOptions::from(ctx);
  CastFlags raised;
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    if (convert_block(in + i, out + i, raised)) continue;
    for (std::size_t j = i; j < i + 16; ++j)
      out[j] = static_cast<std::uint16_t>(
          cast_from_f32<formats::bf16, RoundingMode::nearest_even>(float_bits(in[j]), options, 0, raised));
  }
  for (; i < n; ++i)
    out[i] = static_cast<std::uint16_t>(cast_from_f32<formats::bf16, RoundingMode::nearest_even>(float_bits(in[i]), options, 0, raised));
  return raised.flags();
}

}  // namespace fpscope::bulk_bf16_avx512

#else

namespace fpscope::bulk_bf16_avx512 {
bool applies(Format, const Context&) { return false; }
std::uint8_t f32_to_bf16(const float*, std::uint16_t*, std::size_t, const Context&) { return 0; }
}  // namespace fpscope::bulk_bf16_avx512

#endif
