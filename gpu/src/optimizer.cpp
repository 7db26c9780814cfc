// SGD, momentum and AdamW on fp32 master weights, with gradient clipping on unscaled gradients.
#include "fpscope/gpu/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "fpscope/gpu/parallel.hpp"
#include "fpscope/gpu/sgd_update.hpp"
#include "parse_choice.hpp"

namespace fpscope {

std::string optimizer_name(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::momentum: return "momentum";
    case OptimizerKind::adamw: return "adamw";
  }
  return "?";
}

OptimizerKind parse_optimizer(std::string_view name) { return parse_choice(name, all_optimizers, optimizer_name, "optimizer"); }

std::string describe(const OptimizerConfig& config) {
  std::string text = optimizer_name(config.kind);
  // Appends words and numbers one at a time (GCC 12 warns, falsely, of overlapping copies in
  // "literal" + std::string chains).
  const auto add = [&](const char* words, float v) {
    char number[32];
    std::snprintf(number, sizeof number, "%g", static_cast<double>(v));
    text += words;
    text += number;
  };
  if (config.kind == OptimizerKind::momentum) add(" ", config.momentum);
  if (config.kind == OptimizerKind::adamw) {
    add(" betas ", config.beta1);
    add(",", config.beta2);
    add(" eps ", config.epsilon);
    add(" weight decay ", config.weight_decay);
  }
  if (config.clip_grad_norm > 0) add(", clip ", config.clip_grad_norm);
  return text;
}

bool optimizer_state_fits(const OptimizerState& state, std::span<const std::size_t> parameter_sizes) {
  const auto fits = [&](const std::vector<std::vector<float>>& buffers) {
    if (buffers.empty()) return true;
    if (buffers.size() != parameter_sizes.size()) return false;
    for (std::size_t p = 0; p < buffers.size(); ++p)
      if (!buffers[p].empty() && buffers[p].size() != parameter_sizes[p]) return false;
    return true;
  };
  return fits(state.first) && fits(state.second) && state.updates >= 0;
}

namespace {

// The update of n elements (optimizer_element.hpp's rule), in a loop of its own over unaliased
// arrays with the settings by value, which the compiler vectorises for each kind: each element's
// operations as written, the same bits (no contraction into FMAs: gpu/CMakeLists.txt). `first` /
// `second` may be null where the kind keeps none. Built for AVX-512, AVX2 and the baseline, the
// loader picking one: AdamW's divisions and square roots 16 lanes at a time where the processor
// has them (a GPT step about 2% shorter on an AVX-512 Zen 4 than with the baseline's 4 lanes).
// (GCC's: Clang does not take target_clones on a function template.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define FPSCOPE_UPDATE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FPSCOPE_UPDATE_CLONES
#endif
template <OptimizerKind Kind>
FPSCOPE_UPDATE_CLONES void update_range(float* __restrict w, float* __restrict first, float* __restrict second, const float* __restrict scaled, std::size_t n,
                  OptimizerStep s) {
  s.kind = Kind;  // a constant in the loop
  float unused = 0;
  for (std::size_t i = 0; i < n; ++i) {
    float& f = Kind == OptimizerKind::sgd ? unused : first[i];
    float& v = Kind == OptimizerKind::adamw ? second[i] : unused;
    update_element(w[i], f, v, scaled[i], s);
  }
}

// Plain SGD over n elements (sgd_update.hpp's rule), likewise.
FPSCOPE_UPDATE_CLONES void sgd_range(float* __restrict w, const float* __restrict scaled, std::size_t n, float factor) {
  for (std::size_t i = 0; i < n; ++i) w[i] = sgd_update_element(w[i], scaled[i], factor);
}

// The update of parameter p's elements on the element-wise threads (parallel.hpp): `update(begin,
// end)` over ranges of at most update_range_size, each handed to `updated` as soon as it is written.
template <typename Update>
void update_in_ranges(std::size_t p, std::size_t n, const UpdatedRange& updated, const Update& update) {
  parallel_for(n, update_range_size, [&](std::size_t first, std::size_t last) {
    for (std::size_t begin = first; begin < last; begin += update_range_size) {
      const std::size_t end = std::min(last, begin + update_range_size);
      update(begin, end);
      if (updated) updated(p, begin, end);
    }
  });
}

}  // namespace

std::optional<double> optimizer_update(const OptimizerConfig& config, float learning_rate, float loss_scale,
                                       std::span<const std::span<float>> parameters, std::span<const std::span<const float>> scaled_gradients,
                                       OptimizerState& state, const UpdatedRange& updated) {
  if (parameters.size() != scaled_gradients.size()) throw std::invalid_argument("optimizer: as many gradients as parameters are needed");
  const bool first_moment = config.kind != OptimizerKind::sgd, second_moment = config.kind == OptimizerKind::adamw;
  if (state.first.empty() && first_moment) state.first.resize(parameters.size());
  if (state.second.empty() && second_moment) state.second.resize(parameters.size());
  if ((first_moment && state.first.size() != parameters.size()) || (second_moment && state.second.size() != parameters.size()))
    throw std::invalid_argument("optimizer: the saved state has buffers for another number of parameters");

  // The unscaled gradients' global norm, where the run clips (a serial float64 sum: one order,
  // whatever the threads); each unscaled (and clipped) gradient is made again where it is used,
  // by the same operations, rather than held in a copy of every gradient.
  for (std::size_t p = 0; p < parameters.size(); ++p)
    if (parameters[p].size() != scaled_gradients[p].size()) throw std::invalid_argument("optimizer: a gradient's length is not its parameter's");
  std::optional<double> norm;
  if (config.clip_grad_norm > 0) {
    OptimizerStep unscale;  // unscaling only: the norm is of the gradients before clipping
    unscale.loss_scale = loss_scale;
    double sum_of_squares = 0;
    for (std::size_t p = 0; p < parameters.size(); ++p)
      for (const float scaled : scaled_gradients[p]) {
        const float g = unscaled_gradient(scaled, unscale);
        sum_of_squares += static_cast<double>(g) * static_cast<double>(g);
      }
    norm = std::sqrt(sum_of_squares);
  }
  const bool clip = norm && clips(config.clip_grad_norm, *norm);
  const std::int64_t t = state.updates + 1;
  const OptimizerStep step = optimizer_step(config.kind, learning_rate, loss_scale, config.momentum, config.beta1, config.beta2,
                                            config.epsilon, config.weight_decay, t, clip, clip ? clipping_coefficient(config.clip_grad_norm, *norm) : 1.0f);
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    std::span<float> w = parameters[p];
    const std::span<const float> scaled = scaled_gradients[p];
    if (first_moment && state.first[p].empty()) state.first[p].assign(w.size(), 0.0f);
    if (second_moment && state.second[p].empty()) state.second[p].assign(w.size(), 0.0f);
    if ((first_moment && state.first[p].size() != w.size()) || (second_moment && state.second[p].size() != w.size()))
      throw std::invalid_argument("optimizer: a saved buffer's length is not its parameter's");
    // Each element on its own: split across the element-wise threads (parallel.hpp), same bits.
    float* first = first_moment ? state.first[p].data() : nullptr;
    float* second = second_moment ? state.second[p].data() : nullptr;
    update_in_ranges(p, w.size(), updated, [&](std::size_t begin, std::size_t end) {
      float* const f = first != nullptr ? first + begin : nullptr;
      float* const v = second != nullptr ? second + begin : nullptr;
      switch (config.kind) {
        case OptimizerKind::sgd: update_range<OptimizerKind::sgd>(w.data() + begin, f, v, scaled.data() + begin, end - begin, step); break;
        case OptimizerKind::momentum:
          update_range<OptimizerKind::momentum>(w.data() + begin, f, v, scaled.data() + begin, end - begin, step);
          break;
        case OptimizerKind::adamw: update_range<OptimizerKind::adamw>(w.data() + begin, f, v, scaled.data() + begin, end - begin, step); break;
      }
    });
  }
  state.updates = t;
  return norm;
}

void update_parameters(const OptimizerConfig& config, float learning_rate, float loss_scale, std::span<const std::span<float>> parameters,
                       std::span<const std::span<const float>> scaled_gradients, OptimizerState& state, const UpdatedRange& updated) {
  if (!config.plain_sgd()) {
    optimizer_update(config, learning_rate, loss_scale, parameters, scaled_gradients, state, updated);
    return;
  }
  if (parameters.size() != scaled_gradients.size()) throw std::invalid_argument("optimizer: as many gradients as parameters are needed");
  const float factor = sgd_step_factor(learning_rate, loss_scale);
  for (std::size_t p = 0; p < parameters.size(); ++p) {
    if (parameters[p].size() != scaled_gradients[p].size()) throw std::invalid_argument("optimizer: a gradient's length is not its parameter's");
    update_in_ranges(p, parameters[p].size(), updated, [&](std::size_t begin, std::size_t end) {
      sgd_range(parameters[p].data() + begin, scaled_gradients[p].data() + begin, end - begin, factor);
    });
  }
}

}  // namespace fpscope
