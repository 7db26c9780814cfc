// Exhaustive: all 2^32 float32 -> bfloat16 in six modes (nearest even, nearest away, toward zero,
// up, down, odd), bits and flags, against the reference of bf16_reference.hpp, for both the
// general conversion and the branch-free kernel.
#include <cmath>
#include <cstdio>

#include "fpscope/core/cast.hpp"
#include "fpscope/core/convert.hpp"
#include "bf16_reference.hpp"
#include "sweep.hpp"

using namespace fpscope;
using namespace bf16_reference;

namespace {

template <RoundingMode Mode>
std::uint64_t sweep_mode(std::uint64_t first, std::uint64_t last) {
  std::uint64_t mismatches = 0;
  const CastOptions options{};
  for (std::uint64_t i = first; i < last; ++i) {
    const auto x = static_cast<std::uint32_t>(i);
    const Reference expected = reference_bf16(x, Mode);
    Context ctx;
    ctx.rounding = Mode;
    const std::uint64_t general = convert(formats::fp32, formats::bf16, x, ctx);
    std::uint32_t kernel_flags = 0;
    const std::uint32_t kernel = cast_from_f32<formats::bf16, Mode>(x, options, 0, kernel_flags);
    if (general != expected.bits || ctx.flags != expected.flags || kernel != expected.bits || kernel_flags != expected.flags) {
      if (++mismatches <= 3) {
        std::lock_guard lock(sweep::print_lock());
        std::printf("MISMATCH mode %d input %08X: reference %04X/%02X general %04llX/%02X kernel %04X/%02X\n",
                    static_cast<int>(Mode), x, expected.bits, expected.flags, static_cast<unsigned long long>(general),
                    ctx.flags, kernel, kernel_flags);
      }
    }
  }
  return mismatches;
}

}  // namespace

int main() {
  std::uint64_t (*bodies[])(std::uint64_t, std::uint64_t) = {
      sweep_mode<modes[0]>, sweep_mode<modes[1]>, sweep_mode<modes[2]>, sweep_mode<modes[3]>, sweep_mode<modes[4]>, sweep_mode<modes[5]>};
  const char* names[] = {"rne", "rna", "rz", "ru", "rd", "odd"};
  std::uint64_t total = 0, bad = 0;
  for (int m = 0; m < 6; ++m) {
    const sweep::Result r = sweep::run(std::uint64_t{1} << 32, bodies[m]);
    std::printf("f32->bf16 %s: 4294967296 inputs, %llu mismatches (%.1f s)\n", names[m],
                static_cast<unsigned long long>(r.mismatches), r.seconds);
    std::fflush(stdout);
    total += std::uint64_t{1} << 32;
    bad += r.mismatches;
  }
  std::printf("%llu passed, %llu failed\n", static_cast<unsigned long long>(total - bad), static_cast<unsigned long long>(bad));
  return bad == 0 ? 0 : 1;
}
