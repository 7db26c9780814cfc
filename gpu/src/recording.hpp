// What the engine's recorded tensors carry, said once for every backend: gradients are recorded
// before unscaling, so they carry the step's loss scale; activations and weights carry none; every
// tensor is recorded before its cast to the low-precision format (flushes are visible).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "fpscope/snapshot/snapshot.hpp"

namespace fpscope {

// An empty record of a tensor, to be filled by its cast.
inline TensorRecord new_record(std::string name, TensorKind kind) {
  TensorRecord record;
  record.name = std::move(name);
  record.kind = kind;
  return record;
}

inline void set_recorded_scale(TensorRecord& record, double loss_scale) {
  record.scale = scale_carried_before_unscaling(record.kind, loss_scale);
  record.captured = Capture::before_cast;
}

// A recorded step's snapshot once its tensors are in: the step's number, loss, scale and skip, and
// every tensor's scale and capture as above.
inline void complete_snapshot(Snapshot& snapshot, std::int64_t step, double loss, double loss_scale, bool skipped) {
  snapshot.step = step;
  snapshot.loss = loss;
  snapshot.loss_scale = loss_scale;
  snapshot.skipped = skipped;
  for (TensorRecord& t : snapshot.tensors) set_recorded_scale(t, loss_scale);
}

}  // namespace fpscope
