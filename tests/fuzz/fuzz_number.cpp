// Fuzz target: the number syntax of `inspect` (decimal, hex float, specials) and bit patterns.
// The fast path (round_text) and the exact path (parse_number + round_number) must agree on
// bits and flags in every format and mode.
#include <cstdlib>
#include <string_view>

#include "fpscope/core/decimal.hpp"
#include "hex_digits.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto mode = static_cast<fpscope::RoundingMode>(data[0] % 6);  // not stochastic: it has no fast path
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::uint64_t bits = 0;
  (void)fpscope::cli::parse_hex_digits(text, 16, bits);
  fpscope::ParsedNumber number;
  try {
    number = fpscope::parse_number(text);
  } catch (const fpscope::ParseError&) {
    try {
      fpscope::Context ctx;
      (void)fpscope::round_text(fpscope::formats::fp16, text, ctx);
    } catch (const fpscope::ParseError&) {
      return 0;
    }
    std::abort();  // round_text accepted what parse_number refused
  }
  for (const fpscope::Format f : {fpscope::formats::fp16, fpscope::formats::bf16, fpscope::formats::fp32, fpscope::formats::e4m3,
                                  fpscope::formats::e5m2, fpscope::formats::fp64}) {
    fpscope::Context exact_ctx, fast_ctx;
    exact_ctx.rounding = fast_ctx.rounding = mode;
    const std::uint64_t exact = fpscope::round_number(f, number, exact_ctx);
    const std::uint64_t fast = fpscope::round_text(f, text, fast_ctx);
    if (exact != fast || exact_ctx.flags != fast_ctx.flags) std::abort();
  }
  return 0;
}
