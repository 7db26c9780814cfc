// Bulk conversions: checks, instruction-set dispatch, and the general scalar path for other formats.
#include "fpscope/core/bulk.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "bulk_bf16_avx512.hpp"
#include "bulk_f16c.hpp"
#include "bulk_isa.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/names.hpp"
#include "kernel_sets.hpp"

namespace fpscope {

namespace {

using Isa = KernelSet;

// FPSCOPE_BULK_ISA=generic|avx2|avx512 forces one kernel build (and turns the F16C and
// AVX-512 BF16 accelerators off), so that the tests can hold every build to the scalar
// reference on one machine.
const char* forced_isa() {
  static const char* forced = std::getenv("FPSCOPE_BULK_ISA");
  return forced;
}

bool compiled(Isa isa) {
  switch (isa) {
    case Isa::generic: return bulk_generic::compiled();
    case Isa::avx2: return bulk_avx2::compiled();
    case Isa::avx512: return bulk_avx512::compiled();
  }
  return false;
}

// A set's kernels run where the processor runs them and the build compiled them.
bool runs(Isa isa) { return processor_runs(isa) && compiled(isa); }

Isa best_isa() {
  static const Isa isa = [] {
    if (const char* forced = forced_isa()) {
      for (const Isa set : kernel_sets)
        if (std::strcmp(forced, kernel_set_name(set)) == 0 && runs(set)) return set;
      return Isa::generic;
    }
    return runs(Isa::avx512) ? Isa::avx512 : runs(Isa::avx2) ? Isa::avx2 : Isa::generic;
  }();
  return isa;
}

bool use_f16c(Format f, const Context& ctx) { return forced_isa() == nullptr && bulk_f16c::applies(f, ctx); }
bool use_avx512_bf16(Format f, const Context& ctx) {
  return forced_isa() == nullptr && bulk_bf16_avx512::applies(f, ctx);
}

// Calls the kernel `name` of the best instruction set this processor has.
#define FPSCOPE_BULK_DISPATCH(name, ...)                       \
  (best_isa() == Isa::avx512 ? bulk_avx512::name(__VA_ARGS__) \
   : best_isa() == Isa::avx2 ? bulk_avx2::name(__VA_ARGS__)   \
                             : bulk_generic::name(__VA_ARGS__))

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

// The largest of the values' magnitude bits into *largest, kept where it was larger (none where
// `largest` is null): round_f32's reading where no kernel takes it in its own pass. Before the
// rounding, whose output may be its input.
void keep_largest_magnitude(std::span<const float> in, std::uint32_t* largest) {
  if (largest != nullptr) *largest = largest_magnitude_bits(in, *largest);
}

}  // namespace

bool bulk_mx_blocks(const BlockFormat& format, ScaleRule rule, const BlockLayout& layout, const std::uint32_t* values, std::uint8_t* codes,
                    std::uint8_t* scales, float tensor_scale, Context& ctx, BlockStatistics* statistics, BlockOutcome* outcomes) {
  // An instruction set's build takes what its whole-block kernels take; the baseline build the rest.
  return FPSCOPE_BULK_DISPATCH(mx_blocks, format, rule, layout, values, codes, scales, tensor_scale, ctx, statistics, outcomes) ||
         (best_isa() != Isa::generic &&
          bulk_generic::mx_blocks(format, rule, layout, values, codes, scales, tensor_scale, ctx, statistics, outcomes));
}

void f32_to_bits(Format f, std::span<const float> in, std::span<std::uint16_t> out, Context& ctx) {
  check(f, in.size(), out.size(), 16);
  if (use_f16c(f, ctx)) {
    ctx.raise(bulk_f16c::f32_to_fp16(in.data(), out.data(), in.size(), ctx.rounding));
    ctx.stochastic_counter += in.size();
    return;
  }
  if (use_avx512_bf16(f, ctx)) {
    ctx.raise(bulk_bf16_avx512::f32_to_bf16(in.data(), out.data(), in.size(), ctx));
    ctx.stochastic_counter += in.size();
    return;
  }
  const bool done = FPSCOPE_BULK_DISPATCH(f32_to_bits16, f, as_bits(in.data()), out.data(), in.size(), ctx);
  if (done) ctx.stochastic_counter += in.size();
  else scalar_narrow(f, in, out.data(), ctx);
}

void f32_to_bits(Format f, std::span<const float> in, std::span<std::uint8_t> out, Context& ctx) {
  check(f, in.size(), out.size(), 8);
  const bool done = FPSCOPE_BULK_DISPATCH(f32_to_bits8, f, as_bits(in.data()), out.data(), in.size(), ctx);
  if (done) ctx.stochastic_counter += in.size();
  else scalar_narrow(f, in, out.data(), ctx);
}

void round_f32_in_normal_range(Format f, std::span<const float> in, std::span<float> out, Context& ctx) {
  if (!use_avx512_bf16(f, ctx)) return round_f32(f, in, out, ctx);
  check(f, in.size(), out.size(), 32);
  ctx.raise(bulk_bf16_avx512::round_f32_bf16_in_normal_range(in.data(), out.data(), in.size()));
  ctx.stochastic_counter += in.size();
}

void round_f32_with_bits(Format f, std::span<const float> in, std::span<float> out, std::span<std::uint16_t> bits, Context& ctx,
                         bool in_normal_range, std::uint32_t* largest) {
  check(f, in.size(), out.size(), 16);
  check(f, in.size(), bits.size(), 16);
  if (use_avx512_bf16(f, ctx)) {
    ctx.raise(in_normal_range ? bulk_bf16_avx512::round_f32_bf16_in_normal_range_with_bits(in.data(), out.data(), bits.data(), in.size(), largest)
                              : bulk_bf16_avx512::round_f32_bf16_with_bits(in.data(), out.data(), bits.data(), in.size(), ctx, largest));
    ctx.stochastic_counter += in.size();
    return;
  }
  keep_largest_magnitude(in, largest);
  if (in_normal_range) round_f32_in_normal_range(f, in, out, ctx);
  else round_f32(f, in, out, ctx);
  patterns_of_values(f, out, bits, ctx);
}

void patterns_of_values(Format f, std::span<const float> values, std::span<std::uint16_t> bits, const Context& ctx) {
  Context exact = ctx;  // a copy: what the conversion raises or draws stays in it
  f32_to_bits(f, values, bits, exact);
}

std::uint32_t largest_magnitude_bits(std::span<const float> in, std::uint32_t start) {
  return FPSCOPE_BULK_DISPATCH(largest_magnitude_bits, as_bits(in.data()), in.size(), start);
}

void round_f32(Format f, std::span<const float> in, std::span<float> out, Context& ctx, std::uint32_t* largest) {
  check(f, in.size(), out.size(), 32);
  if (use_avx512_bf16(f, ctx)) {
    ctx.raise(bulk_bf16_avx512::round_f32_bf16(in.data(), out.data(), in.size(), ctx, largest));
    ctx.stochastic_counter += in.size();
    return;
  }
  if (use_f16c(f, ctx)) {  // the reading in the rounding's pass where it can take it, else in one before
    std::uint32_t* const in_pass = bulk_f16c::reads_largest_in_pass() ? largest : nullptr;
    if (in_pass == nullptr) keep_largest_magnitude(in, largest);
    ctx.raise(bulk_f16c::round_f32_fp16(in.data(), out.data(), in.size(), ctx.rounding, in_pass));
    ctx.stochastic_counter += in.size();
    return;
  }
  keep_largest_magnitude(in, largest);
  const bool done = FPSCOPE_BULK_DISPATCH(round_f32, f, as_bits(in.data()), as_bits(out.data()), in.size(), ctx);
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
  if (use_f16c(f, ctx)) {
    ctx.raise(bulk_f16c::fp16_to_f32(in.data(), out.data(), in.size()));
    return;
  }
  const bool done = FPSCOPE_BULK_DISPATCH(bits16_to_f32, f, in.data(), as_bits(out.data()), in.size(), ctx);
  if (done) return;
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = bits_float(static_cast<std::uint32_t>(convert(f, formats::fp32, in[i], ctx)));
}

void bits_to_f32(Format f, std::span<const std::uint8_t> in, std::span<float> out, Context& ctx) {
  check(f, in.size(), out.size(), 8);
  const bool done = FPSCOPE_BULK_DISPATCH(bits8_to_f32, f, in.data(), as_bits(out.data()), in.size(), ctx);
  if (done) return;
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = bits_float(static_cast<std::uint32_t>(convert(f, formats::fp32, in[i], ctx)));
}

std::string_view bulk_kernel_isa() { return kernel_set_name(best_isa()); }

bool bulk_isa_supported(std::string_view isa) { return bulk_isa_unavailable(isa).empty(); }

std::string bulk_isa_unavailable(std::string_view isa) {
  for (const Isa set : kernel_sets) {
    if (isa != kernel_set_name(set)) continue;
    if (!processor_runs(set)) return "this processor cannot run the " + std::string(isa) + " kernels";
    if (!compiled(set))
      return "this build left out the " + std::string(isa) + " kernels (its FPSCOPE_BULK_KERNELS; all builds every set)";
    return "";
  }
  return "there are no " + std::string(isa) + " kernels (generic, avx2 or avx512)";
}

}  // namespace fpscope
