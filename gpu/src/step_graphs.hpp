// A device step's launches as one graph, replayed (CUDA Graphs): the host walks the step's logic as
// always -- which tensors are cast, recorded and watched, its offsets in the stochastic stream --
// but queues one graph launch instead of ~70 kernel and cuBLAS launches. The device trainers hold
// their backend's ops through StepGraphOps and run a step's phases through run().
//
// A step's launches depend on the host only through their arguments: device addresses (fixed
// while no memory is made or given back), shapes (the batch), whether the step records, and the
// run's settings (fixed but for the scaler's rule, which forget() covers). So run() keeps one
// graph per key (the trainer's: batch and recording) and:
//   - the first step of a key runs as it comes (it may make memory: cuBLAS's and the products'
//     pointer arrays), and any memory made or given back between steps forgets every graph;
//   - the second is captured -- by the backend's stream capture where it has one (CUDA), else its
//     launches kept as calls (the host twin, so that the tests hold graphs to steps run as they come)
//     -- and run;
//   - every later one replays it: the phases run on the host with their launches dropped.
// Inside a captured or replayed step nothing may be uploaded, downloaded, made or given back: each
// throws std::logic_error, a step that does so being one that cannot be a graph.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "forwarding_ops.hpp"

namespace fpscope {

class StepGraphOps final : public ForwardingOps {
 public:
  StepGraphOps(std::unique_ptr<DeviceOps> inner, bool enabled) : ForwardingOps(std::move(inner)), enabled_(enabled) {}

  // The step's `phases` under `key`, as above; as they come where graphs are off or the step is
  // not `eligible` (it reads back or uploads among its launches: a recipe, block records, a fault).
  void run(std::uint64_t key, bool eligible, const std::function<void()>& phases);
  // Every graph made again from its key's next step (an argument the launches take by value changed).
  void forget();

  StepGraphStatistics statistics() const { return statistics_; }

 private:
  enum class Mode : std::uint8_t { direct, capturing, walking };
  struct Graph {
    bool seen = false, made = false;
    bool native = false;  // the inner ops' own graph; else `calls`, kept here
    std::vector<std::function<void()>> calls;
  };

  void before(Call call) override;
  void launch(std::function<void()> run) override;
  void run_kept(const Graph& graph);

  bool enabled_;
  Mode mode_ = Mode::direct;
  Graph* capturing_ = nullptr;
  std::map<std::uint64_t, Graph> graphs_;
  StepGraphStatistics statistics_;
};

// `ops` held through a StepGraphOps (graphs on where `enabled`); null where `ops` is.
inline std::unique_ptr<DeviceOps> with_step_graphs(std::unique_ptr<DeviceOps> ops, bool enabled) {
  if (!ops) return nullptr;
  return std::make_unique<StepGraphOps>(std::move(ops), enabled);
}

}  // namespace fpscope
