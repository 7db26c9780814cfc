// Text read a line at a time with a bound on a line's length: no input (/dev/zero, a file with no
// newline) can make one line take the memory the machine has.
#pragma once

#include <cstdint>
#include <istream>
#include <stdexcept>
#include <string>

namespace fpscope {

class LineTooLongError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class LineReader {
 public:
  // `name` names the input in errors ("run.jsonl", "standard input"). A line longer than
  // max_line_bytes() is an error: 1 GiB, or less where memory_per_byte times it is more than
  // available_memory_bytes(). 4 covers the string's own growth; a line parsed into JSON needs
  // many times more (run_log.hpp).
  LineReader(std::istream& in, std::string name, std::uint64_t memory_per_byte = 4);
  // The next line, without its '\n'; false at the end of the input. `complete` says whether the
  // line ended with a newline (a last line without one may be a write in progress). Throws
  // LineTooLongError naming the input and the line, std::runtime_error on a read error.
  bool next(std::string& line, bool& complete);
  std::uint64_t line_number() const { return line_number_; }
  std::uint64_t max_line_bytes() const { return max_line_bytes_; }

 private:
  std::istream& in_;
  std::string name_;
  std::uint64_t max_line_bytes_;
  std::uint64_t line_number_ = 0;
};

}  // namespace fpscope
