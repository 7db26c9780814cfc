// Following a growing run log: whole lines only, restarting when the file is truncated or replaced.
#include "fpscope/analyzer/run_log_follower.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "fpscope/analyzer/run_log.hpp"
#include "fpscope/snapshot/memory_budget.hpp"

namespace fpscope {

RunLogFollower::RunLogFollower(std::filesystem::path path, RunStore& store, std::uint64_t window, std::uint64_t poll_bytes)
    : path_(std::move(path)), store_(store), window_bytes_(window), poll_bytes_(poll_bytes) {}

void RunLogFollower::start_over() {
  offset_ = 0;
  header_line_.clear();
  last_step_.reset();
  line_number_ = 0;
  have_header_ = false;
  stuck_ = false;
  store_.clear();
  store_.set_header(RunHeader{});
}

std::size_t RunLogFollower::poll() {
  caught_up_ = true;
  struct stat info {};
  if (::stat(path_.c_str(), &info) != 0) {
    error_ = "cannot read " + path_.string() + ": " + std::strerror(errno) + " (waiting for it)";
    return 0;
  }
  if (!S_ISREG(info.st_mode)) {
    error_ = path_.string() + " is not a regular file";
    return 0;
  }
  const auto size = static_cast<std::uint64_t>(info.st_size);
  const bool replaced = have_identity_ && (static_cast<std::uint64_t>(info.st_dev) != device_ || static_cast<std::uint64_t>(info.st_ino) != inode_);
  if (replaced || size < offset_ || (size > 0 && offset_ > 0 && !still_what_was_read())) {
    start_over();
    ++restarts_;
  }
  have_identity_ = true;
  device_ = static_cast<std::uint64_t>(info.st_dev);
  inode_ = static_cast<std::uint64_t>(info.st_ino);
  if (stuck_ && size == stuck_size_) return 0;  // the malformed line is still there, unchanged
  if (size == offset_) {
    if (!stuck_ && size == 0) error_.clear();
    return 0;
  }

  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    error_ = "cannot open " + path_.string() + ": " + std::strerror(errno);
    return 0;
  }
  in.seekg(static_cast<std::streamoff>(offset_));
  // At most one window per poll, so that a huge log loads over several frames; of it, poll_bytes
  // first, and the rest only where no line ends in those.
  const std::uint64_t window = std::min<std::uint64_t>(size - offset_, window_bytes_);
  std::uint64_t want = std::min(window, poll_bytes_);
  std::vector<char> buffer(want);
  in.read(buffer.data(), static_cast<std::streamsize>(want));
  auto got = static_cast<std::size_t>(in.gcount());
  if (got == want && want < window && std::memchr(buffer.data(), '\n', got) == nullptr) {
    buffer.resize(window);
    in.read(buffer.data() + got, static_cast<std::streamsize>(window - want));
    got += static_cast<std::size_t>(in.gcount());
    want = window;
  }
  caught_up_ = want == size - offset_;

  std::size_t added = 0;
  std::size_t line_start = 0;
  stuck_ = false;
  error_.clear();
  for (std::size_t i = 0; i < got; ++i) {
    if (buffer[i] != '\n') continue;
    std::string_view line(buffer.data() + line_start, i - line_start);
    const std::string where = path_.string() + ":" + std::to_string(line_number_ + 1);
    try {
      check_line_memory(line.size(), where);
      if (!have_header_) {
        header_ = parse_run_header(line, where);
        store_.set_header(header_);
        have_header_ = true;
        header_line_ = std::string(line) + '\n';
      } else if (!line.empty()) {
        RunLogLine parsed = parse_run_log_line(line, where, header_);
        check_step_order(last_step_, parsed.step.step, where);
        last_step_ = parsed.step.step;
        if (parsed.snapshot) {
          store_.append(std::move(*parsed.snapshot));
          ++added;
        } else {
          store_.append_step(parsed.step);
        }
      }
    } catch (const std::exception& e) {
      error_ = e.what();
      stuck_ = true;
      stuck_size_ = size;
      break;
    }
    ++line_number_;
    line_start = i + 1;
    offset_ += line.size() + 1;
    if (line_start >= poll_bytes_) {  // enough for one poll: a whole line left means more to read at once
      if (std::memchr(buffer.data() + line_start, '\n', got - line_start) != nullptr) caught_up_ = false;
      break;
    }
  }
  // A whole window without a newline is no run log line (it would be read again every poll).
  if (line_start == 0 && !stuck_ && got == window_bytes_) {
    error_ = path_.string() + ":" + std::to_string(line_number_ + 1) + ": a line longer than " + byte_size_text(window_bytes_) +
             ": not a run log line";
    stuck_ = true;
    stuck_size_ = size;
  }
  return added;
}

bool RunLogFollower::still_what_was_read() const {
  // A log rewritten in place (the same file cut and written again by a new run) keeps neither
  // its header line -- a new run has a new run id -- nor a line's end where the last read stopped.
  std::ifstream in(path_, std::ios::binary);
  if (!in) return true;  // unreadable now: the next read says so
  std::string start(header_line_.size(), '\0');
  in.read(start.data(), static_cast<std::streamsize>(start.size()));
  if (static_cast<std::size_t>(in.gcount()) != start.size() || start != header_line_) return false;
  char last = 0;
  in.seekg(static_cast<std::streamoff>(offset_ - 1));
  return in.get(last) && last == '\n';
}

std::string RunLogFollower::bytes_read() const {
  std::ifstream in(path_, std::ios::binary);
  struct stat info {};
  if (!in || ::stat(path_.c_str(), &info) != 0) throw std::runtime_error("cannot read " + path_.string() + ": " + std::strerror(errno));
  if (!have_identity_ || static_cast<std::uint64_t>(info.st_dev) != device_ || static_cast<std::uint64_t>(info.st_ino) != inode_ ||
      static_cast<std::uint64_t>(info.st_size) < offset_)
    throw std::runtime_error(path_.string() + " was replaced or cut since it was read: wait for the app to read it again");
  std::string bytes(offset_, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(offset_));
  if (static_cast<std::uint64_t>(in.gcount()) != offset_) throw std::runtime_error("cannot read " + path_.string() + " back");
  if (bytes.rfind(header_line_, 0) != 0 || (!bytes.empty() && bytes.back() != '\n'))
    throw std::runtime_error(path_.string() + " was rewritten since it was read: wait for the app to read it again");
  return bytes;
}

}  // namespace fpscope
