// Exhaustive: every fp16 bit pattern -> float32 against F16C's VCVTPH2PS, bits and flags, for the
// general conversion and the branch-free kernel.
#include <cstdio>

#include "fpscope/core/cast.hpp"
#include "fpscope/core/convert.hpp"
#include "sweep.hpp"

using namespace fpscope;

int main() {
  if (!__builtin_cpu_supports("f16c")) {
    std::printf("this processor has no F16C: the sweep needs it as its reference\n");
    return 1;
  }
  std::uint64_t bad = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    __m128i input = _mm_cvtsi32_si128(static_cast<int>(h));
    sweep::clear_mxcsr_flags();
    sweep::pin(input);
    __m128 widened = _mm_cvtph_ps(input);
    sweep::pin(widened);
    const std::uint8_t hardware_flags = sweep::mxcsr_flags();
    const auto hardware = static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm_castps_si128(widened)));
    Context ctx;
    const std::uint64_t general = convert(formats::fp16, formats::fp32, h, ctx);
    std::uint32_t kernel_flags = 0;
    const std::uint32_t kernel = cast_to_f32<formats::fp16>(h, CastOptions{}, kernel_flags);
    if (general != hardware || kernel != hardware || ctx.flags != hardware_flags || kernel_flags != hardware_flags) {
      if (++bad <= 5)
        std::printf("MISMATCH %04X: F16C %08X/%02X general %08llX/%02X kernel %08X/%02X\n", h, hardware, hardware_flags,
                    static_cast<unsigned long long>(general), ctx.flags, kernel, kernel_flags);
    }
  }
  std::printf("fp16->f32: 65536 inputs, %llu mismatches\n", static_cast<unsigned long long>(bad));
  std::printf("%llu passed, %llu failed\n", static_cast<unsigned long long>(65536 - bad), static_cast<unsigned long long>(bad));
  return bad == 0 ? 0 : 1;
}
