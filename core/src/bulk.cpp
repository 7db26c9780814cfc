// Bulk conversions: checks, instruction-set dispatch, and the general scalar path for other formats.
#include "fpscope/core/bulk.hpp"

#include <stdexcept>
#include <string>

#include "bulk_isa.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/names.hpp"

namespace fpscope {

namespace {

bool has_avx2() {
#if defined(FPSCOPE_HAVE_AVX2_KERNELS)
  static const bool supported = __builtin_cpu_supports("avx2") != 0;
  return supported;
#else
  return false;
#endif
}

const std::uint32_t* as_bits(const float* values) { return reinterpret_cast<const std::uint32_t*>(values); }
std::uint32_t* as_bits(float* values) { return reinterpret_cast<std::uint32_t*>(values); }

void check(Format f, std::size_t in, std::size_t out, int element_bits) {
  if (in != out)
    throw std::invalid_argument("bulk conversion: input has " + std::to_string(in) + " elements but output has " +
                                std::to_string(out));
  if (f.width() > element_bits)
    throw std::invalid_argument("bulk conversion: " + format_name(f) + " is " + std::to_string(f.width()) +
                                " bits wide and does not fit " + std::to_string(element_bits) + "-bit elements");
}

template <typename Out>
void scalar_narrow(Format f, std::span<const float> in, Out* out, Context& ctx) {
  const std::uint64_t first = ctx.stochastic_counter;
  for (std::size_t i = 0; i < in.size(); ++i) {
    ctx.stochastic_counter = first + i;
    out[i] = static_cast<Out>(convert(formats::fp32, f, float_bits(in[i]), ctx));
  }
  ctx.stochastic_counter = first + in.size();
}

}  // namespace

void f32_to_bits(Format f, std::span<const float> in, std::span<std::uint16_t> out, Context& ctx) {
  check(f, in.size(), out.size(), 16);
  const bool done = has_avx2() ? bulk_avx2::f32_to_bits16(f, as_bits(in.data()), out.data(), in.size(), ctx)
                               : bulk_generic::f32_to_bits16(f, as_bits(in.data()), out.data(), in.size(), ctx);
  if (done) ctx.stochastic_counter += in.size();
  else scalar_narrow(f, in, out.data(), ctx);
}

void f32_to_bits(Format f, std::span<const float> in, std::span<std::uint8_t> out, Context& ctx) {
  check(f, in.size(), out.size(), 8);
  const bool done = has_avx2() ? bulk_avx2::f32_to_bits8(f, as_bits(in.data()), out.data(), in.size(), ctx)
                               : bulk_generic::f32_to_bits8(f, as_bits(in.data()), out.data(), in.size(), ctx);
  if (done) ctx.stochastic_counter += in.size();
  else scalar_narrow(f, in, out.data(), ctx);
}

void round_f32(Format f, std::span<const float> in, std::span<float> out, Context& ctx) {
  check(f, in.size(), out.size(), 32);
  const bool done = has_avx2() ? bulk_avx2::round_f32(f, as_bits(in.data()), as_bits(out.data()), in.size(), ctx)
                               : bulk_generic::round_f32(f, as_bits(in.data()), as_bits(out.data()), in.size(), ctx);
  if (done) {
    ctx.stochastic_counter += in.size();
    return;
  }
  const std::uint64_t first = ctx.stochastic_counter;
  Context widen = ctx;
  for (std::size_t i = 0; i < in.size(); ++i) {
    ctx.stochastic_counter = first + i;
    const std::uint64_t narrow = convert(formats::fp32, f, float_bits(in[i]), ctx);
    out[i] = bits_float(static_cast<std::uint32_t>(convert(f, formats::fp32, narrow, widen)));
  }
  ctx.stochastic_counter = first + in.size();
}

void bits_to_f32(Format f, std::span<const std::uint16_t> in, std::span<float> out, Context& ctx) {
  check(f, in.size(), out.size(), 16);
  const bool done = has_avx2() ? bulk_avx2::bits16_to_f32(f, in.data(), as_bits(out.data()), in.size(), ctx)
                               : bulk_generic::bits16_to_f32(f, in.data(), as_bits(out.data()), in.size(), ctx);
  if (done) return;
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = bits_float(static_cast<std::uint32_t>(convert(f, formats::fp32, in[i], ctx)));
}

void bits_to_f32(Format f, std::span<const std::uint8_t> in, std::span<float> out, Context& ctx) {
  check(f, in.size(), out.size(), 8);
  const bool done = has_avx2() ? bulk_avx2::bits8_to_f32(f, in.data(), as_bits(out.data()), in.size(), ctx)
                               : bulk_generic::bits8_to_f32(f, in.data(), as_bits(out.data()), in.size(), ctx);
  if (done) return;
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = bits_float(static_cast<std::uint32_t>(convert(f, formats::fp32, in[i], ctx)));
}

}  // namespace fpscope
