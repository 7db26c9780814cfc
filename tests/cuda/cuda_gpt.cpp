// The GPT on the CUDA backend, in two parts, needing a device (exit 77 with a sentence otherwise):
//
// 1. Each CUDA DeviceOps operation against the host twin's (host_device_ops.cpp) on the same
//    random inputs. Exact (bit for bit) where both run the same FPSCOPE_HD function with the same
//    correctly rounded float operations (--fmad=false on the kernels, -ffp-contract=off on the
//    twin): the casts and records, embeddings, LayerNorm and its backward, token sums, bias,
//    residual additions, triangle packing, the softmax's backward, the loss sum, the non-finite
//    check, the scaler, SGD, the optimizer's sum of squares, step and update. Within a stated
//    tolerance where CUDA's expf / erff / logf may differ from glibc's by a few ulp (the causal
//    softmax, GELU, the cross-entropy: 1e-5 relative, or 1e-7 absolute near zero) or the order of
//    a sum is cuBLAS's (the products: 1e-5 of the sum of |terms|).
// 2. DeviceGptTrainer on the CUDA ops against the same trainer on the host twin (which
//    tests/gpu/test_device_gpt.cpp holds to the CPU backend's GptTrainer), step by step, over
//    precisions and rounding modes, recorded and unrecorded steps, an injected NaN and a restored
//    state: the same tensors, scales, skips and stochastic counter exactly; losses within 1e-6
//    (fp32) and 1e-4 (bf16, fp16) relative; histograms within 3% of a tensor or 16 elements.
//
// Prints every measured difference.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "counterfactual_check.hpp"
#include "verdict.hpp"
#include "fpscope/core/names.hpp"
#include "fpscope/gpu/block_element.hpp"
#include "fpscope/gpu/device_gpt.hpp"
#include "fpscope/gpu/gemm_recipe.hpp"
#ifndef FPSCOPE_DEVICE_TEST_ON_HOST_TWIN
#include "fpscope/gpu/cuda_device_ops.hpp"
#include "fpscope/gpu/cuda_mlp.hpp"
#endif
#include "fpscope/gpu/gpt_element.hpp"
#include "fpscope/gpu/host_device_ops.hpp"

using namespace fpscope;

namespace {

// The device under test and what its trainer is held to: the CUDA ops against the host twin's; or
// -- built as device_gpt_on_host_twin, in every CI run -- the twin standing in for the device
// (part 1 then compares the twin with itself, part 2 the twin-driven trainer with the CPU
// backend's GptTrainer), so that this test's own logic runs where no GPU is.
#ifdef FPSCOPE_DEVICE_TEST_ON_HOST_TWIN
std::unique_ptr<DeviceOps> device_ops() { return make_host_device_ops(); }
bool device_answers() { return true; }
std::unique_ptr<TrainerBackend> reference_trainer(const GptShape& shape, const TrainingConfig& config) {
  return std::make_unique<GptTrainer>(shape, config);
}
#else
std::unique_ptr<DeviceOps> device_ops() { return make_cuda_device_ops(); }
bool device_answers() { return cuda_device_available(); }
std::unique_ptr<TrainerBackend> reference_trainer(const GptShape& shape, const TrainingConfig& config) {
  return std::make_unique<DeviceGptTrainer>(shape, config, make_host_device_ops());
}
#endif

using fpscope::test::failures;
using fpscope::test::verdict;

// The same data on both sides: host vectors copied into each DeviceOps' memory.
template <typename T>
struct Pair {
  DeviceOps& gpu;
  DeviceOps& twin;
  std::size_t n;
  T* g;
  T* t;
  Pair(DeviceOps& a, DeviceOps& b, const std::vector<T>& values) : gpu(a), twin(b), n(values.size()) {
    g = static_cast<T*>(gpu.allocate(n * sizeof(T)));
    t = static_cast<T*>(twin.allocate(n * sizeof(T)));
    gpu.upload(g, values.data(), n * sizeof(T));
    twin.upload(t, values.data(), n * sizeof(T));
  }
  Pair(DeviceOps& a, DeviceOps& b, std::size_t count) : Pair(a, b, std::vector<T>(count, T{})) {}
  ~Pair() {
    gpu.release(g);
    twin.release(t);
  }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  std::vector<T> from_gpu() const {
    std::vector<T> v(n);
    gpu.download(v.data(), g, n * sizeof(T));
    return v;
  }
  std::vector<T> from_twin() const {
    std::vector<T> v(n);
    twin.download(v.data(), t, n * sizeof(T));
    return v;
  }
  bool same_bits() const {
    const std::vector<T> a = from_gpu(), b = from_twin();
    return std::memcmp(a.data(), b.data(), n * sizeof(T)) == 0;
  }
  // The largest |a - b| over max(|b| * relative, absolute), for float data.
  double worst(double relative, double absolute) const {
    const std::vector<T> a = from_gpu(), b = from_twin();
    double w = 0;
    for (std::size_t i = 0; i < n; ++i)
      w = std::max(w, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])) / std::max(std::abs(static_cast<double>(b[i])) * relative, absolute));
    return w;
  }
};

std::vector<float> normal(std::size_t n, unsigned seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void check_operations(DeviceOps& gpu, DeviceOps& twin) {
  const int D = 24, T = 12, B = 3, N = B * T, V = 40, H = 2;
  const std::size_t ND = static_cast<std::size_t>(D) * N, triangles = static_cast<std::size_t>(B) * H;
  const std::size_t P = triangles * triangle_start(T), squares = triangles * T * T;
  std::vector<int> token_ids(N), targets(N);
  std::mt19937 rng(4);
  for (int n = 0; n < N; ++n) token_ids[static_cast<std::size_t>(n)] = static_cast<int>(rng() % V), targets[static_cast<std::size_t>(n)] = static_cast<int>(rng() % V);
  Pair<int> tokens(gpu, twin, token_ids), target(gpu, twin, targets);

  // A per-tensor FP8 operand: its amax (exact in any order), and its scaled, saturating cast in
  // E4M3 and E5M2 (exact, with the counts), over values that flush, saturate or are special.
  {
    std::vector<float> values = normal(5000, 8, 50.0f);
    values[1] = 1e-30f, values[2] = 3e38f, values[3] = 0.0f, values[4] = -0.0f, values[5] = std::numeric_limits<float>::infinity();
    Pair<float> in(gpu, twin, values);
    Pair<std::uint32_t> largest(gpu, twin, 1);
    gpu.amax_bits(in.g, values.size(), largest.g);
    twin.amax_bits(in.t, values.size(), largest.t);
    verdict(largest.same_bits(), "amax_bits exact");
    values[6] = std::nanf("");
    Pair<float> with_nan(gpu, twin, values);
    gpu.amax_bits(with_nan.g, values.size(), largest.g);
    twin.amax_bits(with_nan.t, values.size(), largest.t);
    verdict(largest.same_bits(), "amax_bits exact with a NaN");
    Context ctx;
    Pair<std::uint64_t> counter(gpu, twin, std::vector<std::uint64_t>{4000});  // the run's counter word: 4000 + 321 = word 4321
    for (const bool e5m2 : {false, true})
      for (const RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::toward_positive, RoundingMode::stochastic}) {
        ctx.rounding = mode;
        Pair<float> out(gpu, twin, values.size());
        Pair<unsigned long long> counts(gpu, twin, 3);
        gpu.fp8_quantize(with_nan.g, out.g, values.size(), 13.5f, e5m2, mode, fp8_cast_options(ctx), {9, counter.g, 321}, counts.g);
        twin.fp8_quantize(with_nan.t, out.t, values.size(), 13.5f, e5m2, mode, fp8_cast_options(ctx), {9, counter.t, 321}, counts.t);
        verdict(out.same_bits() && counts.same_bits(), std::string("fp8_quantize exact, values and counts, ") + (e5m2 ? "e5m2 " : "e4m3 ") + rounding_mode_name(mode));
      }
  }

  // A block-scaled operand: quantized and dequantized with its statistics, exact, along both axes
  // (blocks that end short), MXFP8, MXFP4 (stochastic), MXINT8 and NVFP4 (its tensor scale found on the device).
  for (const BlockFormat& format : {block_formats::mxfp8_e4m3, block_formats::mxfp4, block_formats::mxint8, block_formats::nvfp4})
    for (const BlockAxis axis : {BlockAxis::rows, BlockAxis::cols}) {
      std::vector<float> values = normal(45 * 70, 15, 30.0f);
      values[0] = 0.0f, values[7] = 1e-41f, values[99] = std::numeric_limits<float>::infinity();
      const BlockLayout layout{45, 70, axis, format.block_size};
      Context ctx;
      ctx.rounding = format.elements == BlockFormat::Elements::int8 ? RoundingMode::nearest_even : RoundingMode::stochastic;
      Pair<float> in(gpu, twin, values), out(gpu, twin, values.size());
      Pair<unsigned long long> counters(gpu, twin, block_counter_count);
      Pair<std::uint32_t> amax(gpu, twin, 1);
      Pair<std::uint64_t> counter(gpu, twin, std::vector<std::uint64_t>{70});  // words 77 on
      gpu.block_quantize(in.g, out.g, layout, format, ScaleRule::floor, ctx, {4, counter.g, 7}, counters.g, amax.g);
      twin.block_quantize(in.t, out.t, layout, format, ScaleRule::floor, ctx, {4, counter.t, 7}, counters.t, amax.t);
      verdict(out.same_bits() && counters.same_bits(),
              "block_quantize exact, values and statistics, " + block_format_name(format) + (axis == BlockAxis::rows ? " along rows" : " down columns"));
    }

  // Casts in every mode, both formats, recorded.
  for (const bool bf16 : {false, true})
    for (const RoundingMode mode : {RoundingMode::nearest_even, RoundingMode::toward_zero, RoundingMode::stochastic}) {
      std::vector<float> values = normal(5000, 7, 300.0f);
      values[1] = 1e-30f, values[2] = 7e4f, values[3] = std::nanf("");
      Pair<float> in(gpu, twin, values), out(gpu, twin, values.size());
      Pair<std::uint16_t> packed(gpu, twin, values.size());
      Pair<unsigned long long> slots(gpu, twin, bin_slot_count + 3);
      Pair<std::uint32_t> largest(gpu, twin, 1);
      gpu.cast(in.g, out.g, packed.g, values.size(), bf16, mode, {slots.g, slots.g + bin_slot_count, largest.g}, {9, nullptr, 1234});
      twin.cast(in.t, out.t, packed.t, values.size(), bf16, mode, {slots.t, slots.t + bin_slot_count, largest.t}, {9, nullptr, 1234});
      verdict(out.same_bits() && packed.same_bits() && slots.same_bits() && largest.same_bits(),
              std::string("cast to ") + (bf16 ? "bf16 " : "fp16 ") + rounding_mode_name(mode) + ": values, patterns, histogram, counts and reading exact");
      // Unrecorded, in place, the reading still the input's (taken before each value is rounded).
      Pair<float> again(gpu, twin, values);
      gpu.cast(again.g, again.g, nullptr, values.size(), bf16, mode, {nullptr, nullptr, largest.g}, {9, nullptr, 1234});
      twin.cast(again.t, again.t, nullptr, values.size(), bf16, mode, {nullptr, nullptr, largest.t}, {9, nullptr, 1234});
      verdict(again.same_bits() && largest.same_bits(), std::string("cast in place, unrecorded, watched: values and reading exact, ") + rounding_mode_name(mode));
      // fp16-pure's re-cast: its words from the counter's device word, done only where the flag is 0;
      // then the counter moved on by the words a step drew, and those drawn unless it skipped.
      for (const int skipped : {0, 1}) {
        Pair<float> recast(gpu, twin, values);
        Pair<int> skip(gpu, twin, std::vector<int>{skipped});
        Pair<std::uint64_t> counter(gpu, twin, std::vector<std::uint64_t>{1000});
        gpu.cast_unless_skipped(recast.g, recast.g, values.size(), bf16, mode, {9, counter.g, 234}, skip.g);
        twin.cast_unless_skipped(recast.t, recast.t, values.size(), bf16, mode, {9, counter.t, 234}, skip.t);
        gpu.advance_counter(counter.g, 5000, 300, skip.g);
        twin.advance_counter(counter.t, 5000, 300, skip.t);
        const auto bits_of = [](const std::vector<float>& v) {  // NaNs compared as bits
          std::vector<std::uint32_t> bits(v.size());
          std::memcpy(bits.data(), v.data(), v.size() * sizeof(float));
          return bits;
        };
        const bool as_cast = bits_of(recast.from_gpu()) == bits_of(again.from_gpu()), untouched = bits_of(recast.from_gpu()) == bits_of(values);
        verdict(recast.same_bits() && counter.same_bits() && counter.from_gpu()[0] == (skipped ? 6000u : 6300u) && (skipped ? untouched : as_cast),
                std::string("re-cast unless skipped (flag ") + std::to_string(skipped) + ") and the counter's advance, " + rounding_mode_name(mode));
      }
    }
  {
    Pair<float> in(gpu, twin, normal(3000, 8));
    Pair<unsigned long long> histogram(gpu, twin, bin_slot_count);
    Pair<std::uint32_t> largest(gpu, twin, 1);
    gpu.record_histogram(in.g, in.n, {histogram.g, nullptr, largest.g});
    twin.record_histogram(in.t, in.n, {histogram.t, nullptr, largest.t});
    verdict(histogram.same_bits() && largest.same_bits(), "record_histogram exact, with its reading");
    gpu.record_histogram(in.g, in.n, {nullptr, nullptr, largest.g});
    twin.record_histogram(in.t, in.n, {nullptr, nullptr, largest.t});
    verdict(largest.same_bits(), "record_histogram's reading alone exact");
  }
  // Products: every transpose, 16-bit and float32, batched with strides (cublasGemmStridedBatchedEx)
  // and grouped over two levels of strides (cublasGemmBatchedEx), accumulating.
  for (const int groups : {1, 2})
  for (const bool sixteen : {false, true})
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        const int m = 13, n = 11, k = 17, batch = 3;  // groups x 3 products, as sequences x heads
        const int lda = (ta ? k : m) + 2, ldb = (tb ? n : k) + 1, ldc = m + 3;
        const std::size_t sa = static_cast<std::size_t>(lda) * (ta ? m : k), sb = static_cast<std::size_t>(ldb) * (tb ? k : n), sc = static_cast<std::size_t>(ldc) * n;
        std::vector<float> a = normal(sa * batch * groups, 10), b = normal(sb * batch * groups, 11);
        std::vector<std::uint16_t> a16(a.size()), b16(b.size());
        for (std::size_t i = 0; i < a.size(); ++i) a16[i] = sixteen_bit_pattern(a[i], true);  // a's values rounded to bf16
        for (std::size_t i = 0; i < b.size(); ++i) b16[i] = sixteen_bit_pattern(b[i], true);
        Pair<float> A(gpu, twin, a), Bm(gpu, twin, b), C(gpu, twin, normal(sc * batch * groups, 12));
        Pair<std::uint16_t> A16(gpu, twin, a16), B16(gpu, twin, b16);
        for (DeviceOps* ops : {&gpu, &twin}) {
          const bool on_gpu = ops == &gpu;
          ProductCall call;
          call.transpose_a = ta, call.transpose_b = tb, call.m = m, call.n = n, call.k = k;
          // A group's entries follow each other; B's groups come first, its entries `groups` apart.
          call.a = {on_gpu ? A.g : A.t, on_gpu ? A16.g : A16.t, lda, sa, sa * batch};
          call.b = {on_gpu ? Bm.g : Bm.t, on_gpu ? B16.g : B16.t, ldb, sb * groups, sb};
          call.c = on_gpu ? C.g : C.t, call.ldc = ldc, call.stride_c = sc, call.group_stride_c = sc * batch, call.batch = batch, call.groups = groups;
          call.accumulate = true, call.alpha = 0.75f;  // a recipe's FP8 factor scales the sums
          call.sixteen = sixteen, call.bf16 = true;
          ops->product(call);
        }
        verdict(C.worst(1e-5, 1e-5 * k) <= 1, std::string("product ") + (sixteen ? "bf16 " : "float32 ") + (ta ? "T" : "N") + (tb ? "T" : "N") +
                                                 (groups > 1 ? " grouped and" : "") + " batched, times alpha, accumulated: within 1e-5 of the terms (worst ratio)",
                C.worst(1e-5, 1e-5 * k));
      }
  // The GPT's layers.
  Pair<float> token_table(gpu, twin, normal(static_cast<std::size_t>(V) * D, 13)), position_table(gpu, twin, normal(static_cast<std::size_t>(T) * D, 14));
  Pair<float> x(gpu, twin, ND);
  gpu.embed(tokens.g, token_table.g, position_table.g, V, T, D, N, x.g);
  twin.embed(tokens.t, token_table.t, position_table.t, V, T, D, N, x.t);
  verdict(x.same_bits(), "embed exact");
  Pair<float> dx(gpu, twin, normal(ND, 15)), token_gradient(gpu, twin, normal(static_cast<std::size_t>(V) * D, 16)), position_gradient(gpu, twin, static_cast<std::size_t>(T) * D);
  std::vector<int> grouped, starts;
  group_columns_by_token(token_ids, V, grouped, starts);
  Pair<int> token_columns(gpu, twin, grouped), token_starts(gpu, twin, starts);
  gpu.embed_backward(token_columns.g, token_starts.g, dx.g, V, T, D, N, token_gradient.g, position_gradient.g);
  twin.embed_backward(token_columns.t, token_starts.t, dx.t, V, T, D, N, token_gradient.t, position_gradient.t);
  verdict(token_gradient.same_bits() && position_gradient.same_bits(), "embed_backward exact (each sum in token order)");
  Pair<float> gain(gpu, twin, normal(D, 17)), bias(gpu, twin, normal(D, 18)), y(gpu, twin, ND), xhat(gpu, twin, ND), rstd(gpu, twin, N);
  gpu.layer_norm(x.g, gain.g, bias.g, D, N, y.g, xhat.g, rstd.g);
  twin.layer_norm(x.t, gain.t, bias.t, D, N, y.t, xhat.t, rstd.t);
  verdict(y.same_bits() && xhat.same_bits() && rstd.same_bits(), "layer_norm exact");
  for (const bool add : {false, true}) {
    Pair<float> into(gpu, twin, normal(ND, 19));
    gpu.layer_norm_backward(dx.g, gain.g, xhat.g, rstd.g, D, N, into.g, add);
    twin.layer_norm_backward(dx.t, gain.t, xhat.t, rstd.t, D, N, into.t, add);
    verdict(into.same_bits(), std::string("layer_norm_backward exact") + (add ? " (added to the residual's)" : ""));
  }
  {
    Pair<float> sums(gpu, twin, normal(D, 20));
    gpu.add_token_sums(dx.g, xhat.g, D, N, sums.g);
    twin.add_token_sums(dx.t, xhat.t, D, N, sums.t);
    gpu.add_token_sums(dx.g, nullptr, D, N, sums.g);
    twin.add_token_sums(dx.t, nullptr, D, N, sums.t);
    verdict(sums.same_bits(), "add_token_sums exact (runs of 64 tokens, the CPU's order)");
    gpu.add_row_bias(y.g, bias.g, D, N);
    twin.add_row_bias(y.t, bias.t, D, N);
    gpu.add_into(y.g, dx.g, ND);
    twin.add_into(y.t, dx.t, ND);
    verdict(y.same_bits(), "add_row_bias and add_into exact");
  }
  {
    // GELU's forward and backward are activation.hpp's functions over a float on both sides.
    const std::vector<float> incoming = normal(ND, 21);
    Pair<float> out(gpu, twin, ND), g(gpu, twin, incoming);
    gpu.activation_forward(x.g, out.g, ND, Activation::gelu);
    twin.activation_forward(x.t, out.t, ND, Activation::gelu);
    gpu.activation_backward(x.g, g.g, ND, Activation::gelu);
    twin.activation_backward(x.t, g.t, ND, Activation::gelu);
    verdict(out.same_bits() && g.same_bits(), "GELU forward and backward exact (elementwise_math.hpp on both sides)");
  }
  Pair<float> full(gpu, twin, normal(squares, 22)), packed(gpu, twin, P), probabilities(gpu, twin, P);
  gpu.pack_triangles(full.g, T, static_cast<int>(triangles), 0.25f, packed.g);
  twin.pack_triangles(full.t, T, static_cast<int>(triangles), 0.25f, packed.t);
  verdict(packed.same_bits(), "pack_triangles exact");
  gpu.causal_softmax(packed.g, T, static_cast<int>(triangles), probabilities.g);
  twin.causal_softmax(packed.t, T, static_cast<int>(triangles), probabilities.t);
  verdict(probabilities.worst(1e-5, 1e-7) <= 1, "causal_softmax within 1e-5", probabilities.worst(1e-5, 1e-7));
  {
    // From here on both read the twin's probabilities, so that what follows compares exactly.
    const std::vector<float> p = probabilities.from_twin();
    gpu.upload(probabilities.g, p.data(), p.size() * sizeof(float));
    Pair<float> dp(gpu, twin, normal(P, 23)), ds(gpu, twin, P);
    gpu.softmax_backward(probabilities.g, dp.g, T, static_cast<int>(triangles), ds.g);
    twin.softmax_backward(probabilities.t, dp.t, T, static_cast<int>(triangles), ds.t);
    verdict(ds.same_bits(), "softmax_backward exact");
    for (const bool bf16 : {false, true}) {
      Pair<float> unpacked(gpu, twin, squares);
      Pair<std::uint16_t> unpacked16(gpu, twin, squares);
      gpu.unpack_triangles(packed.g, T, static_cast<int>(triangles), 1.0f, unpacked.g, unpacked16.g, bf16);
      twin.unpack_triangles(packed.t, T, static_cast<int>(triangles), 1.0f, unpacked.t, unpacked16.t, bf16);
      verdict(unpacked.same_bits() && unpacked16.same_bits(), std::string("unpack_triangles exact, with ") + (bf16 ? "bf16" : "fp16") + " patterns");
    }
  }
  {
    LossScalerState state;
    state.scale = 1024;
    Pair<LossScalerState> scaler(gpu, twin, std::vector<LossScalerState>{state});
    Pair<float> logits(gpu, twin, normal(static_cast<std::size_t>(V) * N, 24, 3.0f)), gradient(gpu, twin, static_cast<std::size_t>(V) * N),
        losses(gpu, twin, N);
    gpu.cross_entropy_columns(logits.g, target.g, V, N, scaler.g, 0.5f, gradient.g, losses.g);
    twin.cross_entropy_columns(logits.t, target.t, V, N, scaler.t, 0.5f, gradient.t, losses.t);
    verdict(gradient.worst(1e-5, 1e-7) <= 1 && losses.worst(1e-5, 1e-7) <= 1, "cross_entropy_columns within 1e-5 (CUDA's expf / logf)",
            std::max(gradient.worst(1e-5, 1e-7), losses.worst(1e-5, 1e-7)));
    const std::vector<float> l = losses.from_twin();
    gpu.upload(losses.g, l.data(), l.size() * sizeof(float));
    Pair<double> sum(gpu, twin, 1);
    gpu.loss_sum(losses.g, N, sum.g);
    twin.loss_sum(losses.t, N, sum.t);
    verdict(sum.same_bits(), "loss_sum exact (float64, a block's tree)");
  }
  // The step's end: non-finite check, scaler, optimizer.
  {
    std::vector<float> g = normal(70000, 25, 100.0f);
    Pair<float> gradients(gpu, twin, g), weights(gpu, twin, normal(g.size(), 26)), first(gpu, twin, normal(g.size(), 27, 0.1f)),
        second(gpu, twin, std::vector<float>(g.size(), 0.01f));
    Pair<int> found(gpu, twin, 1), skip(gpu, twin, 1);
    Pair<float> step_scale(gpu, twin, 1);
    LossScalerState state;
    state.scale = 256;
    Pair<LossScalerState> scaler(gpu, twin, std::vector<LossScalerState>{state});
    gpu.find_non_finite(gradients.g, g.size(), found.g);
    twin.find_non_finite(gradients.t, g.size(), found.t);
    gpu.update_scaler(LossScalerConfig::pytorch(), scaler.g, found.g, skip.g, step_scale.g);
    twin.update_scaler(LossScalerConfig::pytorch(), scaler.t, found.t, skip.t, step_scale.t);
    verdict(found.same_bits() && skip.same_bits() && step_scale.same_bits() && scaler.same_bits(), "find_non_finite and update_scaler exact");
    Pair<double> partials(gpu, twin, sum_of_squares_partials);
    gpu.sum_of_squares(gradients.g, g.size(), step_scale.g, partials.g);
    twin.sum_of_squares(gradients.t, g.size(), step_scale.t, partials.t);
    verdict(partials.same_bits(), "sum_of_squares exact (the kernel's blocks and tree)");
    OptimizerSettings settings{OptimizerKind::adamw, 1e-3f, 0.9f, 0.9f, 0.999f, 1e-8f, 0.01f, 1.0f};
    Pair<long long> updates(gpu, twin, std::vector<long long>{3});
    Pair<OptimizerStep> step(gpu, twin, 1);
    gpu.prepare_optimizer_step(settings, partials.g, sum_of_squares_partials, step_scale.g, skip.g, updates.g, step.g);
    twin.prepare_optimizer_step(settings, partials.t, sum_of_squares_partials, step_scale.t, skip.t, updates.t, step.t);
    verdict(step.same_bits() && updates.same_bits(), "prepare_optimizer_step exact (clipped AdamW)");
    gpu.optimizer_update(weights.g, first.g, second.g, gradients.g, g.size(), step.g, skip.g);
    twin.optimizer_update(weights.t, first.t, second.t, gradients.t, g.size(), step.t, skip.t);
    gpu.sgd_update(weights.g, gradients.g, g.size(), 0.1f, step_scale.g, skip.g);
    twin.sgd_update(weights.t, gradients.t, g.size(), 0.1f, step_scale.t, skip.t);
    verdict(weights.same_bits() && first.same_bits() && second.same_bits(), "optimizer_update and sgd_update exact");
  }
}

struct Batch {
  Eigen::MatrixXf inputs;
  std::vector<int> targets;
};
Batch random_batch(const GptShape& shape, int sequences, unsigned seed) {
  std::mt19937 rng(seed);
  Batch b{Eigen::MatrixXf(sequences, shape.context), {}};
  for (Eigen::Index i = 0; i < b.inputs.size(); ++i) b.inputs.data()[i] = static_cast<float>(rng() % static_cast<unsigned>(shape.vocab));
  for (int i = 0; i < sequences * shape.context; ++i) b.targets.push_back(static_cast<int>(rng() % static_cast<unsigned>(shape.vocab)));
  return b;
}

double moved_elements(const ExponentHistogram& a, const ExponentHistogram& b) {
  std::uint64_t moved = 0;
  for (int e = min_binade; e <= max_binade; ++e) moved += a.count(e) > b.count(e) ? a.count(e) - b.count(e) : b.count(e) - a.count(e);
  return 0.5 * static_cast<double>(moved);
}

// The trainers' GPT: 2 blocks of 64, AdamW.
TrainingConfig small_gpt_config(const GptShape& shape, Precision precision, RoundingMode rounding) {
  TrainingConfig config;
  config.gpt = shape;
  config.precision = precision;
  config.rounding = rounding;
  config.learning_rate = 3e-3f;
  config.optimizer.kind = OptimizerKind::adamw;
  return config;
}

void check_trainer(Precision precision, RoundingMode rounding) {
  const GptShape shape{2, 64, 4, 32, 96};
  TrainingConfig config = small_gpt_config(shape, precision, rounding);
  config.scaler = precision == Precision::fp32 ? LossScalerConfig::none() : LossScalerConfig::pytorch();
  config.optimizer.clip_grad_norm = 1.0f;
  config.seed = 3;
  const std::string label = "GPT " + precision_name(precision) + " " + rounding_mode_name(rounding);
  DeviceGptTrainer gpu(shape, config, device_ops());
  const std::unique_ptr<TrainerBackend> reference = reference_trainer(shape, config);
  TrainerBackend& twin = *reference;
  const FaultInjection fault{FaultInjection::Value::nan, 0, 3, "h1.mlp.fc"};
  if (precision != Precision::fp32) {
    gpu.inject(fault);
    twin.inject(fault);
  }
  double loss = 0, moved = 0;
  bool layout = true, counters = true, skips = true, unread = true;
  for (int step = 0; step < 8; ++step) {
    const Batch b = random_batch(shape, step == 5 ? 3 : 4, 50 + static_cast<unsigned>(step));  // step 5: another batch size
    const bool record = step != 2 && step != 6, read = step != 6;
    const StepResult want = twin.step(b.inputs, b.targets, record, true);
    const StepResult got = gpu.step(b.inputs, b.targets, record, read);
    counters = counters && gpu.state().stochastic_counter == twin.state().stochastic_counter;
    if (!record && !read) {
      unread = unread && std::isnan(got.loss) && !got.snapshot;
      continue;
    }
    loss = std::max(loss, std::abs(got.loss - want.loss) / std::abs(want.loss));
    skips = skips && got.skipped == want.skipped && got.loss_scale == want.loss_scale && (step != 3 || precision == Precision::fp32 || got.skipped);
    if (!record) continue;
    layout = layout && got.snapshot->tensors.size() == want.snapshot->tensors.size();
    for (std::size_t t = 0; layout && t < want.snapshot->tensors.size(); ++t) {
      const TensorRecord &g = got.snapshot->tensors[t], &w = want.snapshot->tensors[t];
      layout = g.name == w.name && g.kind == w.kind && g.scale == w.scale && g.histogram.total_count() == w.histogram.total_count() &&
               g.histogram.nan_count() == w.histogram.nan_count() && g.cast.has_value() == w.cast.has_value();
      const double n = static_cast<double>(w.histogram.total_count());
      moved = std::max(moved, moved_elements(g.histogram, w.histogram) / std::max(16.0, 0.03 * n));
    }
  }
  // Sums in another order (cuBLAS's, or the CPU's OpenBLAS and oneDNN) round a stored bf16 or fp16
  // value the other way now and then: measured 3.5e-5 (bf16) and below 1e-4 (fp16) for the twin
  // against the CPU on this model; the random words' order is held exactly elsewhere (the counter
  // here, tests/gpu/test_device_gpt.cpp's 1e-5 on a smaller model).
  const double tolerance = precision == Precision::fp32 ? 1e-6 : 1e-4;
  verdict(layout, label + ": the same tensors (name, kind, size, scale, NaNs) as the reference");
  verdict(counters, label + ": the same stochastic-rounding counter after every step");
  verdict(skips, label + ": the same scales and skips (the injected NaN skips step 3)");
  verdict(unread, label + ": an unread step returns no loss and no snapshot");
  verdict(loss <= tolerance, label + ": loss within tolerance of the reference (largest relative)", loss);
  verdict(moved <= 1, label + ": binades moved within 3% or 16 elements (worst ratio to the bound)", moved);
  // A state read back and restored on a fresh device trainer goes on with the same bits.
  DeviceGptTrainer again(shape, config, device_ops());
  again.restore(gpu.state());
  const Batch b = random_batch(shape, 4, 99);
  const StepResult a = gpu.step(b.inputs, b.targets, true, true), c = again.step(b.inputs, b.targets, true, true);
  verdict(a.loss == c.loss && a.snapshot->tensors == c.snapshot->tensors, label + ": a restored state goes on with the same bits");
}

// Steps replayed as graphs (StepGraphOps) against the same steps launched as they come, both on the
// device under test, bit for bit: batches that change size, recorded steps among unrecorded ones,
// the scaler's rule changed after a replayed step. Replayed: steps 2, 7 and 10.
void check_graphs(Precision precision, RoundingMode rounding) {
  const GptShape shape{2, 64, 4, 32, 96};
  TrainingConfig config = small_gpt_config(shape, precision, rounding);
  config.seed = 5;
  const std::string label = "graphs, GPT " + precision_name(precision) + " " + rounding_mode_name(rounding);
  config.step_graphs = true;
  DeviceGptTrainer graphed(shape, config, device_ops());
  config.step_graphs = false;
  DeviceGptTrainer plain(shape, config, device_ops());
  bool same = true;
  for (int step = 0; step < 12; ++step) {
    const Batch b = random_batch(shape, step >= 5 && step < 8 ? 2 : 4, 70 + static_cast<unsigned>(step));
    if (step == 3) {  // after a replayed step: a graph kept over it would step by the old rule
      graphed.reconfigure_scaler(LossScalerConfig::fixed(0x1p8));
      plain.reconfigure_scaler(LossScalerConfig::fixed(0x1p8));
    }
    const bool record = step == 4 || step == 11, read = step % 3 == 0;
    const StepResult got = graphed.step(b.inputs, b.targets, record, read), want = plain.step(b.inputs, b.targets, record, read);
    same = same && std::memcmp(&got.loss, &want.loss, sizeof got.loss) == 0 && got.skipped == want.skipped &&
           got.snapshot.has_value() == want.snapshot.has_value() && (!got.snapshot || got.snapshot->tensors == want.snapshot->tensors);
  }
  const TrainerState a = graphed.state(), b = plain.state();
  bool weights = a.weights.size() == b.weights.size();
  for (std::size_t p = 0; weights && p < a.weights.size(); ++p)
    weights = std::memcmp(a.weights[p].data(), b.weights[p].data(), sizeof(float) * static_cast<std::size_t>(a.weights[p].size())) == 0;
  verdict(same && weights && a.stochastic_counter == b.stochastic_counter && a.scaler == b.scaler && a.optimizer == b.optimizer,
          label + ": replayed steps are the steps launched as they come, bit for bit");
  verdict(graphed.graph_statistics().replayed >= 3 && plain.graph_statistics().replayed == 0, label + ": steps replayed (of 12)",
          static_cast<double>(graphed.graph_statistics().replayed));
}

// The counterfactual step (the loss-scale preview) on the device (counterfactual_check.hpp), after
// three steps of AdamW, in stochastic rounding: at each scale Apply's step there, bit for bit.
void check_counterfactual(Precision precision) {
  const GptShape shape{2, 64, 4, 32, 96};
  TrainingConfig config = small_gpt_config(shape, precision, RoundingMode::stochastic);
  config.scaler = LossScalerConfig::pytorch();
  config.seed = 7;
  DeviceGptTrainer run(shape, config, device_ops());
  for (int step = 0; step < 3; ++step) {
    const Batch b = random_batch(shape, 4, 90 + static_cast<unsigned>(step));
    run.step(b.inputs, b.targets, false, true);
  }
  const Batch b = random_batch(shape, 4, 93);
  fpscope::test::check_counterfactual_on_device("counterfactual, GPT " + precision_name(precision), run, config.scaler,
                                                [&] { return std::make_unique<DeviceGptTrainer>(shape, config, device_ops()); }, b.inputs, b.targets);
}

// A recipe's GPT (its linear layers' operands quantized and multiplied as float32 on the
// device), each step from the reference's state: the same quantizations in the same order, the
// same random words, the loss within the tolerance above.
void check_recipe_trainer(GemmRecipe recipe) {
  const GptShape shape{2, 64, 4, 32, 96};
  TrainingConfig config;
  config.gpt = shape;
  config.precision = Precision::bf16;
  config.rounding = recipe == GemmRecipe::mxfp4 ? RoundingMode::stochastic : RoundingMode::nearest_even;
  config.scaler = LossScalerConfig::pytorch();
  config.learning_rate = 3e-3f;
  config.optimizer.kind = OptimizerKind::adamw;
  config.recipe.recipe = recipe;
  config.seed = 3;
  const std::string label = "GPT bf16 " + gemm_recipe_name(recipe);
  DeviceGptTrainer gpu(shape, config, device_ops());
  const std::unique_ptr<TrainerBackend> reference = reference_trainer(shape, config);
  double loss = 0;
  bool records = true, counters = true;
  for (int step = 0; step < 4; ++step) {
    const Batch b = random_batch(shape, 4, 70 + static_cast<unsigned>(step));
    gpu.restore(reference->state());
    const StepResult want = reference->step(b.inputs, b.targets, false, true), got = gpu.step(b.inputs, b.targets, false, true);
    loss = std::max(loss, std::abs(got.loss - want.loss) / std::abs(want.loss));
    counters = counters && gpu.state().stochastic_counter == reference->state().stochastic_counter;
    records = records && got.scaling.size() == want.scaling.size() && got.block_operands.size() == want.block_operands.size();
    for (std::size_t i = 0; records && i < want.scaling.size(); ++i)
      records = got.scaling[i].name == want.scaling[i].name && got.scaling[i].operand == want.scaling[i].operand &&
                got.scaling[i].elements == want.scaling[i].elements;
    for (std::size_t i = 0; records && i < want.block_operands.size(); ++i)
      records = got.block_operands[i].name == want.block_operands[i].name && got.block_operands[i].operand == want.block_operands[i].operand &&
                got.block_operands[i].statistics.blocks == want.block_operands[i].statistics.blocks;
  }
  verdict(records, label + ": the same quantizations (layer, operand, elements or blocks) in the same order");
  verdict(counters, label + ": the same stochastic-rounding counter after every step");
  verdict(loss <= 1e-4, label + ": loss within 1e-4 of the reference (largest relative)", loss);
}

}  // namespace

int main() {
  if (!device_answers()) {
    std::printf("no CUDA device: skipping the device run (this binary compiled and linked)\n");
    return 77;
  }
  const std::unique_ptr<DeviceOps> gpu = device_ops(), twin = make_host_device_ops();
  check_operations(*gpu, *twin);
  for (const Precision precision : {Precision::fp32, Precision::bf16, Precision::fp16, Precision::fp16_pure})
    check_trainer(precision, RoundingMode::nearest_even);
  check_trainer(Precision::bf16, RoundingMode::stochastic);
  check_trainer(Precision::fp16, RoundingMode::toward_zero);
  for (const GemmRecipe recipe : {GemmRecipe::fp8_delayed, GemmRecipe::mxfp8, GemmRecipe::mxfp4, GemmRecipe::nvfp4}) check_recipe_trainer(recipe);
  check_graphs(Precision::fp16, RoundingMode::nearest_even);
  check_graphs(Precision::bf16, RoundingMode::stochastic);
  for (const Precision precision : {Precision::fp16, Precision::bf16, Precision::fp16_pure}) check_counterfactual(precision);
  std::printf("%d failed\n", failures);
  return failures == 0 ? 0 : 1;
}
