// RunStore: the thread-safe series of Snapshots of one run, shared by a producer and its readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "fpscope/snapshot/run_header.hpp"
#include "fpscope/snapshot/run_sink.hpp"
#include "fpscope/snapshot/snapshot.hpp"

namespace fpscope {

// The training thread (or a log follower) appends; the app and the CLI copy out what is new.
// Every member takes the lock once and holds it only to copy. As the training driver's sink, a
// run's begin() clears it and sets the header.
class RunStore final : public RunSink {
 public:
  void set_header(const RunHeader& header);
  RunHeader header() const;
  void begin(const RunHeader& header) override;
  // A recorded step: its snapshot, and its step record with it.
  void append(Snapshot snapshot) override;
  // A step without histograms (run logs record every step; snapshots only every N).
  void append_step(const StepRecord& step) override;
  void forget() override { clear(); }
  void clear();
  std::size_t size() const;

  // Memory bound. Once the snapshots take more than `bytes` (estimated from what they hold), the
  // older ones are thinned: every other one is dropped, except the first, the newest
  // `keep_latest`, and the steps pinned. Repeated as the run grows, old steps end up evenly
  // spaced and ever sparser while the recent ones stay whole. 0 (the default) keeps everything.
  void set_memory_budget(std::size_t bytes, std::size_t keep_latest = 1024);
  void pin(std::int64_t step);    // kept whatever thinning happens (pinning does not bring a
  void unpin(std::int64_t step);  // dropped step back)
  bool pinned(std::int64_t step) const;
  std::size_t snapshot_bytes() const;  // the estimate the budget is held to
  std::uint64_t thinned_snapshots() const;  // dropped so far in this run
  // Snapshots [first, size()), copied; empty when first >= size().
  std::vector<Snapshot> copy_since(std::size_t first) const;

  // What a reader that has seen `first` snapshots of `generation` in `layout` needs, taken under
  // one lock: when the store was cleared since (a new run), generation differs and snapshots and
  // steps start at 0; when it was thinned since, layout differs and the snapshots start at 0 (the
  // steps, never thinned, go on from first_step).
  struct Update {
    std::uint64_t generation = 0;
    std::uint64_t layout = 0;  // changes whenever thinning removes snapshots
    RunHeader header;
    std::vector<std::shared_ptr<const Snapshot>> snapshots;  // shared, not copied
    std::vector<StepRecord> steps;                           // step records from first_step on
  };
  Update update_since(std::uint64_t generation, std::size_t first, std::size_t first_step = 0, std::uint64_t layout = 0) const;
  std::size_t step_count() const;
  // Incremented by every clear().
  std::uint64_t generation() const;

 private:
  mutable std::mutex mutex_;
  RunHeader header_;
  std::vector<std::shared_ptr<const Snapshot>> snapshots_;
  void thin_if_over_budget();  // with the lock held

  std::vector<StepRecord> steps_;
  std::uint64_t generation_ = 0;
  std::uint64_t layout_ = 0;
  std::vector<std::size_t> bytes_of_;  // per snapshot, as estimated on append
  std::size_t bytes_ = 0;
  std::size_t budget_ = 0;
  std::size_t keep_latest_ = 1024;
  std::set<std::int64_t> pinned_;
  std::uint64_t thinned_ = 0;
};

}  // namespace fpscope
