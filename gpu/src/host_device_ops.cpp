// The host twin of the CUDA kernels (host_device_ops.hpp).
#include "fpscope/gpu/host_device_ops.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include "fpscope/core/cast.hpp"
#include "fpscope/core/exponent_histogram.hpp"
#include "fpscope/core/loss_scaling.hpp"
#include "fpscope/gpu/block_element.hpp"
#include "fpscope/gpu/cast_record_element.hpp"
#include "fpscope/gpu/fp8_element.hpp"
#include "fpscope/gpu/gpt_element.hpp"
#include "fpscope/gpu/rounding_dispatch.hpp"
#include "fpscope/gpu/sgd_update.hpp"
#include "fpscope/gpu/softmax_cross_entropy.hpp"

namespace fpscope {

namespace {

template <Format F, RoundingMode Mode>
void cast_in(const float* in, float* out, std::uint16_t* packed, std::size_t n, RecordSlots slots, std::uint64_t seed, std::uint64_t first) {
  std::uint32_t largest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    largest = std::max(largest, magnitude_bits(in[i]));  // before out[i] is written: `out` may be `in`
    const CastRecordElement e = cast_record_element<F, Mode>(float_bits(in[i]), seed, first, i);
    if (out != nullptr) out[i] = bits_float(e.rounded);
    if (packed != nullptr) packed[i] = static_cast<std::uint16_t>(e.narrow);
    if (slots.histogram != nullptr) ++slots.histogram[e.slot];
    if (slots.counts != nullptr) {
      slots.counts[0] += e.flushed_to_zero ? 1 : 0;
      slots.counts[1] += e.made_subnormal ? 1 : 0;
      slots.counts[2] += e.overflowed ? 1 : 0;
    }
  }
  if (slots.largest != nullptr) *slots.largest = largest;
}

template <Format F>
void cast_as(const float* in, float* out, std::uint16_t* packed, std::size_t n, RoundingMode mode, RecordSlots slots, std::uint64_t seed,
             std::uint64_t first) {
  switch (mode) {
    case RoundingMode::nearest_even: return cast_in<F, RoundingMode::nearest_even>(in, out, packed, n, slots, seed, first);
    case RoundingMode::nearest_away: return cast_in<F, RoundingMode::nearest_away>(in, out, packed, n, slots, seed, first);
    case RoundingMode::toward_zero: return cast_in<F, RoundingMode::toward_zero>(in, out, packed, n, slots, seed, first);
    case RoundingMode::toward_positive: return cast_in<F, RoundingMode::toward_positive>(in, out, packed, n, slots, seed, first);
    case RoundingMode::toward_negative: return cast_in<F, RoundingMode::toward_negative>(in, out, packed, n, slots, seed, first);
    case RoundingMode::odd: return cast_in<F, RoundingMode::odd>(in, out, packed, n, slots, seed, first);
    case RoundingMode::stochastic: return cast_in<F, RoundingMode::stochastic>(in, out, packed, n, slots, seed, first);
  }
}

// A 16-bit pattern back to float32 (exact: every fp16 and bf16 value is a float32).
float widen(std::uint16_t bits, bool bf16) {
  const CastOptions options{};
  std::uint32_t flags = 0;
  return bits_float(bf16 ? cast_to_f32<formats::bf16>(bits, options, flags) : cast_to_f32<formats::fp16>(bits, options, flags));
}
class HostDeviceOps final : public DeviceOps {
 public:
  std::string_view name() const override { return "host twin"; }

  void* allocate(std::size_t bytes) override {
    void* p = std::aligned_alloc(64, std::max<std::size_t>((bytes + 63) / 64 * 64, 64));
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void release(void* device) override { std::free(device); }
  void upload(void* device, const void* host, std::size_t bytes) override { std::memcpy(device, host, bytes); }
  void download(void* host, const void* device, std::size_t bytes) override { std::memcpy(host, device, bytes); }
  void zero(void* device, std::size_t bytes) override { std::memset(device, 0, bytes); }
  void copy(void* to, const void* from, std::size_t bytes) override { std::memmove(to, from, bytes); }

  void cast(const float* in, float* out, std::uint16_t* packed, std::size_t n, bool bf16, RoundingMode mode, RecordSlots slots,
            RandomWords random) override {
    const std::uint64_t first = random.first_word();
    if (bf16) cast_as<formats::bf16>(in, out, packed, n, mode, slots, random.seed, first);
    else cast_as<formats::fp16>(in, out, packed, n, mode, slots, random.seed, first);
  }
  void cast_unless_skipped(const float* in, float* out, std::size_t n, bool bf16, RoundingMode mode, RandomWords random, const int* skip) override {
    if (*skip == 0) cast(in, out, nullptr, n, bf16, mode, {}, random);
  }
  void advance_counter(std::uint64_t* counter, std::uint64_t words, std::uint64_t words_unless_skipped, const int* skip) override {
    *counter += words + (skip == nullptr || *skip == 0 ? words_unless_skipped : 0);
  }
  void record_histogram(const float* in, std::size_t n, RecordSlots slots) override {
    std::uint32_t largest = 0;
    for (std::size_t i = 0; i < n; ++i) {
      largest = std::max(largest, magnitude_bits(in[i]));
      if (slots.histogram != nullptr) ++slots.histogram[histogram_slot_of_f32(float_bits(in[i]))];
    }
    if (slots.largest != nullptr) *slots.largest = largest;
  }

  void product(const ProductCall& call) override {
    const auto element = [&](const DeviceOperand& o, std::size_t base, int row, int col) {
      const std::size_t i = base + static_cast<std::size_t>(col) * static_cast<std::size_t>(o.ld) + static_cast<std::size_t>(row);
      if (!call.sixteen) return o.f32[i];
      return widen(o.p16[i], call.bf16);
    };
    if ((call.sixteen ? call.a.p16 == nullptr || call.b.p16 == nullptr : call.a.f32 == nullptr || call.b.f32 == nullptr))
      throw std::logic_error("device product: an operand without the values it is to be read as");
    for (int g = 0; g < call.groups; ++g)
      for (int e = 0; e < call.batch; ++e) {
        const auto at = [&](const DeviceOperand& o) { return o.group_stride * static_cast<std::size_t>(g) + o.stride * static_cast<std::size_t>(e); };
        const std::size_t a_base = at(call.a), b_base = at(call.b);
        float* c = call.c + call.group_stride_c * static_cast<std::size_t>(g) + call.stride_c * static_cast<std::size_t>(e);
        for (int j = 0; j < call.n; ++j)
          for (int i = 0; i < call.m; ++i) {
            float sum = 0;
            for (int k = 0; k < call.k; ++k) {
              const float a = call.transpose_a ? element(call.a, a_base, k, i) : element(call.a, a_base, i, k);
              const float b = call.transpose_b ? element(call.b, b_base, j, k) : element(call.b, b_base, k, j);
              sum += a * b;
            }
            float& out = c[static_cast<std::size_t>(j) * static_cast<std::size_t>(call.ldc) + static_cast<std::size_t>(i)];
            const float scaled = call.alpha * sum;
            out = call.accumulate ? out + scaled : scaled;
          }
      }
  }

  void amax_bits(const float* in, std::size_t n, std::uint32_t* largest) override {
    std::uint32_t top = 0;
    for (std::size_t i = 0; i < n; ++i) top = std::max(top, magnitude_bits(in[i]));
    *largest = top;
  }
  void fp8_quantize(const float* in, float* out, std::size_t n, float scale, bool e5m2, RoundingMode mode, const CastOptions& saturating,
                    RandomWords random, unsigned long long* counts) override {
    const std::uint64_t seed = random.seed, first = random.first_word();
    const auto quantize = [&]<Format F>() {
      with_rounding_mode(mode, [&]<RoundingMode Mode>() {
        for (std::size_t i = 0; i < n; ++i) {
          const Fp8Element e = fp8_quantize_element<F, Mode>(in[i], scale, saturating, seed, first, i);
          out[i] = bits_float(e.rounded);
          counts[0] += e.zero ? 1 : 0;
          counts[1] += e.flushed ? 1 : 0;
          counts[2] += e.saturated ? 1 : 0;
        }
      });
    };
    if (e5m2) quantize.template operator()<formats::e5m2>();
    else quantize.template operator()<formats::e4m3>();
  }

  void block_quantize(const float* in, float* out, const BlockLayout& layout, const BlockFormat& format, ScaleRule rule, const Context& options,
                      RandomWords random, unsigned long long* counters, std::uint32_t* amax) override {
    if (format.block_size > device_block_size_limit) throw std::invalid_argument("block_quantize on the device: blocks of at most 32 elements");
    float tensor_scale = 1.0f;
    if (format.scale == BlockFormat::Scale::e4m3_nvfp4) {  // the finite values' amax (the kernel's Nvfp4 reduction)
      std::uint32_t top = 0;
      for (std::size_t i = 0; i < layout.element_count(); ++i) top = std::max(top, nvfp4_amax_contribution(float_bits(in[i])));
      *amax = top;
      tensor_scale = nvfp4_tensor_scale(top);
    }
    const Context ctx = drawing(options, random);
    const auto add = [&](std::size_t counter, std::uint64_t amount) { counters[counter] += amount; };
    for (std::size_t b = 0; b < layout.block_count(); ++b) quantize_dequantize_block(format, rule, layout, tensor_scale, ctx, in, out, b, add);
  }

  void embed(const int* tokens, const float* token_table, const float* position_table, int vocab, int context, int width, int columns,
             float* x) override {
    for (int n = 0; n < columns; ++n)
      for (int d = 0; d < width; ++d)
        x[static_cast<std::size_t>(n) * width + d] =
            token_table[static_cast<std::size_t>(d) * vocab + tokens[n]] + position_table[static_cast<std::size_t>(d) * context + n % context];
  }
  void embed_backward(const int* token_columns, const int* token_starts, const float* dx, int vocab, int context, int width, int columns,
                      float* token_gradient, float* position_gradient) override {
    for (int d = 0; d < width; ++d) {
      for (int v = 0; v < vocab; ++v) add_token_row_gradient(dx, width, token_columns, token_starts, vocab, v, d, token_gradient);
      for (int p = 0; p < context; ++p) add_position_row_gradient(dx, width, context, columns, p, d, position_gradient);
    }
  }
  void layer_norm(const float* x, const float* gain, const float* bias, int features, int columns, float* y, float* xhat, float* rstd) override {
    for (int n = 0; n < columns; ++n) {
      const std::size_t at = static_cast<std::size_t>(n) * features;
      rstd[n] = layer_norm_column(HostWarp{}, x + at, gain, bias, features, y + at, xhat + at);
    }
  }
  void layer_norm_backward(const float* dy, const float* gain, const float* xhat, const float* rstd, int features, int columns, float* dx,
                           bool add) override {
    for (int n = 0; n < columns; ++n) {
      const std::size_t at = static_cast<std::size_t>(n) * features;
      layer_norm_backward_column(HostWarp{}, dy + at, gain, xhat + at, rstd[n], features, dx + at, add);
    }
  }
  void add_token_sums(const float* a, const float* b, int features, int columns, float* into) override {
    const std::size_t tokens = static_cast<std::size_t>(columns), runs = token_runs(tokens);
    std::vector<float> run_sums(runs);
    for (int f = 0; f < features; ++f) {
      for (std::size_t r = 0; r < runs; ++r) run_sums[r] = token_run_sum(a, b, features, tokens, f, r);
      add_run_sums(run_sums.data(), runs, 1, into + f);
    }
  }
  void add_row_bias(float* y, const float* bias, int features, int columns) override {
    for (int n = 0; n < columns; ++n)
      for (int f = 0; f < features; ++f) y[static_cast<std::size_t>(n) * features + f] += bias[f];
  }
  void add_into(float* x, const float* y, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) x[i] += y[i];
  }
  void activation_forward(const float* z, float* out, std::size_t n, Activation activation) override {
    for (std::size_t i = 0; i < n; ++i) out[i] = activate(activation, z[i]);
  }
  void activation_backward(const float* z, float* gradient, std::size_t n, Activation activation) override {
    for (std::size_t i = 0; i < n; ++i) gradient[i] *= activation_derivative(activation, z[i]);
  }
  void pack_triangles(const float* full, int context, int triangles, float factor, float* packed) override {
    const std::size_t T = static_cast<std::size_t>(context), P = triangle_start(context);
    for (std::size_t t = 0; t < static_cast<std::size_t>(triangles); ++t)
      for (int j = 0; j < context; ++j)
        for (int i = 0; i <= j; ++i) packed[t * P + triangle_start(j) + i] = full[t * T * T + static_cast<std::size_t>(j) * T + i] * factor;
  }
  void unpack_triangles(const float* packed, int context, int triangles, float factor, float* full, std::uint16_t* full16, bool bf16) override {
    const std::size_t T = static_cast<std::size_t>(context), P = triangle_start(context);
    for (std::size_t t = 0; t < static_cast<std::size_t>(triangles); ++t)
      for (int j = 0; j < context; ++j)
        for (int i = 0; i < context; ++i) {
          const float v = i <= j ? packed[t * P + triangle_start(j) + i] * factor : 0.0f;
          const std::size_t at = t * T * T + static_cast<std::size_t>(j) * T + i;
          if (full != nullptr) full[at] = v;
          if (full16 != nullptr) full16[at] = sixteen_bit_pattern(v, bf16);
        }
  }
  void causal_softmax(const float* scores, int context, int triangles, float* probabilities) override {
    const std::size_t P = triangle_start(context);
    for (std::size_t t = 0; t < static_cast<std::size_t>(triangles); ++t)
      for (int j = 0; j < context; ++j) {
        const std::size_t at = t * P + triangle_start(j);
        causal_softmax_row(HostWarp{}, scores + at, j + 1, probabilities + at);
      }
  }
  void softmax_backward(const float* probabilities, const float* dprobabilities, int context, int triangles, float* dscores) override {
    const std::size_t P = triangle_start(context);
    for (std::size_t t = 0; t < static_cast<std::size_t>(triangles); ++t)
      for (int j = 0; j < context; ++j) {
        const std::size_t at = t * P + triangle_start(j);
        softmax_gradient_row(HostWarp{}, probabilities + at, dprobabilities + at, j + 1, dscores + at);
      }
  }
  void cross_entropy_columns(const float* logits, const int* targets, int classes, int columns, const LossScalerState* scaler, float loss_weight,
                             float* gradient, float* losses) override {
    const float factor = static_cast<float>(scaler->scale) * loss_weight / static_cast<float>(columns);
    for (int n = 0; n < columns; ++n) {
      const std::size_t at = static_cast<std::size_t>(n) * classes;
      losses[n] = cross_entropy_column(HostWarp{}, logits + at, classes, targets[n], factor, gradient + at);
    }
  }
  void loss_sum(const float* losses, int n, double* sum) override {
    double tree[loss_sum_threads];
    for (int t = 0; t < loss_sum_threads; ++t) {
      double partial = 0;
      for (int i = t; i < n; i += loss_sum_threads) partial += static_cast<double>(losses[i]);
      tree[t] = partial;
    }
    for (int half = loss_sum_threads / 2; half > 0; half /= 2)
      for (int t = 0; t < half; ++t) tree[t] = tree[t] + tree[t + half];
    *sum = tree[0];
  }

  void add_column_bias(float* z, const float* bias, int rows, int cols) override {
    const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    for (std::size_t i = 0; i < n; ++i) z[i] += bias[i / static_cast<std::size_t>(rows)];
  }
  // The kernel's warp per column, lanes down every 32nd row then a shuffle tree: HostWarp's order.
  void column_sums(const float* m, int rows, int cols, float* out) override {
    for (int c = 0; c < cols; ++c) {
      const float* column = m + static_cast<std::size_t>(c) * static_cast<std::size_t>(rows);
      out[c] = HostWarp{}.sum(rows, [&](int r) { return column[r]; });
    }
  }
  void cross_entropy_rows(const float* logits, const int* labels, int rows, int cols, const LossScalerState* scaler, float loss_weight,
                          float* gradient, float* row_loss) override {
    const float factor = static_cast<float>(scaler->scale) * loss_weight / static_cast<float>(rows);
    for (int r = 0; r < rows; ++r) row_loss[r] = softmax_cross_entropy_row(logits + r, cols, rows, labels[r], factor, gradient + r);
  }
  void ordered_sum(const float* values, int n, float* out) override {
    double sum = 0;
    for (int i = 0; i < n; ++i) sum += values[i];
    *out = static_cast<float>(sum);
  }

  void find_non_finite(const float* values, std::size_t n, int* found) override {
    for (std::size_t i = 0; i < n; ++i)
      if (gradient_non_finite(values[i])) *found = 1;
  }
  void update_scaler(const LossScalerConfig& config, LossScalerState* state, const int* found, int* skip, float* step_scale) override {
    *step_scale = static_cast<float>(state->scale);
    *skip = apply_scaler_rule(config, *state, *found != 0) ? 1 : 0;
  }
  void sgd_update(float* w, const float* g, std::size_t n, float learning_rate, const float* step_scale, const int* skip) override {
    if (*skip != 0) return;
    const float factor = sgd_step_factor(learning_rate, *step_scale);
    for (std::size_t i = 0; i < n; ++i) w[i] = sgd_update_element(w[i], g[i], factor);
  }
  void sum_of_squares(const float* g, std::size_t n, const float* step_scale, double* partials) override {
    OptimizerStep unscale;
    unscale.loss_scale = *step_scale;
    constexpr std::size_t blocks = sum_of_squares_partials, threads = sum_of_squares_threads;
    std::vector<double> tree(threads);
    for (std::size_t block = 0; block < blocks; ++block) {
      for (std::size_t t = 0; t < threads; ++t) {
        double sum = 0;
        for (std::size_t i = block * threads + t; i < n; i += blocks * threads) {
          const double u = unscaled_gradient(g[i], unscale);
          sum += u * u;
        }
        tree[t] = sum;
      }
      for (std::size_t half = threads / 2; half > 0; half /= 2)
        for (std::size_t t = 0; t < half; ++t) tree[t] += tree[t + half];
      partials[block] = tree[0];
    }
  }
  void prepare_optimizer_step(const OptimizerSettings& settings, const double* partials, int partial_count, const float* step_scale,
                              const int* skip, long long* updates, OptimizerStep* step) override {
    *step = prepared_optimizer_step(settings, partials, partial_count, *step_scale, *updates);
    if (*skip == 0) *updates += 1;
  }
  void optimizer_update(float* w, float* first, float* second, const float* g, std::size_t n, const OptimizerStep* step,
                        const int* skip) override {
    if (*skip != 0) return;
    float unused_first = 0, unused_second = 0;
    for (std::size_t i = 0; i < n; ++i) {
      float& f = first != nullptr ? first[i] : unused_first;
      float& v = second != nullptr ? second[i] : unused_second;
      update_element(w[i], f, v, g[i], *step);
    }
  }
};

}  // namespace

std::unique_ptr<DeviceOps> make_host_device_ops() { return std::make_unique<HostDeviceOps>(); }

}  // namespace fpscope
