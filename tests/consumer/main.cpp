// Uses the installed fpscope::core: 0.1 into fp16 and back, its exact value, and a bulk cast.
#include <cstdio>
#include <vector>

#include "fpscope/core/bulk.hpp"
#include "fpscope/core/decimal.hpp"
#include "fpscope/core/names.hpp"

int main() {
  fpscope::Context ctx;
  const std::uint64_t bits = fpscope::round_text(fpscope::formats::fp16, "0.1", ctx);
  std::vector<float> values{0.1f, 65520.0f};
  std::vector<std::uint16_t> out(values.size());
  fpscope::Context bulk;
  fpscope::f32_to_bits(fpscope::formats::fp16, values, out, bulk);
  std::printf("%s 0.1 = 0x%04llX = %s; bulk 0x%04X 0x%04X, flags %s\n", fpscope::format_name(fpscope::formats::fp16).c_str(),
              static_cast<unsigned long long>(bits), fpscope::exact_decimal(fpscope::formats::fp16, bits).c_str(), out[0], out[1],
              fpscope::describe_flags(bulk.flags).c_str());
  return 0;
}
