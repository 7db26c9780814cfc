// RunSink: where a training run's records go. The training driver (TrainingSession) writes to one;
// the app's RunStore is one, a run log on disk with its checkpoints is another (run_log.hpp).
#pragma once

#include <cstdint>

#include "fpscope/snapshot/run_header.hpp"
#include "fpscope/snapshot/snapshot.hpp"

namespace fpscope {

// Where a run log stood when a checkpoint was taken: its length and the CRC-32 of those bytes.
struct RunLogPosition {
  std::uint64_t bytes = 0;
  std::uint32_t crc32 = 0;
  friend bool operator==(const RunLogPosition&, const RunLogPosition&) = default;
};

class RunSink {
 public:
  virtual ~RunSink() = default;
  // A run begins (or a checkpointed one goes on): what came before is dropped and `header` is the
  // run's. Called on the thread that starts the run, before any step, so a refusal (a log that is
  // another run's, a file that cannot be written) reaches the caller and nothing has trained.
  virtual void begin(const RunHeader& header) = 0;
  // A recorded step: its snapshot, which carries its step record.
  virtual void append(Snapshot snapshot) = 0;
  // A step without histograms.
  virtual void append_step(const StepRecord& step) = 0;
  // Whether the sink keeps a record of every step; a sink that does not (fpscope train with no
  // --out) spares the trainer recording and, on a device, reading each step's loss back.
  virtual bool keeps_steps() const { return true; }
  // Makes what was appended durable and says where a log on disk stands, for a checkpoint; a sink
  // that keeps nothing on disk answers {}.
  virtual RunLogPosition sync() { return {}; }
  // Forgets what it holds in memory (the app's Reset); what is on disk stays.
  virtual void forget() {}
};

// A sink that keeps nothing: a run whose only output is its summary (and its checkpoints).
class NullRunSink final : public RunSink {
 public:
  void begin(const RunHeader&) override {}
  void append(Snapshot) override {}
  void append_step(const StepRecord&) override {}
  bool keeps_steps() const override { return false; }
};

}  // namespace fpscope
