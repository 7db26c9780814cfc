// What the engine's tests of both backends share: a trainer of a config on the CPU backend or as
// the device step on its host twin, and whether two training states are the same bits.
#pragma once

#include <cstring>
#include <functional>
#include <memory>

#include "fpscope/gpu/device_gpt.hpp"
#include "fpscope/gpu/device_mlp.hpp"
#include "fpscope/gpu/gpt.hpp"
#include "fpscope/gpu/host_device_ops.hpp"
#include "fpscope/gpu/mlp.hpp"

namespace fpscope::testing {

using MakeTrainer = std::function<std::unique_ptr<TrainerBackend>(const TrainingConfig&)>;

inline const MakeTrainer cpu = [](const TrainingConfig& c) -> std::unique_ptr<TrainerBackend> {
  if (c.gpt) return std::make_unique<GptTrainer>(*c.gpt, c);
  return std::make_unique<MlpTrainer>(c);
};
inline const MakeTrainer device_twin = [](const TrainingConfig& c) -> std::unique_ptr<TrainerBackend> {
  if (c.gpt) return std::make_unique<DeviceGptTrainer>(*c.gpt, c, make_host_device_ops());
  return std::make_unique<DeviceMlpTrainer>(c, make_host_device_ops());
};

// The same step, counter, scaler, weights and biases to the bit, optimizer states and FP8 histories.
inline bool same_state(const TrainerState& a, const TrainerState& b) {
  if (a.steps != b.steps || a.stochastic_counter != b.stochastic_counter || !(a.scaler == b.scaler) || a.weights.size() != b.weights.size() ||
      a.biases.size() != b.biases.size())
    return false;
  // (An empty matrix's data() is null, which memcmp may not be given even for no bytes.)
  const auto same_bits = [](const auto& x, const auto& y) {
    return x.size() == y.size() && (x.size() == 0 || std::memcmp(x.data(), y.data(), sizeof(float) * static_cast<std::size_t>(x.size())) == 0);
  };
  for (std::size_t i = 0; i < a.weights.size(); ++i)
    if (!same_bits(a.weights[i], b.weights[i])) return false;
  for (std::size_t i = 0; i < a.biases.size(); ++i)
    if (!same_bits(a.biases[i], b.biases[i])) return false;
  return a.optimizer == b.optimizer && a.fp8 == b.fp8;
}

}  // namespace fpscope::testing
