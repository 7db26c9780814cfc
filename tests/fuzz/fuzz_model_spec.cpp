// Fuzz target: model specs (MLP and GPT), fault specs, format and rounding-mode names.
#include <cstdlib>
#include <string>

#include "fpscope/core/names.hpp"
#include "fpscope/gpu/fault_injection.hpp"
#include "fpscope/gpu/mlp.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const std::vector<int> sizes = fpscope::parse_layer_sizes(text);
    if (fpscope::parse_layer_sizes(fpscope::layer_sizes_name(sizes)) != sizes) std::abort();
  } catch (const std::invalid_argument&) {
  }
  try {
    const fpscope::GptShape shape = fpscope::parse_gpt_shape(text);
    if (!(fpscope::parse_gpt_shape(fpscope::gpt_shape_name(shape)) == shape) || shape.width % shape.heads != 0) std::abort();
  } catch (const std::invalid_argument&) {
  }
  try {
    const fpscope::FaultInjection fault = fpscope::parse_fault_injection(text, 4);
    if (!(fpscope::parse_fault_injection(fpscope::describe(fault), 4) == fault)) std::abort();
  } catch (const std::invalid_argument&) {
  }
  try {
    static const std::vector<std::string> tensors{"embed.tokens", "h0.attn.qkv", "ln_f"};
    const fpscope::FaultInjection fault = fpscope::parse_fault_injection(text, tensors);
    if (!(fpscope::parse_fault_injection(fpscope::describe(fault), tensors) == fault)) std::abort();
  } catch (const std::invalid_argument&) {
  }
  try {
    const fpscope::Format f = fpscope::parse_format(text);
    if (!(fpscope::parse_format(fpscope::format_name(f)) == f)) std::abort();
  } catch (const std::exception&) {
  }
  try {
    (void)fpscope::parse_rounding_mode(text);
  } catch (const std::exception&) {
  }
  return 0;
}
