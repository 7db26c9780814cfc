// The run log: JSON Lines, a header line then one line per Snapshot, append-only.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/analyzer/snapshot.hpp"

namespace fpscope {

inline constexpr int run_log_schema_version = 1;

// What the run was: written once, as the first line.
struct RunHeader {
  int schema_version = run_log_schema_version;
  std::string source;     // "fpscope train", "fpscope_torch", "npy"
  std::string model;      // free text, such as "784-512-512-10 relu"
  std::string precision;  // "fp32", "fp16", "bf16", "fp16-pure", ...
  std::string format;     // the low-precision format tensors are cast to, such as "fp16"
  std::string rounding;   // rounding-mode name
  std::string scaler;     // loss scaling: "none", "static 1024", "dynamic"
  friend bool operator==(const RunHeader&, const RunHeader&) = default;
};

// A malformed run log. what() names the file and line: "run.jsonl:7: ...".
class RunLogError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A histogram's nonzero binades as the run log writes them: [[binade, count], ...].
nlohmann::json sparse_bins_json(const ExponentHistogram& histogram);

// One line each, without the newline.
std::string run_header_line(const RunHeader& header);
std::string snapshot_line(const Snapshot& snapshot);
// `where` prefixes error messages ("run.jsonl:7").
RunHeader parse_run_header(std::string_view line, const std::string& where);
Snapshot parse_snapshot(std::string_view line, const std::string& where);

struct RunLog {
  RunHeader header;
  std::vector<Snapshot> snapshots;
  std::vector<std::string> warnings;  // such as a truncated last line, skipped
};

// Reads a whole run log. A last line without its newline that does not parse is taken for a
// write in progress or a crash: skipped with a warning. Anything else malformed is an error.
RunLog read_run_log(const std::filesystem::path& path);

// Writes a whole run log atomically (a temporary file beside it, then rename).
void write_run_log(const std::filesystem::path& path, const RunLog& log);

// Writes a run log as it goes: the header at construction (the file is created atomically),
// then one flushed line per append, so a reader following the file sees whole lines.
class RunLogAppender {
 public:
  RunLogAppender(const std::filesystem::path& path, const RunHeader& header);
  // Goes on with a log a checkpoint left: the file must start with this header and be at least
  // `resume_at_bytes` long; it is cut back to that length (dropping steps after the checkpoint)
  // and appended to. Throws std::runtime_error naming the file when it does not fit.
  RunLogAppender(const std::filesystem::path& path, const RunHeader& header, std::uint64_t resume_at_bytes);
  ~RunLogAppender();
  RunLogAppender(const RunLogAppender&) = delete;
  RunLogAppender& operator=(const RunLogAppender&) = delete;
  void append(const Snapshot& snapshot);
  // The file's length after the last append (what a checkpoint records).
  std::uint64_t bytes_written() const { return bytes_; }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::uint64_t bytes_ = 0;
};

// Writes `contents` to `path` through a temporary file and a rename: readers see the old file
// or the new one, never a part. Throws std::runtime_error naming the path on failure.
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);

}  // namespace fpscope
