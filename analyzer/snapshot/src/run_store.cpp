// RunStore: a mutex around a vector of Snapshots.
#include "fpscope/snapshot/run_store.hpp"

namespace fpscope {

void RunStore::set_header(const RunHeader& header) {
  const std::lock_guard lock(mutex_);
  header_ = header;
}

RunHeader RunStore::header() const {
  const std::lock_guard lock(mutex_);
  return header_;
}

void RunStore::append_step(const StepRecord& step) {
  const std::lock_guard lock(mutex_);
  steps_.push_back(step);
}

void RunStore::append(Snapshot snapshot) {
  const std::lock_guard lock(mutex_);
  steps_.push_back(snapshot.step_record());
  snapshots_.push_back(std::make_shared<const Snapshot>(std::move(snapshot)));
}

void RunStore::clear() {
  const std::lock_guard lock(mutex_);
  snapshots_.clear();
  steps_.clear();
  ++generation_;
}

std::size_t RunStore::size() const {
  const std::lock_guard lock(mutex_);
  return snapshots_.size();
}

std::vector<Snapshot> RunStore::copy_since(std::size_t first) const {
  const std::lock_guard lock(mutex_);
  if (first >= snapshots_.size()) return {};
  std::vector<Snapshot> copies;
  copies.reserve(snapshots_.size() - first);
  for (std::size_t i = first; i < snapshots_.size(); ++i) copies.push_back(*snapshots_[i]);
  return copies;
}

RunStore::Update RunStore::update_since(std::uint64_t generation, std::size_t first, std::size_t first_step) const {
  const std::lock_guard lock(mutex_);
  Update update;
  update.generation = generation_;
  update.header = header_;
  if (generation != generation_) first = 0, first_step = 0;
  if (first < snapshots_.size()) update.snapshots.assign(snapshots_.begin() + static_cast<std::ptrdiff_t>(first), snapshots_.end());
  if (first_step < steps_.size()) update.steps.assign(steps_.begin() + static_cast<std::ptrdiff_t>(first_step), steps_.end());
  return update;
}

std::size_t RunStore::step_count() const {
  const std::lock_guard lock(mutex_);
  return steps_.size();
}

std::uint64_t RunStore::generation() const {
  const std::lock_guard lock(mutex_);
  return generation_;
}

}  // namespace fpscope
