// FollowThread: poll again once the app has taken what a poll read while a log has lines left,
// every 100 ms once caught up.
#include "follow_thread.hpp"

#include <chrono>

namespace fpscope::gui {

FollowThread::FollowThread(std::filesystem::path path, RunStore& store, std::uint64_t window_bytes, std::uint64_t poll_bytes)
    : path_(path), follower_(std::move(path), store, window_bytes, poll_bytes), thread_([this] { run(); }) {}

FollowThread::~FollowThread() {
  {
    const std::lock_guard lock(status_mutex_);
    quit_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void FollowThread::run() {
  for (;;) {
    std::string error;
    bool caught_up = false;
    std::uint64_t restarts = 0;
    {
      const std::lock_guard lock(follower_mutex_);
      follower_.poll();
      error = follower_.error();
      caught_up = follower_.caught_up();
      restarts = follower_.restarts();
    }
    std::unique_lock lock(status_mutex_);
    error_ = std::move(error);
    caught_up_ = caught_up;
    restarts_ = restarts;
    ++polls_;
    if (quit_) return;
    if (caught_up) wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return quit_; });
    else wake_.wait(lock, [this] { return quit_ || polls_taken_ == polls_; });
    if (quit_) return;
  }
}

void FollowThread::taken() {
  {
    const std::lock_guard lock(status_mutex_);
    polls_taken_ = polls_;
  }
  wake_.notify_all();
}

bool FollowThread::window_ready() const {
  const std::lock_guard lock(status_mutex_);
  return polls_taken_ != polls_;
}

std::string FollowThread::error() const {
  const std::lock_guard lock(status_mutex_);
  return error_;
}

bool FollowThread::caught_up() const {
  const std::lock_guard lock(status_mutex_);
  return caught_up_;
}

std::uint64_t FollowThread::polls() const {
  const std::lock_guard lock(status_mutex_);
  return polls_;
}

std::uint64_t FollowThread::restarts() const {
  const std::lock_guard lock(status_mutex_);
  return restarts_;
}

std::string FollowThread::bytes_read() const {
  const std::lock_guard lock(follower_mutex_);
  return follower_.bytes_read();
}

}  // namespace fpscope::gui
