// The core built with its avx2 and avx512 bulk kernels left out (FPSCOPE_BULK_KERNELS=generic, as
// FPSCOPE_BULK_KERNELS=this-processor builds on a processor without them): the dispatch runs the
// baseline build, says in a sentence why each left-out set cannot be forced, and every bulk call
// gives the scalar conversion's bits and flags.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "fpscope/core/bulk.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/hd.hpp"
#include "kernel_sets.hpp"

using namespace fpscope;

namespace {

std::vector<float> mixed_floats() {
  std::mt19937 rng(5);
  std::vector<float> values;
  for (int i = 0; i < 4000; ++i) {
    std::uint32_t bits = rng();
    if (i % 2 == 1) bits = (bits & 0x807FFFFFu) | ((100u + rng() % 60u) << 23);  // near the narrow formats' ranges
    values.push_back(bits_float(bits));
  }
  for (const std::uint32_t special : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x00000001u, 0x477FF000u})
    values.push_back(bits_float(special));
  return values;
}

}  // namespace

TEST_CASE("left-out kernels: the baseline runs, and forcing another set says why it cannot") {
  CHECK(bulk_kernel_isa() == "generic");
  CHECK(bulk_isa_supported("generic"));
  for (const KernelSet set : {KernelSet::avx2, KernelSet::avx512}) {
    const std::string name = kernel_set_name(set);
    CHECK_FALSE(bulk_isa_supported(name));
    const std::string why = bulk_isa_unavailable(name);
    INFO(name << ": " << why);
    if (processor_runs(set)) CHECK(why.find("this build left out the " + name + " kernels") == 0);
    else CHECK(why.find("this processor cannot run the " + name + " kernels") == 0);
  }
  CHECK(bulk_isa_unavailable("generic").empty());
  CHECK(bulk_isa_unavailable("avx1024").find("there are no avx1024 kernels") == 0);
}

TEST_CASE("left-out kernels: bulk casts give the scalar conversion's bits and flags") {
  const std::vector<float> in = mixed_floats();
  // bf16 in a directed mode, e4m3 and e5m2 (8-bit) to nearest and stochastically: none of them a
  // hardware cast, so each goes through the dispatch.
  struct Case {
    Format format;
    RoundingMode mode;
  };
  for (const Case c : {Case{formats::bf16, RoundingMode::toward_zero}, Case{formats::e4m3, RoundingMode::nearest_even},
                       Case{formats::e5m2, RoundingMode::stochastic}, Case{formats::e2m1, RoundingMode::nearest_away}}) {
    INFO(static_cast<int>(c.mode));
    Context bulk_ctx;
    bulk_ctx.rounding = c.mode;
    std::vector<std::uint8_t> codes(in.size());
    std::vector<std::uint16_t> wide_codes(in.size());
    std::vector<float> rounded(in.size()), widened(in.size());
    if (c.format.width() <= 8) f32_to_bits(c.format, in, std::span<std::uint8_t>(codes), bulk_ctx);
    else f32_to_bits(c.format, in, std::span<std::uint16_t>(wide_codes), bulk_ctx);
    Context round_ctx;
    round_ctx.rounding = c.mode;
    round_f32(c.format, in, rounded, round_ctx);
    Context scalar_ctx;
    scalar_ctx.rounding = c.mode;
    for (std::size_t i = 0; i < in.size(); ++i) {
      scalar_ctx.stochastic_counter = i;
      const std::uint64_t expected = convert(formats::fp32, c.format, float_bits(in[i]), scalar_ctx);
      const std::uint64_t got = c.format.width() <= 8 ? codes[i] : wide_codes[i];
      REQUIRE(got == expected);
      Context widen_ctx;
      REQUIRE(float_bits(rounded[i]) == convert(c.format, formats::fp32, expected, widen_ctx));
    }
    CHECK(bulk_ctx.flags == scalar_ctx.flags);
    CHECK(round_ctx.flags == scalar_ctx.flags);
    CHECK(bulk_ctx.stochastic_counter == in.size());
    Context widen_ctx;
    if (c.format.width() <= 8) bits_to_f32(c.format, std::span<const std::uint8_t>(codes), widened, widen_ctx);
    else bits_to_f32(c.format, std::span<const std::uint16_t>(wide_codes), widened, widen_ctx);
    for (std::size_t i = 0; i < in.size(); ++i) REQUIRE(float_bits(widened[i]) == float_bits(rounded[i]));
  }
  std::uint32_t largest = 0;
  for (const float v : in) largest = std::max(largest, magnitude_bits(v));
  CHECK(largest_magnitude_bits(in) == largest);
}
