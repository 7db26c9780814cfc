// Bulk conversion of float32 arrays to and from narrow formats, at memory speed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "fpscope/core/context.hpp"
#include "fpscope/core/format.hpp"

namespace fpscope {

// Each call converts element i exactly as the scalar `convert` would under ctx (stochastic
// rounding draws word ctx.stochastic_counter + i, and the counter advances by the length),
// ORs every element's flags into ctx.flags, and throws std::invalid_argument when the spans'
// lengths differ or the format does not fit the element type. fp16, bf16, tf32, e4m3, e5m2 and
// the OCP MX elements e2m1, e2m3 and e3m2 run branch-free vectorised kernels (AVX-512 or AVX2
// where the processor has it); other formats run the general scalar path. Where hardware gives the same bits and flags it is used
// instead: F16C for fp16 in the four IEEE modes, AVX-512 BF16 for bf16 in round to nearest
// even, both with default options (see src/bulk_f16c.cpp, src/bulk_bf16_avx512.cpp).

// float32 -> bits of f, for formats of at most 16 bits (or at most 8 bits into bytes).
void f32_to_bits(Format f, std::span<const float> in, std::span<std::uint16_t> out, Context& ctx);
void f32_to_bits(Format f, std::span<const float> in, std::span<std::uint8_t> out, Context& ctx);
// bits of f -> float32 (exact for formats narrower than float32).
void bits_to_f32(Format f, std::span<const std::uint16_t> in, std::span<float> out, Context& ctx);
void bits_to_f32(Format f, std::span<const std::uint8_t> in, std::span<float> out, Context& ctx);
// float32 -> the value of f it rounds to, as float32 ("fake quantisation"). In place is fine.
// Where `largest` is given it takes the largest of the inputs' magnitude bits (bits & 0x7FFFFFFF,
// NaNs above infinity; kept where it was larger), from the same pass where there is one (bf16 in
// round to nearest even with AVX-512 BF16), else from a pass before the rounding: the step
// sentinel's reading.
void round_f32(Format f, std::span<const float> in, std::span<float> out, Context& ctx, std::uint32_t* largest = nullptr);
// The largest of `start` and the values' magnitude bits (hd.hpp's magnitude_bits: NaNs above
// infinity), in the best instruction set's kernel: the step sentinel's reading where no cast takes it.
std::uint32_t largest_magnitude_bits(std::span<const float> in, std::uint32_t start = 0);
// round_f32 of values the caller has found (from their histogram) all zeros or float32 normals,
// finite, and below f's largest binade: the same bits, flags and random words; a kernel may skip
// its checks for subnormals, infinities, NaNs and overflow (bf16 in round to nearest even does).
void round_f32_in_normal_range(Format f, std::span<const float> in, std::span<float> out, Context& ctx);
// round_f32 (or, where `in_normal_range`, round_f32_in_normal_range under its promise) with each
// result's bit pattern in f beside it: bits[i] is what f32_to_bits gives for in[i]. The same
// values, flags and random words as round_f32; one pass where a kernel makes both (bf16 in round
// to nearest even with AVX-512 BF16), elsewhere the rounding and then its results' patterns (each
// result a value of f: exact). For formats of at most 16 bits. `largest`: as round_f32's.
void round_f32_with_bits(Format f, std::span<const float> in, std::span<float> out, std::span<std::uint16_t> bits, Context& ctx,
                         bool in_normal_range = false, std::uint32_t* largest = nullptr);
// The bit patterns in f of float32 values that are values of f already (the results of a rounding
// under `ctx`, whose options, NaN encodings among them, it takes): exact, raising no flag in ctx
// and drawing none of its random words. For formats of at most 16 bits.
void patterns_of_values(Format f, std::span<const float> values, std::span<std::uint16_t> bits, const Context& ctx);

// The instruction set whose kernels run: "avx512", "avx2" or "generic". The environment
// variable FPSCOPE_BULK_ISA=generic|avx2|avx512 forces one (and turns the hardware casts off);
// one this processor lacks, or this build left out (the CMake option FPSCOPE_BULK_KERNELS), cannot
// be forced, and bulk_isa_supported says so beforehand; bulk_isa_unavailable says why in a
// sentence ("" where the set runs).
std::string_view bulk_kernel_isa();
bool bulk_isa_supported(std::string_view isa);
std::string bulk_isa_unavailable(std::string_view isa);

}  // namespace fpscope
