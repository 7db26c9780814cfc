// The training engine's kernels against their CPU twins, on the device. Bit for bit where the math
// is the same operations (the recorded cast: values, histogram, outcome counts, every mode; the
// non-finite check; the master-weight update; the bias add; ReLU; the scaler update; the fused
// forward epilogue against the composition of its launches). Stated where
// CUDA's float functions are not glibc's: tanh / GELU and their derivatives, and the softmax
// cross-entropy (expf, logf) -- the largest difference in units in the last place is printed and
// held to at most 4 ulp; GELU and the derivatives, where nearly equal terms cancel, in float32
// epsilons of their terms, at most 8. Sums in another order (the bias gradient): within 1e-5 relative of a
// float64 sum. Every CUDA call is checked. Needs a device to run.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "verdict.hpp"
#include "fpscope/core/bulk.hpp"
#include "fpscope/core/cast.hpp"
#include "fpscope/gpu/activation.hpp"
#include "fpscope/gpu/cast_record.hpp"
#include "fpscope/gpu/cast_record_element_device.cuh"
#include "fpscope/gpu/cuda_device_ops.hpp"
#include "fpscope/gpu/cuda_kernels.hpp"
#include "fpscope/gpu/device_ops.hpp"
#include "fpscope/gpu/loss_scaler.hpp"
#include "fpscope/gpu/sgd_update.hpp"
#include "fpscope/gpu/softmax_cross_entropy.hpp"
#include "launch.hpp"  // cudaCheck: the CUDA backend's one check

using namespace fpscope;

namespace {


// A device copy of a host vector, freed on scope exit.
template <typename T>
struct Device {
  T* data = nullptr;
  std::size_t size = 0;
  explicit Device(std::size_t n) : size(n) { cudaCheck(cudaMalloc(&data, std::max<std::size_t>(n, 1) * sizeof(T))); }
  explicit Device(const std::vector<T>& host) : Device(host.size()) { cudaCheck(cudaMemcpy(data, host.data(), size * sizeof(T), cudaMemcpyHostToDevice)); }
  Device(const Device&) = delete;
  ~Device() { cudaFree(data); }
  std::vector<T> read() const {
    cudaCheck(cudaDeviceSynchronize());
    std::vector<T> host(size);
    cudaCheck(cudaMemcpy(host.data(), data, size * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  void zero() { cudaCheck(cudaMemset(data, 0, size * sizeof(T))); }
};

using fpscope::test::failures;
using fpscope::test::verdict;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Units in the last place between two floats of the same sign (NaN against NaN is 0).
double ulps(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return 0;
  if (std::isnan(a) || std::isnan(b)) return 1e30;
  const auto ordered = [](float v) {
    const std::int64_t bits = float_bits(v);
    return (bits & 0x80000000) != 0 ? -(bits & 0x7FFFFFFF) : bits;
  };
  return static_cast<double>(std::llabs(ordered(a) - ordered(b)));
}

double largest_ulps(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, ulps(a[i], b[i]));
  return worst;
}

// Every float32 input (2^32 of them) through the conversion instruction's path and through the
// emulator's, on the device: counts the inputs whose narrow bits, widened value, histogram slot or
// outcome differ, and keeps the first such input.
template <bool Bf16>  // (a kernel template cannot take the Format itself: nvcc's host stubs)
__global__ void compare_instruction_path(unsigned long long* mismatches, unsigned int* first_mismatch) {
  constexpr Format F = Bf16 ? formats::bf16 : formats::fp16;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  unsigned int local = 0;
  for (std::uint64_t v = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; v < (std::uint64_t{1} << 32); v += stride) {
    const auto u = static_cast<std::uint32_t>(v);
    const CastRecordElement a = cast_record_element_by_instruction<F>(u);
    const CastRecordElement b = cast_record_element<F, RoundingMode::nearest_even>(u, 0, 0, 0);
    if (a.narrow != b.narrow || a.rounded != b.rounded || a.slot != b.slot || a.flushed_to_zero != b.flushed_to_zero ||
        a.made_subnormal != b.made_subnormal || a.overflowed != b.overflowed) {
      ++local;
      atomicMin(first_mismatch, u);
    }
  }
  if (local != 0) atomicAdd(mismatches, static_cast<unsigned long long>(local));
}

}  // namespace

int main() {
  std::string why;
  if (cuda::device_count(&why) == 0) {
    std::printf("no CUDA device (%s): skipping the device run (this binary compiled and linked)\n", why.c_str());
    return 77;
  }
  try {
    std::mt19937 rng(3);
    const std::size_t n = 1 << 20;
    std::vector<float> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = bits_float(i % 4 == 0 ? rng() : (rng() & 0x807FFFFFu) | ((90u + rng() % 60u) << 23));

    // The conversion instructions against the emulator, exhaustively.
    for (const bool bf16 : {false, true}) {
      Device<unsigned long long> mismatches(1);
      Device<unsigned int> first(std::vector<unsigned int>{0xFFFFFFFFu});
      mismatches.zero();
      if (bf16) compare_instruction_path<true><<<4096, 256>>>(mismatches.data, first.data);
      else compare_instruction_path<false><<<4096, 256>>>(mismatches.data, first.data);
      cudaCheck(cudaGetLastError());
      const unsigned long long count = mismatches.read()[0];
      std::printf("     first differing input: 0x%08X\n", count == 0 ? 0u : first.read()[0]);
      verdict(count == 0, std::string("every float32 -> ") + (bf16 ? "bf16" : "fp16") + " RNE: the instruction path is the emulator's (mismatches)",
              static_cast<double>(count));
    }

    // The recorded cast, every mode, fp16 and bf16.
    for (const bool bf16 : {false, true})
      for (const RoundingMode mode : all_rounding_modes) {
        Context ctx;  // the CPU twin; stochastic: seed 7, words from index 1000, as the device is asked
        ctx.rounding = mode;
        ctx.stochastic_seed = 7;
        ctx.stochastic_counter = 1000;
        std::vector<float> expected(n);
        ExponentHistogram histogram;
        CastCounts counts;
        cast_and_record(bf16 ? formats::bf16 : formats::fp16, values, expected, ctx, histogram, counts);
        Device<float> in(values), out(n);
        Device<unsigned long long> bins(bin_slot_count), outcome(3);
        bins.zero();
        outcome.zero();
        cuda::cast_and_record(in.data, out.data, n, bf16, mode, {bins.data, outcome.data}, nullptr, {7, nullptr, 1000});
        cudaCheck(cudaGetLastError());
        const std::vector<unsigned long long> got_bins = bins.read(), got_counts = outcome.read();
        bool same_histogram = got_bins[bin_zero] == histogram.zero_count() && got_bins[bin_infinity] == histogram.infinity_count() &&
                              got_bins[bin_nan] == histogram.nan_count();
        for (int b = min_binade; b <= max_binade; ++b) same_histogram = same_histogram && got_bins[b - min_binade] == histogram.count(b);
        const bool same_counts = got_counts[0] == counts.flushed_to_zero && got_counts[1] == counts.made_subnormal && got_counts[2] == counts.overflowed;
        const std::string label = std::string(bf16 ? "bf16 " : "fp16 ") + std::to_string(static_cast<int>(mode));
        verdict(same_bits(out.read(), expected) && same_histogram && same_counts, "recorded cast " + label + ": values, every bin, outcome counts");

        // Unrecorded, with the 16-bit patterns the GEMMs read: each pattern is the expected value.
        Device<float> out2(n);
        Device<std::uint16_t> packed(n);
        cuda::cast_and_record(in.data, out2.data, n, bf16, mode, {}, nullptr, {7, nullptr, 1000}, packed.data);
        const std::vector<std::uint16_t> patterns = packed.read();
        bool patterns_right = true;
        for (std::size_t i = 0; i < n && patterns_right; ++i) {
          std::uint32_t flags = 0;
          const CastOptions options{};
          const std::uint32_t widened = bf16 ? cast_to_f32<formats::bf16>(patterns[i], options, flags) : cast_to_f32<formats::fp16>(patterns[i], options, flags);
          patterns_right = widened == float_bits(expected[i]) || (std::isnan(expected[i]) && std::isnan(bits_float(widened)));
        }
        verdict(same_bits(out2.read(), expected) && patterns_right, "unrecorded cast " + label + ": values, and 16-bit patterns that are those values");

        // Pointers off the 16-byte grid and an odd length (the one-element path): element i of the
        // call still draws word 1000 + i.
        Context ctx_shifted = ctx;
        ctx_shifted.stochastic_counter = 1000;
        std::vector<float> expected_shifted(n - 1);
        ExponentHistogram histogram_shifted;
        CastCounts counts_shifted;
        cast_and_record(bf16 ? formats::bf16 : formats::fp16, std::span<const float>(values).subspan(1), expected_shifted, ctx_shifted,
                        histogram_shifted, counts_shifted);
        bins.zero();
        outcome.zero();
        cuda::cast_and_record(in.data + 1, out2.data + 1, n - 1, bf16, mode, {bins.data, outcome.data}, nullptr, {7, nullptr, 1000});
        const std::vector<float> shifted_all = out2.read();
        const std::vector<float> shifted(shifted_all.begin() + 1, shifted_all.end());
        const std::vector<unsigned long long> shifted_bins = bins.read(), shifted_counts = outcome.read();
        bool shifted_histogram = shifted_bins[bin_zero] == histogram_shifted.zero_count() && shifted_bins[bin_nan] == histogram_shifted.nan_count();
        for (int b = min_binade; b <= max_binade; ++b) shifted_histogram = shifted_histogram && shifted_bins[b - min_binade] == histogram_shifted.count(b);
        verdict(same_bits(shifted, expected_shifted) && shifted_histogram && shifted_counts[0] == counts_shifted.flushed_to_zero &&
                    shifted_counts[2] == counts_shifted.overflowed,
                "recorded cast " + label + ", unaligned, odd length: values, bins, counts");
      }

    // The histogram without a cast (the fp32 policy).
    {
      ExponentHistogram histogram;
      histogram.add(values);
      Device<float> in(values);
      Device<unsigned long long> bins(bin_slot_count);
      bins.zero();
      cuda::record_histogram(in.data, n, {bins.data});
      const std::vector<unsigned long long> got = bins.read();
      bool same = got[bin_zero] == histogram.zero_count() && got[bin_infinity] == histogram.infinity_count() && got[bin_nan] == histogram.nan_count();
      for (int b = min_binade; b <= max_binade; ++b) same = same && got[b - min_binade] == histogram.count(b);
      verdict(same, "histogram of float32 values: every bin");
    }

    // The non-finite check, on finite data and with one inf or NaN at either end.
    {
      std::vector<float> finite(100003);
      for (float& v : finite) v = std::ldexp(static_cast<float>(rng() % 1000) - 500.0f, static_cast<int>(rng() % 60) - 30);
      bool all_right = true;
      for (int variant = 0; variant < 5; ++variant) {
        std::vector<float> g = finite;
        if (variant == 1) g.front() = INFINITY;
        if (variant == 2) g.back() = NAN;
        if (variant == 3) g[g.size() / 2] = -INFINITY;
        if (variant == 4) g[g.size() - 2] = std::numeric_limits<float>::max();  // finite: must not count
        const bool twin = std::any_of(g.begin(), g.end(), gradient_non_finite);
        Device<float> device_g(g);
        Device<int> found(1);
        found.zero();
        cuda::find_non_finite(device_g.data, g.size(), found.data);
        all_right = all_right && (found.read()[0] != 0) == twin && twin == (variant >= 1 && variant <= 3);
      }
      verdict(all_right, "non-finite check: finite, +inf first, NaN last, -inf inside, max finite");
    }

    // The update: device against sgd_update_element, a power-of-two scale and another, and a skip.
    for (const float scale : {1024.0f, 3000.0f}) {
      std::vector<float> w(70001), g(w.size());
      for (std::size_t i = 0; i < w.size(); ++i) {
        w[i] = values[i] * 1e-20f;
        g[i] = std::ldexp(static_cast<float>(static_cast<int>(rng() % 20001) - 10000), static_cast<int>(rng() % 20));
        if (!std::isfinite(w[i])) w[i] = 0.5f;
      }
      const float learning_rate = 0.03f;
      std::vector<float> twin = w;
      const float factor = sgd_step_factor(learning_rate, scale);
      for (std::size_t i = 0; i < w.size(); ++i) twin[i] = sgd_update_element(w[i], g[i], factor);
      Device<float> device_w(w), device_g(g), step_scale(std::vector<float>{scale});
      Device<int> skip(std::vector<int>{0}), skipped(std::vector<int>{1});
      cuda::sgd_update(device_w.data, device_g.data, w.size(), learning_rate, step_scale.data, skip.data);
      verdict(same_bits(device_w.read(), twin), "update w -= (lr / S) g, S = " + std::to_string(static_cast<int>(scale)) + ": every weight's bits");
      Device<float> kept(w);
      cuda::sgd_update(kept.data, device_g.data, w.size(), learning_rate, step_scale.data, skipped.data);
      verdict(same_bits(kept.read(), w), "update on a skipped step leaves every weight");
    }

    // Bias add on a column-major matrix (rows x cols): exact.
    {
      const int rows = 37, cols = 53;
      std::vector<float> z(static_cast<std::size_t>(rows) * cols), bias(cols);
      for (float& v : z) v = static_cast<float>(rng() % 2000) / 7.0f;
      for (float& v : bias) v = static_cast<float>(rng() % 2000) / 13.0f;
      std::vector<float> twin = z;
      for (int c = 0; c < cols; ++c)
        for (int r = 0; r < rows; ++r) twin[static_cast<std::size_t>(c) * rows + r] += bias[static_cast<std::size_t>(c)];
      Device<float> device_z(z), device_bias(bias);
      cuda::add_bias(device_z.data, device_bias.data, rows, cols);
      verdict(same_bits(device_z.read(), twin), "bias add, column-major 37 x 53: every element's bits");
    }

    // A layer's forward epilogue in one kernel against DeviceOps' composition of its four
    // launches on the same device: every output's bits (z, its patterns, the activation's float32,
    // its rounded values and patterns), both casts' bins and outcome counts and both readings. The
    // MLP's layout (bias per column; relu, tanh, GELU, and its last layer without an activation)
    // and the GPT's (bias per row, GELU rounded in place, both casts recorded); fp16 and bf16;
    // nearest even and stochastic; values from 2^-30 to 2^20 (flushes and fp16 overflows among them).
    {
      const std::unique_ptr<DeviceOps> ops = make_cuda_device_ops();
      const int rows = 97, cols = 131;
      const std::size_t count = static_cast<std::size_t>(rows) * cols;
      std::vector<float> z(count), bias(static_cast<std::size_t>(std::max(rows, cols)));
      for (float& v : z) v = std::ldexp(static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 1000.0f, static_cast<int>(rng() % 51) - 30);
      for (float& v : bias) v = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 3000.0f;
      struct Case {
        const char* name;
        bool bias_per_column, activate;
        Activation activation;
        bool keep_activation, record_activation;
      };
      const Case cases[] = {{"MLP relu", true, true, Activation::relu, true, false},
                            {"MLP tanh", true, true, Activation::tanh, true, false},
                            {"MLP GELU", true, true, Activation::gelu, true, false},
                            {"MLP last layer", true, false, Activation::relu, false, false},
                            {"GPT mlp.fc", false, true, Activation::gelu, false, true}};
      for (const Case& c : cases)
        for (const bool bf16 : {false, true})
          for (const RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::stochastic}) {
            // Everything the epilogue writes, twice: [0] the fused kernel's, [1] the composition's.
            struct Outputs {
              Device<float> z, a, a_rounded;
              Device<std::uint16_t> z16, a16;
              Device<unsigned long long> z_bins, z_counts, a_bins, a_counts;
              Device<std::uint32_t> z_largest, a_largest;
              explicit Outputs(const std::vector<float>& values, std::size_t n)
                  : z(values), a(n), a_rounded(n), z16(n), a16(n), z_bins(bin_slot_count), z_counts(3), a_bins(bin_slot_count), a_counts(3),
                    z_largest(1), a_largest(1) {
                a.zero(), a_rounded.zero(), z16.zero(), a16.zero(), z_bins.zero(), z_counts.zero(), a_bins.zero(), a_counts.zero();
                z_largest.zero(), a_largest.zero();
              }
            };
            Outputs fused(z, count), composed(z, count);
            Device<float> device_bias(bias);
            Device<std::uint64_t> counter(std::vector<std::uint64_t>{1000});  // the run's counter word: z draws words 1000 on
            const auto epilogue = [&](Outputs& o) {
              ForwardEpilogue e;
              e.z = o.z.data, e.bias = device_bias.data, e.rows = rows, e.cols = cols, e.bias_per_column = c.bias_per_column;
              e.bf16 = bf16, e.mode = mode;
              e.z_slots = {o.z_bins.data, o.z_counts.data, o.z_largest.data}, e.z_random = {7, counter.data, 0}, e.z16 = o.z16.data;
              e.activate = c.activate, e.activation = c.activation, e.a_random = {7, counter.data, count};
              if (c.keep_activation) e.a = o.a.data;
              e.a_rounded = c.keep_activation ? nullptr : o.a_rounded.data;
              e.a16 = o.a16.data;
              if (c.record_activation) e.a_slots = {o.a_bins.data, o.a_counts.data, o.a_largest.data};
              return e;
            };
            ops->forward_epilogue(epilogue(fused));
            ops->compose_forward_epilogue(epilogue(composed));
            const bool same = same_bits(fused.z.read(), composed.z.read()) && fused.z16.read() == composed.z16.read() &&
                              same_bits(fused.a.read(), composed.a.read()) && same_bits(fused.a_rounded.read(), composed.a_rounded.read()) &&
                              fused.a16.read() == composed.a16.read() && fused.z_bins.read() == composed.z_bins.read() &&
                              fused.z_counts.read() == composed.z_counts.read() && fused.a_bins.read() == composed.a_bins.read() &&
                              fused.a_counts.read() == composed.a_counts.read() && fused.z_largest.read() == composed.z_largest.read() &&
                              fused.a_largest.read() == composed.a_largest.read();
            std::vector<unsigned long long> recorded = fused.z_bins.read();
            const unsigned long long counted = std::accumulate(recorded.begin(), recorded.end(), 0ull);
            verdict(same && counted == count, std::string("forward epilogue, ") + c.name + (bf16 ? ", bf16, " : ", fp16, ") +
                                                  (mode == RoundingMode::stochastic ? "stochastic" : "nearest even") +
                                                  ": one kernel is the composition's outputs, bins, counts and readings");
          }
    }

    // Activations and their derivatives: the same functions over a float on both sides
    // (activation.hpp, elementwise_math.hpp), every element's bits.
    {
      std::vector<float> z(200000);
      for (std::size_t i = 0; i < z.size(); ++i) z[i] = (static_cast<float>(rng() % 2000001) - 1000000.0f) * 1e-5f * (i % 3 == 0 ? 30.0f : 1.0f);
      for (const Activation activation : {Activation::relu, Activation::gelu, Activation::tanh}) {
        std::vector<float> forward(z.size()), backward(z.size(), 1.0f);
        for (std::size_t i = 0; i < z.size(); ++i) {
          forward[i] = activate(activation, z[i]);
          backward[i] *= activation_derivative(activation, z[i]);
        }
        Device<float> device_z(z), device_out(z.size()), device_gradient(std::vector<float>(z.size(), 1.0f));
        cuda::activation_forward(device_z.data, device_out.data, z.size(), activation);
        cuda::activation_backward(device_z.data, device_gradient.data, z.size(), activation);
        const std::vector<float> got_forward = device_out.read(), got_backward = device_gradient.read();
        verdict(same_bits(got_forward, forward) && same_bits(got_backward, backward),
                std::string(activation == Activation::relu ? "relu" : activation == Activation::gelu ? "gelu" : "tanh") + " and its derivative: every element's bits");
      }
    }

    // Softmax cross-entropy of column-major logits (rows x cols), scale read on the device.
    {
      const int rows = 93, cols = 17;
      std::vector<float> logits(static_cast<std::size_t>(rows) * cols);
      for (float& v : logits) v = (static_cast<float>(rng() % 20001) - 10000.0f) * 1e-3f;
      std::vector<int> labels(rows);
      for (int& label : labels) label = static_cast<int>(rng() % cols);
      LossScalerState state;
      state.scale = 4096.0;
      const float loss_weight = 0.75f;
      std::vector<float> twin_gradient(logits.size()), twin_loss(rows);
      const float factor = static_cast<float>(state.scale) * loss_weight / static_cast<float>(rows);
      for (int r = 0; r < rows; ++r)
        twin_loss[static_cast<std::size_t>(r)] = softmax_cross_entropy_row(logits.data() + r, cols, rows, labels[static_cast<std::size_t>(r)], factor,
                                                                           twin_gradient.data() + r);
      Device<float> device_logits(logits), gradient(logits.size()), row_loss(static_cast<std::size_t>(rows)), total(1);
      Device<int> device_labels(labels);
      Device<LossScalerState> device_state(std::vector<LossScalerState>{state});
      cuda::softmax_cross_entropy(device_logits.data, device_labels.data, rows, cols, device_state.data, loss_weight, gradient.data,
                                  row_loss.data);
      // The gradient's exponentials are elementwise_math.hpp's on both sides: its bits. The loss
      // takes the platform's logf (glibc's, CUDA's), each within an ulp or two.
      const double loss_ulps = largest_ulps(row_loss.read(), twin_loss);
      verdict(same_bits(gradient.read(), twin_gradient), "softmax cross-entropy gradient: every element's bits");
      verdict(loss_ulps <= 4, "softmax cross-entropy row losses: largest difference from the CPU, ulp", loss_ulps);
      double sum = 0;
      for (const float v : row_loss.read()) sum += v;
      cuda::ordered_sum(row_loss.data, rows, total.data);
      verdict(total.read()[0] == static_cast<float>(sum), "ordered sum of the row losses: the float64 sum in order, rounded once");
    }

    // Column sums of a column-major matrix (the bias gradient), against a float64 sum.
    {
      for (const auto& [rows, cols] : {std::pair{64, 10}, std::pair{1000, 3}, std::pair{7, 300}}) {
        std::vector<float> m(static_cast<std::size_t>(rows) * cols);
        for (float& v : m) v = (static_cast<float>(rng() % 20001) - 10000.0f) * 1e-4f;
        Device<float> device_m(m), sums(static_cast<std::size_t>(cols));
        cuda::column_sums(device_m.data, rows, cols, sums.data);
        const std::vector<float> got = sums.read();
        double worst = 0;
        for (int c = 0; c < cols; ++c) {
          double exact = 0, magnitude = 0;
          for (int r = 0; r < rows; ++r) {
            exact += m[static_cast<std::size_t>(c) * rows + r];
            magnitude += std::abs(m[static_cast<std::size_t>(c) * rows + r]);
          }
          worst = std::max(worst, std::abs(got[static_cast<std::size_t>(c)] - exact) / magnitude);
        }
        verdict(worst <= 1e-5, "column sums " + std::to_string(rows) + " x " + std::to_string(cols) + ": error over the sum of magnitudes", worst);
      }
    }

    // Scaler update on the device against LossScaler on a scripted pattern, and the step's scale.
    {
      LossScalerConfig config = LossScalerConfig::deepspeed();
      config.growth_interval = 3;
      LossScaler host(config);
      Device<LossScalerState> state(std::vector<LossScalerState>{host.state()});
      Device<int> flag(1), skip(1);
      Device<float> step_scale(1);
      bool scaler_ok = true;
      for (const int bad : {0, 0, 1, 1, 1, 0, 0, 0, 1, 0}) {
        cudaCheck(cudaMemcpy(flag.data, &bad, sizeof(int), cudaMemcpyHostToDevice));
        const float scale_before = static_cast<float>(host.state().scale);
        cuda::update_scaler(config, state.data, flag.data, skip.data, step_scale.data);
        const bool host_skip = host.update(bad != 0);
        scaler_ok = scaler_ok && state.read()[0] == host.state() && (skip.read()[0] != 0) == host_skip && step_scale.read()[0] == scale_before;
      }
      verdict(scaler_ok, "scaler update: state, skip and the step's scale, 10 scripted steps");
    }
  } catch (const std::exception& e) {
    std::printf("FAIL %s\n", e.what());
    return 1;
  }
  std::printf("%s\n", failures == 0 ? "GPU KERNELS OK" : "GPU KERNELS DIFFER");
  return failures == 0 ? 0 : 1;
}
