// F16C-accelerated fp16 casts, for the cases where the instructions match fpscope bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"

namespace fpscope::bulk_f16c {

// True when the processor has F16C and the cast of f under ctx is one F16C reproduces exactly.
bool applies(Format f, const Context& ctx);
// Each returns the flags raised (preconditions: applies(fp16, ctx) for ctx's mode).
std::uint8_t f32_to_fp16(const float* in, std::uint16_t* out, std::size_t n, RoundingMode mode);
// `largest`, where given, takes the largest of its value and the inputs' magnitude bits (round_f32's
// reading) in the same pass: only where reads_largest_in_pass().
std::uint8_t round_f32_fp16(const float* in, float* out, std::size_t n, RoundingMode mode, std::uint32_t* largest = nullptr);
// Whether round_f32_fp16 can take the reading (the processor has AVX2's unsigned maxima).
bool reads_largest_in_pass();
std::uint8_t fp16_to_f32(const std::uint16_t* in, float* out, std::size_t n);

}  // namespace fpscope::bulk_f16c
