// Fuzz target: TestFloat case lines for a function the first byte picks, parsed and evaluated.
#include <string>
#include <string_view>

#include "commands.hpp"
#include "testfloat_case.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const char* functions[] = {"f16_add", "bf16_mul", "f32_mulAdd", "f64_div", "f16_sqrt", "f16_lt_quiet", "f32_eq_signaling",
                                    "f16_roundToInt", "f32_to_f16", "f16_to_i32", "f64_to_ui64_r_minMag", "i64_to_f16", "ui32_to_bf16"};
  if (size == 0) return 0;
  const fpscope::cli::Function fn = fpscope::cli::parse_function(functions[data[0] % std::size(functions)]);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    if (const auto c = fpscope::cli::parse_case_line(fn, text, 1)) {
      for (int mode = 0; mode < fpscope::rounding_mode_count; ++mode) {
        fpscope::Context ctx;
        ctx.rounding = static_cast<fpscope::RoundingMode>(mode);
        (void)fpscope::cli::evaluate(fn, c->operands, (data[0] & 0x80) != 0, ctx);
      }
    }
  } catch (const fpscope::cli::UsageError&) {
  }
  return 0;
}
