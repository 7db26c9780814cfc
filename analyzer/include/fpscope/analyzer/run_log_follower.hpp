// RunLogFollower: reads a run log that another process is still writing, a few lines at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>

#include "fpscope/snapshot/run_store.hpp"

namespace fpscope {

// Each poll() reads the complete lines that arrived since the last one and appends their
// Snapshots to the store. It never throws and never gives up: a missing file, a malformed line,
// or a file that was truncated, replaced or rewritten in place (a new run written over the old
// one: another file, a shorter one, or one whose header line or last line's end moved) is
// reported by error() / restarts() and the follower keeps polling.
class RunLogFollower {
 public:
  // Each poll reads at most window_bytes; a line longer than that is an error (no run log line is).
  // It stops after the line that brings what it took to poll_bytes (the rest is read again next
  // time): a reader that wants few snapshots at a time keeps its window for long lines.
  RunLogFollower(std::filesystem::path path, RunStore& store, std::uint64_t window_bytes = std::uint64_t{64} << 20,
                 std::uint64_t poll_bytes = std::numeric_limits<std::uint64_t>::max());
  // Returns how many snapshots were added.
  std::size_t poll();
  // Empty while all is well; otherwise one sentence naming the file (and line).
  const std::string& error() const { return error_; }
  // Whether the last poll left no whole line unread: false only when it stopped at its window or
  // at poll_bytes with more of the file to come (then poll again at once).
  bool caught_up() const { return caught_up_; }
  // How many times the file was found truncated or replaced, and reading started over.
  std::uint64_t restarts() const { return restarts_; }
  const std::filesystem::path& path() const { return path_; }
  // The log as read so far -- the header and every whole line now in the store -- byte for byte
  // as the file holds it, fields fpscope does not know included: what saving a followed run
  // writes. Throws std::runtime_error naming the file when it was replaced or cut since.
  std::string bytes_read() const;

 private:
  void start_over();
  bool still_what_was_read() const;  // the header line and the last line's end where they were read

  std::filesystem::path path_;
  RunStore& store_;
  std::uint64_t window_bytes_;
  std::uint64_t poll_bytes_;
  std::uint64_t offset_ = 0;      // bytes consumed: whole lines only
  bool caught_up_ = true;
  std::uint64_t line_number_ = 0;
  bool have_header_ = false;
  RunHeader header_;  // how to read the lines after it (version 1 or 2)
  std::string header_line_;  // as read, with its newline
  std::optional<std::int64_t> last_step_;  // the last line's step: the next must come after it
  bool have_identity_ = false;
  std::uint64_t device_ = 0, inode_ = 0;
  std::uint64_t stuck_size_ = 0;  // size when a malformed line stopped reading
  bool stuck_ = false;
  std::string error_;
  std::uint64_t restarts_ = 0;
};

}  // namespace fpscope
