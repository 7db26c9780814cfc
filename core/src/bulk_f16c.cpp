// The x86 F16C instructions as an accelerator for fp16 casts, used only where they give the
// same bits and flags as fpscope: the four IEEE rounding modes, no flush-to-zero, no
// denormals-are-zero, no saturation, NaN payloads propagated (the x86 convention), tininess
// after rounding. The exhaustive sweep tests/exhaustive/f32_to_f16_vs_f16c.cpp compares every
// float32 input's bits and flags; f16_widen.cpp every fp16 input.
#include "bulk_f16c.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>

#include "fpscope/core/hd.hpp"

namespace fpscope::bulk_f16c {

namespace {

constexpr unsigned mxcsr_flag_bits = 0x3F;
constexpr unsigned mxcsr_masks_only = 0x1F80;  // every exception masked, round to nearest, no FTZ/DAZ

std::uint8_t flags_from_mxcsr(unsigned csr) {
  std::uint8_t flags = 0;
  if (csr & 0x01) flags |= flag::invalid;
  if (csr & 0x04) flags |= flag::infinite;
  if (csr & 0x08) flags |= flag::overflow;
  if (csr & 0x10) flags |= flag::underflow;
  if (csr & 0x20) flags |= flag::inexact;
  return flags;
}

// Runs body with MXCSR in a known state (the caller's FTZ/DAZ must not leak in) and returns
// the flags it raised; the caller's MXCSR comes back untouched.
template <typename Body>
__attribute__((target("avx,f16c"))) std::uint8_t with_clean_mxcsr(Body&& body) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(mxcsr_masks_only);
  body();
  const unsigned raised = _mm_getcsr() & mxcsr_flag_bits;
  _mm_setcsr(saved);
  return flags_from_mxcsr(raised);
}

template <int Immediate>
__attribute__((target("avx,f16c"))) void narrow(const float* in, std::uint16_t* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), Immediate));
  for (; i < n; ++i) out[i] = static_cast<std::uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(in[i]), Immediate), 0));
}

template <int Immediate>
__attribute__((target("avx,f16c"))) void round_trip(const float* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(in + i), Immediate)));
  for (; i < n; ++i) out[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(in[i]), Immediate)));
}

// round_trip with the inputs' largest magnitude bits read on the way (unsigned maxima: AVX2).
template <int Immediate>
__attribute__((target("avx2,f16c"))) void round_trip_reading(const float* in, float* out, std::size_t n, std::uint32_t* largest) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i lanes = _mm256_setzero_si256();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(in + i);  // read before `out` (which may be `in`) is written
    lanes = _mm256_max_epu32(lanes, _mm256_and_si256(_mm256_castps_si256(v), magnitude));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm256_cvtps_ph(v, Immediate)));
  }
  alignas(32) std::uint32_t lane[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lane), lanes);
  std::uint32_t top = *largest;
  for (const std::uint32_t l : lane) top = std::max(top, l);
  for (; i < n; ++i) {
    top = std::max(top, magnitude_bits(in[i]));
    out[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(in[i]), Immediate)));
  }
  *largest = top;
}

template <int Immediate>
void round_trip_and_read(const float* in, float* out, std::size_t n, std::uint32_t* largest) {
  if (largest == nullptr) return round_trip<Immediate>(in, out, n);
  round_trip_reading<Immediate>(in, out, n, largest);
}

__attribute__((target("avx,f16c"))) void widen(const std::uint16_t* in, float* out, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < n; ++i) out[i] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(in[i])));
}

bool has_f16c() {
  // CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c").
  static const bool supported = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0 && __builtin_cpu_supports("avx") != 0;
  }();
  return supported;
}

}  // namespace

bool applies(Format f, const Context& ctx) {
  const bool ieee_mode = ctx.rounding == RoundingMode::nearest_even || ctx.rounding == RoundingMode::toward_zero ||
                         ctx.rounding == RoundingMode::toward_positive || ctx.rounding == RoundingMode::toward_negative;
  return has_f16c() && f == formats::fp16 && ieee_mode && !ctx.flush_to_zero && !ctx.denormals_are_zero &&
         !ctx.saturate && ctx.platform.propagate_nan_payload && ctx.tininess == Tininess::after_rounding;
}

std::uint8_t f32_to_fp16(const float* in, std::uint16_t* out, std::size_t n, RoundingMode mode) {
  return with_clean_mxcsr([&] {
    switch (mode) {
      case RoundingMode::toward_zero: narrow<_MM_FROUND_TO_ZERO>(in, out, n); break;
      case RoundingMode::toward_positive: narrow<_MM_FROUND_TO_POS_INF>(in, out, n); break;
      case RoundingMode::toward_negative: narrow<_MM_FROUND_TO_NEG_INF>(in, out, n); break;
      default: narrow<_MM_FROUND_TO_NEAREST_INT>(in, out, n); break;
    }
  });
}

std::uint8_t round_f32_fp16(const float* in, float* out, std::size_t n, RoundingMode mode, std::uint32_t* largest) {
  return with_clean_mxcsr([&] {
    switch (mode) {
      case RoundingMode::toward_zero: round_trip_and_read<_MM_FROUND_TO_ZERO>(in, out, n, largest); break;
      case RoundingMode::toward_positive: round_trip_and_read<_MM_FROUND_TO_POS_INF>(in, out, n, largest); break;
      case RoundingMode::toward_negative: round_trip_and_read<_MM_FROUND_TO_NEG_INF>(in, out, n, largest); break;
      default: round_trip_and_read<_MM_FROUND_TO_NEAREST_INT>(in, out, n, largest); break;
    }
  });
}

std::uint8_t fp16_to_f32(const std::uint16_t* in, float* out, std::size_t n) {
  return with_clean_mxcsr([&] { widen(in, out, n); });
}

bool reads_largest_in_pass() {
  static const bool supported = __builtin_cpu_supports("avx2") != 0;
  return supported;
}

}  // namespace fpscope::bulk_f16c

#else

namespace fpscope::bulk_f16c {
bool applies(Format, const Context&) { return false; }
std::uint8_t f32_to_fp16(const float*, std::uint16_t*, std::size_t, RoundingMode) { return 0; }
std::uint8_t round_f32_fp16(const float*, float*, std::size_t, RoundingMode, std::uint32_t*) { return 0; }
std::uint8_t fp16_to_f32(const std::uint16_t*, float*, std::size_t) { return 0; }
bool reads_largest_in_pass() { return false; }
}  // namespace fpscope::bulk_f16c

#endif
