// RunStore: a mutex around a vector of Snapshots.
#include "fpscope/snapshot/run_store.hpp"

#include <algorithm>
#include <memory>

namespace fpscope {

namespace {

// What a snapshot holds on the heap and in its control block, near enough to bound memory by.
std::size_t estimated_bytes(const Snapshot& snapshot) {
  std::size_t bytes = sizeof(Snapshot) + 2 * sizeof(void*) + 16 + snapshot.tensors.capacity() * sizeof(TensorRecord);
  for (const TensorRecord& t : snapshot.tensors) {
    bytes += t.name.capacity() > 15 ? t.name.capacity() + 1 : 0;
    if (t.blocks) bytes += sizeof(BlockRecord) + 16;  // held on the heap (BoxedOptional)
  }
  return bytes;
}

}  // namespace

void RunStore::set_header(const RunHeader& header) {
  const std::lock_guard lock(mutex_);
  header_ = header;
}

void RunStore::begin(const RunHeader& header) {
  clear();
  set_header(header);
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
  bytes_of_.push_back(estimated_bytes(snapshot));
  bytes_ += bytes_of_.back();
  snapshots_.push_back(std::make_shared<const Snapshot>(std::move(snapshot)));
  thin_if_over_budget();
}

void RunStore::thin_if_over_budget() {
  if (budget_ == 0 || bytes_ <= budget_ || snapshots_.size() < 3) return;
  // The newest keep_latest stay whole, as long as they take at most half the budget (a model with
  // many tensors keeps fewer); every other snapshot before them goes, unless pinned or the first.
  std::size_t latest = 0, latest_bytes = 0;
  while (latest < keep_latest_ && latest + 2 < snapshots_.size() &&
         latest_bytes + bytes_of_[snapshots_.size() - 1 - latest] <= budget_ / 2)
    latest_bytes += bytes_of_[snapshots_.size() - 1 - latest++];
  const std::size_t old_end = snapshots_.size() - std::max<std::size_t>(latest, 1);
  std::vector<std::shared_ptr<const Snapshot>> kept;
  std::vector<std::size_t> kept_bytes;
  kept.reserve(snapshots_.size());
  kept_bytes.reserve(snapshots_.size());
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < snapshots_.size(); ++i) {
    const bool drop = i > 0 && i < old_end && i % 2 == 1 && !pinned_.contains(snapshots_[i]->step);
    if (drop) {
      bytes_ -= bytes_of_[i];
      ++dropped;
      continue;
    }
    kept.push_back(std::move(snapshots_[i]));
    kept_bytes.push_back(bytes_of_[i]);
  }
  if (dropped == 0) return;
  snapshots_ = std::move(kept);
  bytes_of_ = std::move(kept_bytes);
  thinned_ += dropped;
  ++layout_;
}

void RunStore::set_memory_budget(std::size_t bytes, std::size_t keep_latest) {
  const std::lock_guard lock(mutex_);
  budget_ = bytes;
  keep_latest_ = keep_latest;
  thin_if_over_budget();
}

void RunStore::pin(std::int64_t step) {
  const std::lock_guard lock(mutex_);
  pinned_.insert(step);
}

void RunStore::unpin(std::int64_t step) {
  const std::lock_guard lock(mutex_);
  pinned_.erase(step);
}

bool RunStore::pinned(std::int64_t step) const {
  const std::lock_guard lock(mutex_);
  return pinned_.contains(step);
}

std::size_t RunStore::snapshot_bytes() const {
  const std::lock_guard lock(mutex_);
  return bytes_;
}

std::uint64_t RunStore::thinned_snapshots() const {
  const std::lock_guard lock(mutex_);
  return thinned_;
}

void RunStore::clear() {
  const std::lock_guard lock(mutex_);
  snapshots_.clear();
  steps_.clear();
  bytes_of_.clear();
  bytes_ = 0;
  thinned_ = 0;
  pinned_.clear();
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

RunStore::Update RunStore::update_since(std::uint64_t generation, std::size_t first, std::size_t first_step, std::uint64_t layout) const {
  const std::lock_guard lock(mutex_);
  Update update;
  update.generation = generation_;
  update.layout = layout_;
  update.header = header_;
  if (generation != generation_) first = 0, first_step = 0;
  if (layout != layout_) first = 0;
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
