// VCVTNEPS2BF16-accelerated float32 -> bf16, for the cases where it matches fpscope bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"

namespace fpscope::bulk_bf16_avx512 {

// True when the processor has AVX-512 BF16 and the cast of f under ctx is one it speeds up.
bool applies(Format f, const Context& ctx);
// Returns the flags raised. Precondition: applies(bf16, ctx).
std::uint8_t f32_to_bf16(const float* in, std::uint16_t* out, std::size_t n, const Context& ctx);
// The same rounding with the results widened back to float32 (out may be in); where `largest` is
// given, the inputs' largest magnitude bits kept in it where larger.
std::uint8_t round_f32_bf16(const float* in, float* out, std::size_t n, const Context& ctx, std::uint32_t* largest);
// round_f32_bf16 of inputs that are all zeros or float32 normals below 2^127 (round_f32_in_normal_range's
// promise, bulk.hpp): no lane is looked at for a subnormal, an overflow, an infinity or a NaN.
std::uint8_t round_f32_bf16_in_normal_range(const float* in, float* out, std::size_t n);
// The two above with each result's bf16 pattern stored at bits[i] as well, in the same pass, and,
// where `largest` is given, the inputs' largest magnitude bits kept in it where larger.
std::uint8_t round_f32_bf16_with_bits(const float* in, float* out, std::uint16_t* bits, std::size_t n, const Context& ctx,
                                      std::uint32_t* largest);
std::uint8_t round_f32_bf16_in_normal_range_with_bits(const float* in, float* out, std::uint16_t* bits, std::size_t n, std::uint32_t* largest);

}  // namespace fpscope::bulk_bf16_avx512
