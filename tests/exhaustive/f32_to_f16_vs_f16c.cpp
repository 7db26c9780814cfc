// Exhaustive: all 2^32 float32 -> fp16 in RNE, RZ, RU, RD, bits and flags, against the x86 F16C
// instruction (VCVTPS2PH with each rounding immediate; flags read from MXCSR), for both our
// general conversion and the branch-free kernel the bulk path and CUDA use.
#include <cstdio>

#include "fpscope/core/cast.hpp"
#include "fpscope/core/convert.hpp"
#include "sweep.hpp"

using namespace fpscope;

namespace {

template <int Immediate>
std::uint16_t f16c(std::uint32_t bits, std::uint8_t& flags) {
  __m128 input = _mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(bits)));
  sweep::clear_mxcsr_flags();
  sweep::pin(input);
  __m128i h = _mm_cvtps_ph(input, Immediate);
  sweep::pin(h);
  flags = sweep::mxcsr_flags();
  return static_cast<std::uint16_t>(_mm_extract_epi16(h, 0));
}

template <int Immediate, RoundingMode Mode>
std::uint64_t sweep_mode(std::uint64_t first, std::uint64_t last) {
  std::uint64_t mismatches = 0;
  const CastOptions options{};
  for (std::uint64_t i = first; i < last; ++i) {
    const auto x = static_cast<std::uint32_t>(i);
    std::uint8_t hardware_flags = 0;
    const std::uint16_t hardware = f16c<Immediate>(x, hardware_flags);
    Context ctx;
    ctx.rounding = Mode;
    const std::uint64_t general = convert(formats::fp32, formats::fp16, x, ctx);
    std::uint32_t kernel_flags = 0;
    const std::uint32_t kernel = cast_from_f32<formats::fp16, Mode>(x, options, 0, kernel_flags);
    if (general != hardware || ctx.flags != hardware_flags || kernel != hardware || kernel_flags != hardware_flags) {
      if (++mismatches <= 3) {
        std::lock_guard lock(sweep::print_lock());
        std::printf("MISMATCH mode %d input %08X: F16C %04X/%02X general %04llX/%02X kernel %04X/%02X\n",
                    static_cast<int>(Mode), x, hardware, hardware_flags, static_cast<unsigned long long>(general),
                    ctx.flags, kernel, kernel_flags);
      }
    }
  }
  return mismatches;
}

}  // namespace

int main() {
  if (!__builtin_cpu_supports("f16c")) {
    std::printf("this processor has no F16C: the sweep needs it as its reference\n");
    return 1;
  }
  struct ModeSweep {
    const char* name;
    std::uint64_t (*body)(std::uint64_t, std::uint64_t);
  };
  const ModeSweep modes[] = {
      {"rne", sweep_mode<_MM_FROUND_TO_NEAREST_INT, RoundingMode::nearest_even>},
      {"rd", sweep_mode<_MM_FROUND_TO_NEG_INF, RoundingMode::toward_negative>},
      {"ru", sweep_mode<_MM_FROUND_TO_POS_INF, RoundingMode::toward_positive>},
      {"rz", sweep_mode<_MM_FROUND_TO_ZERO, RoundingMode::toward_zero>},
  };
  std::uint64_t total = 0, bad = 0;
  for (const ModeSweep& mode : modes) {
    const sweep::Result r = sweep::run(std::uint64_t{1} << 32, mode.body);
    std::printf("f32->f16 %s: 4294967296 inputs, %llu mismatches (%.1f s)\n", mode.name,
                static_cast<unsigned long long>(r.mismatches), r.seconds);
    std::fflush(stdout);
    total += std::uint64_t{1} << 32;
    bad += r.mismatches;
  }
  std::printf("%llu passed, %llu failed\n", static_cast<unsigned long long>(total - bad), static_cast<unsigned long long>(bad));
  return bad == 0 ? 0 : 1;
}
