// The optimizers against steps computed here by hand in float64 (tolerances stated: the engine
// works in float32), gradient clipping on unscaled gradients, skipped steps untouched, and a
// checkpoint of momentum and AdamW states resuming to the same bits.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "fpscope/gpu/checkpoint.hpp"
#include "fpscope/gpu/fault_injection.hpp"
#include "fpscope/gpu/mlp.hpp"
#include "fpscope/gpu/optimizer.hpp"
#include "fpscope/gpu/optimizer_element.hpp"
#include "fpscope/gpu/sgd_update.hpp"

using namespace fpscope;

namespace {

// One parameter of three values and its gradient, stepped by `config` `steps` times with the same gradient.
std::vector<float> stepped(const OptimizerConfig& config, float lr, float loss_scale, std::vector<float> w, const std::vector<float>& g, int steps,
                           OptimizerState& state) {
  std::vector<float> scaled(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) scaled[i] = g[i] * loss_scale;
  for (int s = 0; s < steps; ++s) {
    const std::span<float> parameters[] = {std::span<float>(w)};
    const std::span<const float> gradients[] = {std::span<const float>(scaled)};
    optimizer_update(config, lr, loss_scale, parameters, gradients, state);
  }
  return w;
}

// |a - b| <= 4 float32 ulps of b: the float32 steps against the float64 hand computation.
void check_close(float a, double b) { CHECK(std::fabs(static_cast<double>(a) - b) <= 4 * std::ldexp(1.0, std::ilogb(b) - 23)); }

}  // namespace

TEST_CASE("SGD, momentum and AdamW against steps worked by hand; the loss scale divides out exactly") {
  const std::vector<float> w0{0.5f, -1.25f, 3.0f}, g{0.1f, -0.02f, 0.75f};
  const float lr = 0.01f;
  OptimizerConfig sgd;
  OptimizerState s;
  const auto w_sgd = stepped(sgd, lr, 1.0f, w0, g, 1, s);
  for (int i = 0; i < 3; ++i) check_close(w_sgd[i], w0[i] - 0.01 * static_cast<double>(g[i]));

  OptimizerConfig momentum;
  momentum.kind = OptimizerKind::momentum;
  momentum.momentum = 0.9f;
  OptimizerState m;
  const auto w_m = stepped(momentum, lr, 1.0f, w0, g, 3, m);
  for (int i = 0; i < 3; ++i) {
    // b1 = g, b2 = 1.9 g, b3 = 2.71 g: w3 = w0 - lr (1 + 1.9 + 2.71) g.
    check_close(w_m[i], w0[i] - 0.01 * 5.61 * static_cast<double>(g[i]));
    check_close(m.first[0][i], 2.71 * static_cast<double>(g[i]));
  }
  CHECK(m.updates == 3);

  OptimizerConfig adamw;
  adamw.kind = OptimizerKind::adamw;
  adamw.weight_decay = 0.1f;
  OptimizerState a;
  const auto w_a = stepped(adamw, lr, 1.0f, w0, g, 2, a);
  for (int i = 0; i < 3; ++i) {
    // By hand, twice the same gradient: m_t / (1 - b1^t) = g and v_t / (1 - b2^t) = g^2, so each
    // step moves w by lr * g / (|g| + eps) after the decay w *= 1 - lr * wd.
    double w = w0[i];
    const double gi = g[i];
    for (int t = 0; t < 2; ++t) w = w * (1 - 0.01 * 0.1) - 0.01 * gi / (std::fabs(gi) + 1e-8);
    check_close(w_a[i], w);
    // The moments with the constants as float32 holds them (0.999f is not 0.999).
    const double b1 = 0.9f, b2 = 0.999f;
    check_close(a.first[0][i], ((1 - b1) * b1 + (1 - b1)) * gi);
    check_close(a.second[0][i], ((1 - b2) * b2 + (1 - b2)) * gi * gi);
  }

  // A loss scale of 2^10 on the gradients gives the same bits: unscaling by a power of two is exact.
  for (const OptimizerConfig& config : {sgd, momentum, adamw}) {
    OptimizerState one, scaled;
    CHECK(stepped(config, lr, 1.0f, w0, g, 3, one) == stepped(config, lr, 1024.0f, w0, g, 3, scaled));
    CHECK(one == scaled);
  }
}

TEST_CASE("the vectorised updates are optimizer_element.hpp's rule bit for bit, in every lane and tail") {
  // The updates run in loops built for AVX-512, AVX2 and the baseline (optimizer.cpp); each
  // element's operations must be rounded as written, none fused into an FMA, as the scalar rule
  // compiled here (baseline x86-64: no FMA instruction to fuse into) and the CUDA kernels
  // (--fmad=false) round them. 100003 elements: whole vectors and a tail, on the threads.
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::size_t n = 100003;
  std::vector<float> w0(n), scaled(n);
  for (std::size_t i = 0; i < n; ++i) w0[i] = normal(rng), scaled[i] = normal(rng) * 1024.0f;
  for (const OptimizerKind kind : {OptimizerKind::sgd, OptimizerKind::momentum, OptimizerKind::adamw}) {
    CAPTURE(static_cast<int>(kind));
    OptimizerConfig config;
    config.kind = kind;
    config.momentum = 0.9f;
    config.weight_decay = 0.01f;
    const float lr = 0.01f, loss_scale = 1024.0f;
    OptimizerState state;
    std::vector<float> w = w0, first(n, 0.0f), second(n, 0.0f);
    for (std::int64_t t = 1; t <= 2; ++t) {
      const std::span<float> parameters[] = {std::span<float>(w)};
      const std::span<const float> gradients[] = {std::span<const float>(scaled)};
      if (kind == OptimizerKind::sgd) update_parameters(config, lr, loss_scale, parameters, gradients, state);
      else optimizer_update(config, lr, loss_scale, parameters, gradients, state);
    }
    std::vector<float> expected = w0;
    for (std::int64_t t = 1; t <= 2; ++t) {
      const OptimizerStep s = optimizer_step(kind, lr, loss_scale, config.momentum, config.beta1, config.beta2, config.epsilon, config.weight_decay,
                                             t, false, 1.0f);
      for (std::size_t i = 0; i < n; ++i) {
        if (kind == OptimizerKind::sgd) expected[i] = sgd_update_element(expected[i], scaled[i], sgd_step_factor(lr, loss_scale));
        else update_element(expected[i], first[i], second[i], scaled[i], s);
      }
    }
    std::size_t differing = 0;
    for (std::size_t i = 0; i < n; ++i) differing += std::bit_cast<std::uint32_t>(w[i]) != std::bit_cast<std::uint32_t>(expected[i]) ? 1 : 0;
    CHECK(differing == 0);
    if (kind != OptimizerKind::sgd) CHECK(state.first[0] == first);
    if (kind == OptimizerKind::adamw) CHECK(state.second[0] == second);
  }
}

TEST_CASE("gradient clipping works on the unscaled gradients' global norm") {
  OptimizerConfig clip;
  clip.clip_grad_norm = 1.0f;
  // Two parameters whose gradients have global norm 5 (3, 4): clipped by 1 / (5 + 1e-6).
  std::vector<float> a{0.0f}, b{0.0f};
  const std::vector<float> ga{3.0f * 256}, gb{4.0f * 256};  // carrying a loss scale of 256
  const std::span<float> parameters[] = {std::span<float>(a), std::span<float>(b)};
  const std::span<const float> gradients[] = {std::span<const float>(ga), std::span<const float>(gb)};
  OptimizerState state;
  const double norm = optimizer_update(clip, 1.0f, 256.0f, parameters, gradients, state).value();
  CHECK(norm == 5.0);
  const float coefficient = static_cast<float>(1.0 / (5.0 + 1e-6));
  CHECK(a[0] == -(3.0f * coefficient));
  CHECK(b[0] == -(4.0f * coefficient));
  // Below the limit nothing changes.
  std::vector<float> c{0.0f};
  const std::vector<float> gc{0.5f};
  const std::span<float> p2[] = {std::span<float>(c)};
  const std::span<const float> g2[] = {std::span<const float>(gc)};
  CHECK(optimizer_update(clip, 1.0f, 1.0f, p2, g2, state).value() == 0.5);
  CHECK(c[0] == -0.5f);
}

TEST_CASE("AdamW in the trainer: a skipped step leaves weights and moments alone, and a checkpoint resumes to the same bits") {
  TrainingConfig config;
  config.layer_sizes = {12, 20, 4};
  config.precision = Precision::fp16;
  config.scaler = LossScalerConfig::pytorch();
  config.learning_rate = 0.01f;
  config.optimizer.kind = OptimizerKind::adamw;
  config.optimizer.weight_decay = 0.01f;
  config.optimizer.clip_grad_norm = 0.5f;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 1);
  Eigen::MatrixXf inputs(16, 12);
  for (Eigen::Index i = 0; i < inputs.size(); ++i) inputs.data()[i] = normal(rng);
  std::vector<int> labels;
  for (int i = 0; i < 16; ++i) labels.push_back(static_cast<int>(rng() % 4));

  MlpTrainer whole(config);
  whole.inject(FaultInjection{FaultInjection::Value::nan, 1, 3});
  std::vector<TrainerState> states;
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 8; ++step) {
    const StepResult r = whole.step(inputs, labels, false);
    if (step == 0) first_loss = r.loss;
    last_loss = r.loss;
    CHECK(r.skipped == (step == 3));
    states.push_back(whole.state());
  }
  CHECK(last_loss < first_loss);
  // Step 3 was skipped: the weights and the optimizer's moments and count are those of step 2.
  CHECK(states[3].weights == states[2].weights);
  CHECK(states[3].optimizer == states[2].optimizer);
  CHECK(states[4].optimizer.updates == states[2].optimizer.updates + 1);
  CHECK(states[2].optimizer.first.size() == 4);  // fc1 weight, fc1 bias, fc2 weight, fc2 bias

  // A checkpoint after step 4, through the file format, resumed: the same bits at the end.
  TrainingCheckpoint checkpoint;
  checkpoint.settings = "test";
  checkpoint.trainer = states[4];
  const TrainingCheckpoint back = decode_checkpoint(encode_checkpoint(checkpoint), "test checkpoint");
  CHECK(back.trainer.optimizer == states[4].optimizer);
  MlpTrainer resumed(config);
  resumed.restore(back.trainer);
  for (int step = 5; step < 8; ++step) resumed.step(inputs, labels, false);
  CHECK(resumed.state().weights == whole.state().weights);
  CHECK(resumed.state().optimizer == whole.state().optimizer);

  // A state from another model is refused in one sentence.
  TrainerState wrong = states[4];
  wrong.optimizer.first[1].push_back(0.0f);
  MlpTrainer other(config);
  CHECK_THROWS_WITH_AS(other.restore(wrong), "the saved optimizer state is not of this model's shape", std::invalid_argument);
}
