// RunStore: the thread-safe series of Snapshots of one run, shared by a producer and its readers.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "fpscope/analyzer/run_log.hpp"
#include "fpscope/analyzer/snapshot.hpp"

namespace fpscope {

// The training thread (or a log follower) appends; the app and the CLI copy out what is new.
// Every member takes the lock once and holds it only to copy.
class RunStore {
 public:
  void set_header(const RunHeader& header);
  RunHeader header() const;
  void append(Snapshot snapshot);
  void clear();
  std::size_t size() const;
  // Snapshots [first, size()), copied; empty when first >= size().
  std::vector<Snapshot> copy_since(std::size_t first) const;

 private:
  mutable std::mutex mutex_;
  RunHeader header_;
  std::vector<Snapshot> snapshots_;
};

}  // namespace fpscope
