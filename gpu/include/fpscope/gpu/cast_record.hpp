// Casting a float32 tensor to a low-precision format while recording what the cast did: the
// histogram of the values before the cast and exact counts of values flushed to zero, made
// subnormal and overflowed. The element-wise rule, classify_cast, is in cast_outcome.hpp, which
// the CUDA kernel shares.
#pragma once

#include <cstdint>
#include <span>

#include "fpscope/snapshot/snapshot.hpp"
#include "fpscope/core/context.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/core/format.hpp"
#include "fpscope/core/hd.hpp"
#include "fpscope/gpu/cast_outcome.hpp"

namespace fpscope {

// Rounds `in` into f under ctx (as float32 values, in `out`: in place, or not overlapping
// `in`), adds the values before the cast to `histogram`, and counts the outcomes into `counts`.
// The CPU backend's cast; its CUDA twin fuses the same three steps in one pass. Where
// largest_magnitude is given, it takes the largest magnitude bits of `in` from the histogram's
// pass (ExponentHistogram::add): the step sentinel's reading.
// Preconditions: f is narrower than float32. Throws std::invalid_argument for spans of different
// lengths or partly overlapping.
// Where `bits` is given (as long as `in`), each result's bit pattern in f goes there too
// (round_f32_with_bits): f of at most 16 bits.
void cast_and_record(Format f, std::span<const float> in, std::span<float> out, Context& ctx,
                     ExponentHistogram& histogram, CastCounts& counts, std::uint32_t* largest_magnitude = nullptr,
                     std::span<std::uint16_t> bits = {});

}  // namespace fpscope
