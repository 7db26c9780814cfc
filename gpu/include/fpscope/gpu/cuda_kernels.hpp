// The CUDA backend's element-wise kernels, callable from host code that never sees a CUDA header.
// Each runs the FPSCOPE_HD math its CPU twin runs: cast_from_f32 / cast_to_f32 and
// histogram_slot_of_f32 (cast_and_record), unscale_element (unscale_and_check), and
// apply_scaler_rule (LossScaler::update). Built only when FPSCOPE_ENABLE_CUDA is on.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fpscope/core/context.hpp"
#include "fpscope/gpu/loss_scaler.hpp"

namespace fpscope::cuda {

// Device buffers the recorded cast accumulates into: 280 histogram slots (binades -149..127,
// then zero, inf, nan) and 3 outcome counts (flushed to zero, made subnormal, overflowed).
struct CastRecordBuffers {
  unsigned long long* histogram = nullptr;  // 280 counters
  unsigned long long* counts = nullptr;     // 3 counters
};

// Rounds n float32 values (device memory) to fp16 (bf16 with `bf16`) in `mode` with default
// options, writing them back as float32 into `out` (may equal `in`), and accumulates the
// histogram of the values before the cast and the outcome counts. One pass over the data;
// block-local shared-memory histograms, merged with one atomic per bin per block.
void cast_and_record(const float* in, float* out, std::size_t n, bool bf16, RoundingMode mode, CastRecordBuffers buffers,
                     void* stream = nullptr);

// gradients *= inverse_scale in place; sets *found_non_finite (device int) to 1 if any was inf/NaN.
void unscale_and_check(float* gradients, std::size_t n, float inverse_scale, int* found_non_finite, void* stream = nullptr);

// Advances the scaler state (device memory) by one step from *found_non_finite, on the device,
// so that a training step needs no host synchronisation.
void update_scaler(const LossScalerConfig& config, LossScalerState* state, const int* found_non_finite, int* skip,
                   void* stream = nullptr);

// Number of CUDA devices (0 when there is no driver or no device).
int device_count();

}  // namespace fpscope::cuda
