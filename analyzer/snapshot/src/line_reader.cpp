// LineReader: istream::getline in 64 KiB pieces, the line's length checked as it grows.
#include "fpscope/snapshot/line_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "fpscope/core/printable_text.hpp"
#include "fpscope/snapshot/memory_budget.hpp"

namespace fpscope {

namespace {
constexpr std::uint64_t one_gib = std::uint64_t{1} << 30;
}

LineReader::LineReader(std::istream& in, std::string name, std::uint64_t memory_per_byte)
    : in_(in), name_(printable_text(name, 200)), max_line_bytes_(one_gib) {
  if (const auto available = available_memory_bytes(); available && memory_per_byte > 0)
    max_line_bytes_ = std::max<std::uint64_t>(std::min(max_line_bytes_, *available / memory_per_byte), 1 << 16);
}

bool LineReader::next(std::string& line, bool& complete) {
  line.clear();
  complete = false;
  char chunk[1 << 16];
  for (;;) {
    in_.getline(chunk, sizeof chunk);
    const auto got = static_cast<std::size_t>(in_.gcount());
    if (in_.bad()) throw std::runtime_error(name_ + ": cannot read: " + std::strerror(errno));
    if (in_.eof()) {  // the end, with no newline after what was read
      line.append(chunk, got);
      if (line.empty()) return false;
      ++line_number_;
      return true;
    }
    if (in_.fail()) {  // the chunk filled up before a newline: the line goes on
      in_.clear();
      line.append(chunk, got);
      if (line.size() > max_line_bytes_)
        throw LineTooLongError(name_ + ":" + std::to_string(line_number_ + 1) + ": a line longer than " + byte_size_text(max_line_bytes_) +
                               " (more than this machine's memory can read): not a line of text");
      continue;
    }
    line.append(chunk, got - 1);  // gcount counts the newline, which is not stored
    complete = true;
    ++line_number_;
    return true;
  }
}

}  // namespace fpscope
