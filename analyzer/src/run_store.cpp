// RunStore: a mutex around a vector of Snapshots.
#include "fpscope/analyzer/run_store.hpp"

namespace fpscope {

void RunStore::set_header(const RunHeader& header) {
  const std::lock_guard lock(mutex_);
  header_ = header;
}

RunHeader RunStore::header() const {
  const std::lock_guard lock(mutex_);
  return header_;
}

void RunStore::append(Snapshot snapshot) {
  const std::lock_guard lock(mutex_);
  snapshots_.push_back(std::move(snapshot));
}

void RunStore::clear() {
  const std::lock_guard lock(mutex_);
  snapshots_.clear();
}

std::size_t RunStore::size() const {
  const std::lock_guard lock(mutex_);
  return snapshots_.size();
}

std::vector<Snapshot> RunStore::copy_since(std::size_t first) const {
  const std::lock_guard lock(mutex_);
  if (first >= snapshots_.size()) return {};
  return {snapshots_.begin() + static_cast<std::ptrdiff_t>(first), snapshots_.end()};
}

}  // namespace fpscope
