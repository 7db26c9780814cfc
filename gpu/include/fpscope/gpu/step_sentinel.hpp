// The step sentinel: on every step, recorded or not, each tensor the step would record read once
// for its largest magnitude (core's largest_magnitude_bits (bulk.hpp), in the pass that casts it;
// on a device, amax_bits beside the cast), in the order the step makes them: the weights, the
// forward's activations, then the backward's gradients (a GPT's weight gradients after its
// activation gradients, the last layer's first). What a bad step's culprit is found from
// (culprit.hpp).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "fpscope/snapshot/culprit.hpp"

namespace fpscope {

class StepSentinel {
 public:
  // The next tensor's reading, at 0 until its cast takes it; the address stays put.
  std::uint32_t* watch(std::string name, TensorKind kind) {
    readings_.push_back({std::move(name), kind, 0});
    return &readings_.back().largest_bits;
  }
  std::vector<SentinelReading> take() { return {std::make_move_iterator(readings_.begin()), std::make_move_iterator(readings_.end())}; }

 private:
  std::deque<SentinelReading> readings_;  // a deque: watch's addresses stay valid
};

}  // namespace fpscope
