// FollowThread: a RunLogFollower polled on its own thread, so that reading a long log (250 MB at
// about 20 MB/s) never holds up a frame. The follower appends to the thread-safe RunStore; the
// app copies from the store once per frame as it does for a run trained here, and says so
// (taken()): the thread reads the next window only after that. Otherwise it runs ahead of a slow
// frame, the store thins snapshots the app still holds, and memory grows past the store's budget
// by whatever was read meanwhile.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

#include "fpscope/analyzer/run_log_follower.hpp"

namespace fpscope::gui {

class FollowThread {
 public:
  FollowThread(std::filesystem::path path, RunStore& store, std::uint64_t window_bytes, std::uint64_t poll_bytes);
  ~FollowThread();  // stops polling
  FollowThread(const FollowThread&) = delete;
  FollowThread& operator=(const FollowThread&) = delete;

  // As of the last poll: the follower's error (empty while all is well), whether it read every
  // whole line the file had (a log still being written is caught up between its lines), how many
  // polls have finished, and how often the file started over.
  std::string error() const;
  bool caught_up() const;
  std::uint64_t polls() const;
  std::uint64_t restarts() const;
  const std::filesystem::path& path() const { return path_; }
  // The log as read so far, byte for byte (RunLogFollower::bytes_read); waits for a poll under way.
  std::string bytes_read() const;
  // The app has copied what the store holds: the thread may read on.
  void taken();
  // A poll has finished since the last taken(): the store has something the app has not copied.
  bool window_ready() const;

 private:
  void run();

  const std::filesystem::path path_;
  mutable std::mutex follower_mutex_;  // held while polling and while copying the bytes read
  RunLogFollower follower_;
  mutable std::mutex status_mutex_;  // guards the fields below; never held while polling
  std::condition_variable wake_;
  bool quit_ = false;
  std::string error_;
  bool caught_up_ = false;
  std::uint64_t polls_ = 0;
  std::uint64_t polls_taken_ = 0;  // polls_ as of the app's last taken()
  std::uint64_t restarts_ = 0;
  std::thread thread_;  // last: starts once everything above exists
};

}  // namespace fpscope::gui
