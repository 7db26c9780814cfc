// AVX-512 BF16's VCVTNEPS2BF16 as an accelerator for float32 -> bf16 in round to nearest even
// with default options, to bf16 bits or rounded in float32 (round_f32). For every input that is not a float32 subnormal the instruction gives
// fpscope's bits (Intel SDM pseudo-code: round-to-nearest-even by integer add, NaNs truncated
// and quieted); it raises no flags, so the flags are computed here from the inputs, and blocks
// holding a float32 subnormal (flushed by the instruction) take the branch-free kernel.
// tests/exhaustive/f32_to_bf16_bulk.cpp checks every float32 input, bits and flags.
#include "bulk_bf16_avx512.hpp"

#include <algorithm>

#include "fpscope/core/cast.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

// GCC 12 warns that the intrinsics' own undefined-vector idiom "may be used uninitialized".
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace fpscope::bulk_bf16_avx512 {

namespace {

#define FPSCOPE_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// Flags of the blocks so far, as vector words ORed together (and the largest finite magnitude):
// turned into flag bits once at the end.
struct BlockFlags {
  __m512i dropped;     // low halves of finite inputs: inexact if nonzero
  __m512i max_finite;  // overflow if >= 0x7F7F8000 (rounds to infinity)
  __m512i signaling;   // quiet bit clear in a NaN
};

// The bf16 results as 16-bit patterns, or widened back to float32 (a bf16 value's float32 is its
// bits shifted up by 16, NaNs included).
FPSCOPE_AVX512_BF16 inline void store(std::uint16_t* out, __m256i bf16) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), bf16); }
FPSCOPE_AVX512_BF16 inline void store(float* out, __m256i bf16) {
  _mm512_storeu_si512(out, _mm512_slli_epi32(_mm512_cvtepu16_epi32(bf16), 16));
}
inline void store_one(std::uint16_t* out, std::uint64_t bf16) { *out = static_cast<std::uint16_t>(bf16); }
inline void store_one(float* out, std::uint64_t bf16) { *out = bits_float(static_cast<std::uint32_t>(bf16) << 16); }
// Both at once: the results widened to float32 and their 16-bit patterns (round_f32_bf16_with_bits).
struct Both {
  float* values;
  std::uint16_t* bits;
  Both operator+(std::size_t i) const { return {values + i, bits + i}; }
};
FPSCOPE_AVX512_BF16 inline void store(Both out, __m256i bf16) {
  store(out.values, bf16);
  store(out.bits, bf16);
}
inline void store_one(Both out, std::uint64_t bf16) {
  store_one(out.values, bf16);
  store_one(out.bits, bf16);
}

// 16 inputs with no float32 subnormal, overflow, infinity or NaN: rounded into `out`, their low
// halves or-ed into `dropped` (inexact if nonzero).
template <typename Out>
FPSCOPE_AVX512_BF16 inline void round_plain_block(__m512i bits, Out out, __m512i& dropped) {
  store(out, (__m256i)_mm512_cvtneps_pbh(_mm512_castsi512_ps(bits)));
  dropped = _mm512_ternarylogic_epi32(dropped, bits, _mm512_set1_epi32(0xFFFF), 0xF8);  // dropped | (bits & 0xFFFF)
}

// One block of 16 inputs; false when it holds a float32 subnormal (the caller takes the kernel).
// `out` may be `in` (float32 out): the block is read before it is written. A block of values
// below float32's largest binade's top (0x7F7F8000, which rounds to infinity) -- all but a
// handful of training tensors' blocks -- has no infinity, NaN or overflow to look for: only its
// dropped low halves are kept (inexact). The others are looked at lane by lane in vector masks.
template <typename Out>
FPSCOPE_AVX512_BF16 inline bool convert_block(const float* in, Out out, BlockFlags& flags) {
  const __m512i bits = _mm512_loadu_si512(in);
  const __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF));
  // 1 <= magnitude <= 0x7FFFFF, in one unsigned comparison.
  const __mmask16 subnormal = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(magnitude, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7FFFFF));
  const __mmask16 large = _mm512_cmpge_epu32_mask(magnitude, _mm512_set1_epi32(0x7F7F8000));  // overflows, or infinite, or NaN
  if ((subnormal | large) == 0) [[likely]] {
    round_plain_block(bits, out, flags.dropped);
    return true;
  }
  if (subnormal != 0) return false;
  store(out, (__m256i)_mm512_cvtneps_pbh(_mm512_castsi512_ps(bits)));
  const __mmask16 finite = _mm512_cmplt_epu32_mask(magnitude, _mm512_set1_epi32(0x7F800000));
  flags.dropped = _mm512_mask_or_epi32(flags.dropped, finite, flags.dropped, _mm512_and_si512(bits, _mm512_set1_epi32(0xFFFF)));
  flags.max_finite = _mm512_mask_max_epu32(flags.max_finite, finite, flags.max_finite, magnitude);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7F800000));
  flags.signaling = _mm512_mask_or_epi32(flags.signaling, nan, flags.signaling, _mm512_andnot_si512(bits, _mm512_set1_epi32(0x00400000)));
  return true;
}

bool has_avx512_bf16() {
  static const bool supported = __builtin_cpu_supports("avx512bf16") != 0 && __builtin_cpu_supports("avx512bw") != 0 &&
                                __builtin_cpu_supports("avx512vl") != 0;
  return supported;
}

// The largest magnitude bits of the inputs, kept where larger (`largest`, where given): the
// lanes' running maximum, and its reduction with the scalar tail's.
struct Watch {
  std::uint32_t* largest;
  __m512i lanes;
  std::uint32_t tail = 0;
  FPSCOPE_AVX512_BF16 void see(const float* in) {
    if (largest != nullptr) lanes = _mm512_max_epu32(lanes, _mm512_and_si512(_mm512_loadu_si512(in), _mm512_set1_epi32(0x7FFFFFFF)));
  }
  void see_one(float value) {
    if (largest != nullptr) tail = std::max(tail, float_bits(value) & 0x7FFFFFFFu);
  }
  FPSCOPE_AVX512_BF16 void finish() {
    if (largest != nullptr) *largest = std::max({*largest, tail, static_cast<std::uint32_t>(_mm512_reduce_max_epu32(lanes))});
  }
};

// The whole loop under the AVX-512 target, so that convert_block inlines into it.
// `Out`: float* (widened), std::uint16_t* (patterns) or Both.
template <typename Out>
FPSCOPE_AVX512_BF16 std::uint8_t convert_all(const float* in, Out out, std::size_t n, const CastOptions& options,
                                             std::uint32_t* largest = nullptr) {
  CastFlags raised;
  BlockFlags blocks{_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
  Watch watch{largest, _mm512_setzero_si512()};
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    watch.see(in + i);  // before the block is written: `out` may be `in`
    if (convert_block(in + i, out + i, blocks)) continue;
    for (std::size_t j = i; j < i + 16; ++j)
      store_one(out + j, cast_from_f32<formats::bf16, RoundingMode::nearest_even>(float_bits(in[j]), options, 0, raised));
  }
  for (; i < n; ++i) {
    watch.see_one(in[i]);
    store_one(out + i, cast_from_f32<formats::bf16, RoundingMode::nearest_even>(float_bits(in[i]), options, 0, raised));
  }
  watch.finish();
  raised.inexact |= _mm512_test_epi32_mask(blocks.dropped, blocks.dropped);
  const __mmask16 overflow = _mm512_cmpge_epu32_mask(blocks.max_finite, _mm512_set1_epi32(0x7F7F8000));
  raised.overflow |= overflow;
  raised.inexact |= overflow;
  raised.invalid |= _mm512_test_epi32_mask(blocks.signaling, blocks.signaling);
  return raised.flags();
}

// round_f32_bf16_in_normal_range's loop: the inputs' promise leaves only the inexact flag to find.
// `Out`: float* or Both.
template <typename Out>
FPSCOPE_AVX512_BF16 std::uint8_t round_all_in_normal_range(const float* in, Out out, std::size_t n, std::uint32_t* largest = nullptr) {
  __m512i dropped = _mm512_setzero_si512();
  Watch watch{largest, _mm512_setzero_si512()};
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    watch.see(in + i);
    round_plain_block(_mm512_loadu_si512(in + i), out + i, dropped);
  }
  for (std::size_t j = i; j < n; ++j) watch.see_one(in[j]);
  watch.finish();
  if (i < n) {  // lanes past the end read 0 (exact), rounded into a block of our own
    float last[16];
    round_plain_block(_mm512_maskz_loadu_epi32(static_cast<__mmask16>((1u << (n - i)) - 1), in + i), last, dropped);
    for (std::size_t j = i; j < n; ++j) store_one(out + j, float_bits(last[j - i]) >> 16);
  }
  CastFlags raised;
  raised.inexact = _mm512_test_epi32_mask(dropped, dropped) != 0;
  return raised.flags();
}

}  // namespace

bool applies(Format f, const Context& ctx) {
  return has_avx512_bf16() && f == formats::bf16 && ctx.rounding == RoundingMode::nearest_even && !ctx.flush_to_zero &&
         !ctx.denormals_are_zero && !ctx.saturate && ctx.platform.propagate_nan_payload;
}

std::uint8_t f32_to_bf16(const float* in, std::uint16_t* out, std::size_t n, const Context& ctx) {
  return convert_all(in, out, n, CastOptions::from(ctx));
}

std::uint8_t round_f32_bf16(const float* in, float* out, std::size_t n, const Context& ctx, std::uint32_t* largest) {
  return convert_all(in, out, n, CastOptions::from(ctx), largest);
}

std::uint8_t round_f32_bf16_in_normal_range(const float* in, float* out, std::size_t n) { return round_all_in_normal_range(in, out, n); }

std::uint8_t round_f32_bf16_with_bits(const float* in, float* out, std::uint16_t* bits, std::size_t n, const Context& ctx,
                                      std::uint32_t* largest) {
  return convert_all(in, Both{out, bits}, n, CastOptions::from(ctx), largest);
}

std::uint8_t round_f32_bf16_in_normal_range_with_bits(const float* in, float* out, std::uint16_t* bits, std::size_t n, std::uint32_t* largest) {
  return round_all_in_normal_range(in, Both{out, bits}, n, largest);
}

}  // namespace fpscope::bulk_bf16_avx512

#else

namespace fpscope::bulk_bf16_avx512 {
bool applies(Format, const Context&) { return false; }
std::uint8_t f32_to_bf16(const float*, std::uint16_t*, std::size_t, const Context&) { return 0; }
std::uint8_t round_f32_bf16(const float*, float*, std::size_t, const Context&, std::uint32_t*) { return 0; }
std::uint8_t round_f32_bf16_in_normal_range(const float*, float*, std::size_t) { return 0; }
std::uint8_t round_f32_bf16_with_bits(const float*, float*, std::uint16_t*, std::size_t, const Context&, std::uint32_t*) { return 0; }
std::uint8_t round_f32_bf16_in_normal_range_with_bits(const float*, float*, std::uint16_t*, std::size_t, std::uint32_t*) { return 0; }
}  // namespace fpscope::bulk_bf16_avx512

#endif
