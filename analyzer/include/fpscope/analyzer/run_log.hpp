// The run log: JSON Lines, a header line then one line per Snapshot, append-only.
#pragma once

#include <cstdint>
#include <functional>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fpscope/snapshot/output_file.hpp"
#include "fpscope/snapshot/run_header.hpp"
#include "fpscope/snapshot/run_sink.hpp"
#include "fpscope/snapshot/snapshot.hpp"

namespace fpscope {

// A malformed run log. what() names the file and line: "run.jsonl:7: ...".
class RunLogError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A histogram's nonzero binades as the run log writes them: [[binade, count], ...].
nlohmann::json sparse_bins_json(const ExponentHistogram& histogram);
// A block format's statistics as the run log writes them, and fpscope analyze and quantize --json
// report them: elements, blocks, nan_blocks, zeros, flushed_to_zero, subnormal, saturated, and the
// scale codes and relative exponents as sparse [value, count] pairs (relative exponents are 0 or
// negative).
nlohmann::json block_statistics_json(const BlockStatistics& statistics);

// One line each, without the newline. A step line is a step record without histograms; a
// snapshot line is a step record with its "tensors".
std::string run_header_line(const RunHeader& header);
std::string snapshot_line(const Snapshot& snapshot);
std::string step_line(const StepRecord& step);

// `where` prefixes error messages ("run.jsonl:7").
RunHeader parse_run_header(std::string_view line, const std::string& where);

// A line after the header: every line is a step record; a snapshot line also holds histograms.
// Version 1 logs have no step lines (every line is a snapshot) and no per-tensor scale or
// capture; they are inferred as version 1 writers meant them: gradients carry the snapshot's
// loss scale, except the PyTorch bridge's weight gradients, which it read after unscaling, and
// the bridge's tensors are as_stored (it read them as PyTorch held them), fpscope train's
// before_cast.
struct RunLogLine {
  StepRecord step;
  std::optional<Snapshot> snapshot;
};
RunLogLine parse_run_log_line(std::string_view line, const std::string& where, const RunHeader& header);
// A snapshot line of the current version (tests, fuzzing).
Snapshot parse_snapshot(std::string_view line, const std::string& where);

struct RunLog {
  RunHeader header;
  std::vector<StepRecord> steps;       // every step the log records, in order
  std::vector<Snapshot> snapshots;     // the steps with histograms
  std::vector<std::string> warnings;   // such as a truncated last line, skipped
};

// Parsing a line into JSON takes up to about 27 bytes of memory per byte of text (measured with
// nlohmann-json on lines of empty objects; bins take 7 to 16): a line is refused when this many
// times its length is not available, rather than ending in std::bad_alloc.
inline constexpr std::uint64_t json_bytes_per_line_byte = 32;
// Throws RunLogError naming `where` when a line of line_bytes cannot be parsed in the memory left.
void check_line_memory(std::size_t line_bytes, const std::string& where);

// Each step once and in order (a repeated step would be summed into every series twice): throws
// RunLogError at `where` when `step` does not come after `previous`.
void check_step_order(std::optional<std::int64_t> previous, std::int64_t step, const std::string& where);
// Reads a whole run log. A last line without its newline that does not parse is taken for a
// write in progress or a crash: skipped with a warning. Anything else malformed is an error,
// steps out of order (check_step_order) among them.
RunLog read_run_log(const std::filesystem::path& path);

// Writes a whole run log through the output policy (output_file.hpp): atomically for a file.
// `progress`, where given, hears the share of the log made so far (0 .. 1, rising; 1 once written).
void write_run_log(const OutputTarget& target, const RunLog& log, const std::function<void(double)>& progress = {});
// The text write_run_log writes (`progress` told the share done, short of 1).
std::string run_log_text(const RunLog& log, const std::function<void(double)>& progress = {});

// Throws OutputError when `target` is an existing, non-empty regular file whose first line is not
// a run log's header: a new run log replaces only an earlier run log (a tensor, a text or a CSV a
// user names by mistake is left as it was). Reads at most the first megabyte.
void check_replaces_only_a_run_log(const OutputTarget& target);

// Writes a run log as it goes: the header at construction, then one line per append (each
// written whole, so a reader following the file sees whole lines). A file is locked for the
// appender's life: a second writer of the same log is refused (OutputError).
class RunLogAppender {
 public:
  // A new log: a file is replaced whole by one holding the header line.
  RunLogAppender(const OutputTarget& target, const RunHeader& header);
  // Goes on with the log a checkpoint covers: its header line must be this run's (the same run id
  // and settings) and its first position.bytes must have position.crc32; it is then cut back to
  // them. Throws OutputError naming the file when it is another run's log or was changed since.
  RunLogAppender(const OutputTarget& target, const RunHeader& header, const RunLogPosition& position);
  void append(const Snapshot& snapshot);
  void append_step(const StepRecord& step);
  // What a checkpoint records; sync() first makes those bytes durable.
  RunLogPosition position() const { return position_; }
  void sync();
  // The log is whole (the run ended, or was stopped): made durable, and the file it replaced,
  // kept until now, goes (AppendingOutput::keep). A log never kept puts that file back.
  void keep();

 private:
  void add(std::string_view text);
  AppendingOutput out_;
  RunLogPosition position_;
};

// The training driver's sink for fpscope train --out: begin() opens the log (a new one, or the
// one a checkpoint covers, cut back to it), each record is appended as it comes.
class RunLogSink final : public RunSink {
 public:
  // `resume_from`: go on with the log a checkpoint covers (RunLogAppender's second constructor).
  explicit RunLogSink(OutputTarget target, std::optional<RunLogPosition> resume_from = std::nullopt);
  void begin(const RunHeader& header) override;
  void append(Snapshot snapshot) override;
  void append_step(const StepRecord& step) override;
  RunLogPosition sync() override;
  // The run ended or was stopped, its log whole: RunLogAppender::keep. Not called when it failed.
  void keep();
  // From another thread, for a run stopped at once while its training thread is still inside a
  // step (a second Ctrl-C): waits for a line being written to be whole, keeps the log as it is
  // (keep), and from then on the sink writes nothing. Returns the step of the last line written
  // (recorded or not), or -1 where no step's line was.
  std::int64_t keep_as_it_is();

 private:
  std::mutex mutex_;  // one writer at a time: the training thread, or keep_as_it_is
  bool closed_ = false;
  std::int64_t last_step_ = -1;
  OutputTarget target_;
  std::optional<RunLogPosition> resume_from_;
  std::optional<RunLogAppender> log_;
};

}  // namespace fpscope
