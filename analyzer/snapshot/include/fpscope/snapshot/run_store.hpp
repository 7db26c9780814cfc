// RunStore: the thread-safe series of Snapshots of one run, shared by a producer and its readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "fpscope/snapshot/run_header.hpp"
#include "fpscope/snapshot/snapshot.hpp"

namespace fpscope {

// The training thread (or a log follower) appends; the app and the CLI copy out what is new.
// Every member takes the lock once and holds it only to copy.
class RunStore {
 public:
  void set_header(const RunHeader& header);
  RunHeader header() const;
  // A recorded step: its snapshot, and its step record with it.
  void append(Snapshot snapshot);
  // A step without histograms (run logs record every step; snapshots only every N).
  void append_step(const StepRecord& step);
  void clear();
  std::size_t size() const;
  // Snapshots [first, size()), copied; empty when first >= size().
  std::vector<Snapshot> copy_since(std::size_t first) const;

  // What a reader that has seen `first` snapshots of `generation` needs, taken under one lock:
  // when the store was cleared since (a new run), generation differs and snapshots start at 0.
  struct Update {
    std::uint64_t generation = 0;
    RunHeader header;
    std::vector<std::shared_ptr<const Snapshot>> snapshots;  // shared, not copied
    std::vector<StepRecord> steps;                           // step records from first_step on
  };
  Update update_since(std::uint64_t generation, std::size_t first, std::size_t first_step = 0) const;
  std::size_t step_count() const;
  // Incremented by every clear().
  std::uint64_t generation() const;

 private:
  mutable std::mutex mutex_;
  RunHeader header_;
  std::vector<std::shared_ptr<const Snapshot>> snapshots_;
  std::vector<StepRecord> steps_;
  std::uint64_t generation_ = 0;
};

}  // namespace fpscope
