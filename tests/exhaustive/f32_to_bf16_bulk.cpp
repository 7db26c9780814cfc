// Exhaustive: the bulk float32 -> bf16 paths as shipped (AVX-512 BF16 where the processor has it,
// else the vector kernel), to bits and rounded in float32 (round_f32, and round_f32_in_normal_range
// for the inputs it takes), for all 2^32 inputs in round to nearest even. Each input fills a
// block of 16 so that it goes through the block path; the bits of all 16 and the call's flags
// must equal the reference's for that one input.
#include <cstdio>
#include <vector>

#include "bf16_reference.hpp"
#include "fpscope/core/bulk.hpp"
#include "sweep.hpp"

using namespace fpscope;

int main() {
  std::printf("AVX-512 BF16 on this processor: %s\n", __builtin_cpu_supports("avx512bf16") ? "yes" : "no");
  const sweep::Result r = sweep::run(std::uint64_t{1} << 32, [](std::uint64_t first, std::uint64_t last) {
    std::uint64_t mismatches = 0;
    float block[16], rounded[16];
    std::uint16_t out[16];
    for (std::uint64_t i = first; i < last; ++i) {
      const auto x = static_cast<std::uint32_t>(i);
      for (float& v : block) v = bits_float(x);
      Context ctx;
      f32_to_bits(formats::bf16, block, out, ctx);
      const bf16_reference::Reference expected = bf16_reference::reference_bf16(x, RoundingMode::nearest_even);
      bool same = ctx.flags == expected.flags;
      for (const std::uint16_t o : out) same = same && o == expected.bits;
      Context round_ctx;  // round_f32: the same rounding, widened back to float32
      round_f32(formats::bf16, block, rounded, round_ctx);
      same = same && round_ctx.flags == expected.flags;
      for (const float r : rounded) same = same && float_bits(r) == static_cast<std::uint32_t>(expected.bits) << 16;
      // The inputs round_f32_in_normal_range takes (zeros and normals below 2^127): its path too.
      const std::uint32_t magnitude = x & 0x7FFFFFFFu;
      if (magnitude == 0 || (magnitude >= 0x00800000u && magnitude < 0x7F000000u)) {
        Context range_ctx;
        round_f32_in_normal_range(formats::bf16, block, rounded, range_ctx);
        same = same && range_ctx.flags == expected.flags;
        for (const float r : rounded) same = same && float_bits(r) == static_cast<std::uint32_t>(expected.bits) << 16;
      }
      if (!same && ++mismatches <= 3) {
        std::lock_guard lock(sweep::print_lock());
        std::printf("MISMATCH input %08X: bulk %04X/%02X reference %04X/%02X\n", x, out[0], ctx.flags, expected.bits, expected.flags);
      }
    }
    return mismatches;
  });
  std::printf("bulk f32->bf16 rne: 4294967296 inputs, %llu mismatches (%.1f s)\n", static_cast<unsigned long long>(r.mismatches), r.seconds);
  std::printf("%llu passed, %llu failed\n", static_cast<unsigned long long>((std::uint64_t{1} << 32) - r.mismatches),
              static_cast<unsigned long long>(r.mismatches));
  return r.mismatches == 0 ? 0 : 1;
}
