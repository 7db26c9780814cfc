#include "step_graphs.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fpscope/gpu/training_config.hpp"

namespace fpscope {

bool step_graphs_by_default() {
  const char* setting = std::getenv("FPSCOPE_STEP_GRAPHS");
  return setting == nullptr || (std::string_view(setting) != "0" && std::string_view(setting) != "off");
}

void StepGraphOps::run(std::uint64_t key, bool eligible, const std::function<void()>& phases) {
  if (!enabled_ || !eligible || mode_ != Mode::direct) return phases();
  Graph& graph = graphs_[key];
  if (!graph.seen) {
    phases();  // (memory it makes forgets every graph: `graph` is not used after)
    graphs_[key].seen = true;
    return;
  }
  if (!graph.made) {
    graph.calls.clear();
    graph.native = inner().begin_capture();
    mode_ = Mode::capturing, capturing_ = &graph;
    try {
      phases();
    } catch (...) {
      if (graph.native) inner().abandon_capture();
      mode_ = Mode::direct, capturing_ = nullptr;
      graphs_.erase(key);
      throw;
    }
    mode_ = Mode::direct, capturing_ = nullptr;
    if (!graph.native) {
      run_kept(graph);
    } else {
      try {
        inner().end_capture(key);
      } catch (const std::exception& e) {
        graphs_.erase(key);
        throw std::runtime_error(std::string(e.what()) + " (the step captured as a graph; FPSCOPE_STEP_GRAPHS=0 runs steps as they come)");
      }
    }
    graph.made = true;
    ++statistics_.captured;
    return;
  }
  mode_ = Mode::walking;
  try {
    phases();
  } catch (...) {
    mode_ = Mode::direct;
    throw;
  }
  mode_ = Mode::direct;
  if (graph.native) inner().replay(key);
  else run_kept(graph);
  ++statistics_.replayed;
}

void StepGraphOps::forget() {
  graphs_.clear();
  inner().forget_graphs();
}

void StepGraphOps::before(Call call) {
  if (mode_ != Mode::direct) {
    const char* what = call == Call::allocate ? "made memory" : call == Call::release ? "gave memory back" : call == Call::upload ? "uploaded" : "downloaded";
    throw std::logic_error(std::string("a device step captured or replayed as a graph ") + what + " among its launches");
  }
  if (call == Call::allocate || call == Call::release) forget();
}

void StepGraphOps::launch(std::function<void()> run) {
  switch (mode_) {
    case Mode::direct: run(); return;
    case Mode::capturing:
      if (capturing_->native) run();  // into the stream's capture
      else capturing_->calls.push_back(std::move(run));
      return;
    case Mode::walking: return;  // the graph holds it
  }
}

void StepGraphOps::run_kept(const Graph& graph) {
  for (const std::function<void()>& call : graph.calls) call();
}

}  // namespace fpscope
