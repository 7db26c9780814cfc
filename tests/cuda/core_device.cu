// The core emulator as device code: every kernel-facing function runs on the GPU and must give
// the host's bits and flags. Compiling this file is itself the CI test that the headers are
// valid __host__ __device__ code; running it needs a device.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "fpscope/core/arithmetic.hpp"
#include "fpscope/core/cast.hpp"
#include "fpscope/core/compare.hpp"
#include "fpscope/core/convert.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/core/integral.hpp"

#include "launch.hpp"  // cudaCheck: the CUDA backend's one check

using namespace fpscope;

struct Outputs {
  std::uint32_t cast_fp16, cast_bf16, cast_flags;
  std::uint64_t convert_fp16, add_fp16, mul_bf16, div_fp32, sqrt_fp16, fma_fp16, round_int, to_int;
  std::uint32_t flags;
  int slot;
  bool less;
  std::uint64_t min_number;
};

// The same sequence on host and device.
FPSCOPE_HD void compute(std::uint32_t x, std::uint32_t y, Outputs& out) {
  const CastOptions options{};
  std::uint32_t cast_flags = 0;
  out.cast_fp16 = cast_from_f32<formats::fp16, RoundingMode::nearest_even>(x, options, 0, cast_flags);
  out.cast_bf16 = cast_from_f32<formats::bf16, RoundingMode::stochastic>(x, options, stochastic_random(1, x), cast_flags);
  out.cast_flags = cast_flags;
  Context ctx;
  const std::uint64_t a = convert(formats::fp32, formats::fp16, x, ctx);
  const std::uint64_t b = convert(formats::fp32, formats::fp16, y, ctx);
  out.convert_fp16 = a;
  out.add_fp16 = add(formats::fp16, a, b, ctx);
  out.mul_bf16 = mul(formats::bf16, convert(formats::fp32, formats::bf16, x, ctx), convert(formats::fp32, formats::bf16, y, ctx), ctx);
  out.div_fp32 = div(formats::fp32, x, y, ctx);
  out.sqrt_fp16 = fpscope::sqrt(formats::fp16, a, ctx);
  out.fma_fp16 = fma(formats::fp16, a, b, a, ctx);
  out.round_int = round_to_integral(formats::fp32, x, true, ctx);
  out.to_int = to_integer(formats::fp32, y, 32, true, true, ctx);
  out.less = lt(formats::fp32, x, y, ctx);
  out.min_number = minimum_number(formats::fp32, x, y, ctx);
  out.flags = ctx.flags;
  out.slot = histogram_slot_of_f32(x);
}

__global__ void compute_kernel(const std::uint32_t* x, const std::uint32_t* y, Outputs* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) compute(x[i], y[i], out[i]);
}

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipping the device run (this binary compiled and linked)\n");
    return 77;
  }
  const int n = 1 << 20;
  std::vector<std::uint32_t> x(n), y(n);
  std::uint64_t state = 12345;
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<std::uint32_t>(stochastic_random(state, 2 * i));
    y[i] = static_cast<std::uint32_t>(stochastic_random(state, 2 * i + 1));
    if (i % 3 == 0) x[i] = (x[i] & 0x8FFFFFFFu) | 0x30000000u;  // within fp16 reach
  }
  std::uint32_t *dx, *dy;
  Outputs* dout;
  cudaCheck(cudaMalloc(&dx, n * sizeof(std::uint32_t)));
  cudaCheck(cudaMalloc(&dy, n * sizeof(std::uint32_t)));
  cudaCheck(cudaMalloc(&dout, n * sizeof(Outputs)));
  cudaCheck(cudaMemcpy(dx, x.data(), n * sizeof(std::uint32_t), cudaMemcpyHostToDevice));
  cudaCheck(cudaMemcpy(dy, y.data(), n * sizeof(std::uint32_t), cudaMemcpyHostToDevice));
  compute_kernel<<<(n + 255) / 256, 256>>>(dx, dy, dout, n);
  cudaCheck(cudaGetLastError());
  std::vector<Outputs> device(n);
  cudaCheck(cudaMemcpy(device.data(), dout, n * sizeof(Outputs), cudaMemcpyDeviceToHost));
  long mismatches = 0;
  for (int i = 0; i < n; ++i) {
    Outputs host{};
    compute(x[i], y[i], host);
    const Outputs& d = device[i];
    const bool same = host.cast_fp16 == d.cast_fp16 && host.cast_bf16 == d.cast_bf16 && host.cast_flags == d.cast_flags &&
                      host.convert_fp16 == d.convert_fp16 && host.add_fp16 == d.add_fp16 && host.mul_bf16 == d.mul_bf16 &&
                      host.div_fp32 == d.div_fp32 && host.sqrt_fp16 == d.sqrt_fp16 && host.fma_fp16 == d.fma_fp16 &&
                      host.round_int == d.round_int && host.to_int == d.to_int && host.flags == d.flags &&
                      host.slot == d.slot && host.less == d.less && host.min_number == d.min_number;
    if (!same && ++mismatches <= 5) std::printf("MISMATCH at x=%08x y=%08x\n", x[i], y[i]);
  }
  std::printf("%s: %d inputs, %ld mismatches between device and host\n", mismatches == 0 ? "DEVICE OK" : "DEVICE FAIL", n, mismatches);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(dout);
  return mismatches == 0 ? 0 : 1;
}
