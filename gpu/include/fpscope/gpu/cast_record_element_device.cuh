// The recorded cast's element in round-to-nearest-even with default options, on the device,
// through the GPU's own conversion instructions (cvt.rn.f16.f32, cvt.rn.bf16.f32): IEEE 754
// round-to-nearest-even with subnormals and overflow to infinity, the same rounding as
// round_pack's definition. NaNs take the emulator's path (the instruction returns a canonical
// NaN; the emulator keeps the payload), as do all other modes. The test cuda_gpu_kernels holds
// this equal to cast_record_element over every one of the 2^32 float32 inputs, in both formats,
// on the device, as the F16C and AVX-512 BF16 paths are held to it on the CPU.
// Device code only (nvcc).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "fpscope/core/format.hpp"
#include "fpscope/gpu/cast_record_element.hpp"

namespace fpscope {

// True for the (format, mode) pairs the instruction path covers.
template <Format F, RoundingMode Mode>
constexpr bool has_conversion_instruction =
    Mode == RoundingMode::nearest_even && (F == formats::fp16 || F == formats::bf16);

template <Format F>
__device__ __forceinline__ CastRecordElement cast_record_element_by_instruction(std::uint32_t u) {
  static_assert(F == formats::fp16 || F == formats::bf16);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return cast_record_element<F, RoundingMode::nearest_even>(u, 0, 0, 0);  // NaN
  CastRecordElement e;
  const float x = __uint_as_float(u);
  if constexpr (F == formats::fp16) {
    const __half h = __float2half_rn(x);
    e.narrow = __half_as_ushort(h);
    e.rounded = __float_as_uint(__half2float(h));  // exact
  } else {
    e.narrow = __bfloat16_as_ushort(__float2bfloat16_rn(x));
    e.rounded = e.narrow << 16;  // exact
  }
  e.slot = histogram_slot_of_f32(u);
  const CastOutcome outcome = classify_cast(F, u, e.rounded);
  e.flushed_to_zero = outcome.flushed_to_zero;
  e.made_subnormal = outcome.made_subnormal;
  e.overflowed = outcome.overflowed;  // round to nearest: a finite input overflows exactly when it became infinite
  return e;
}

}  // namespace fpscope
