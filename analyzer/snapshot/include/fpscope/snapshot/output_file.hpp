// The one output policy: every file fpscope writes (CLI and app) is resolved, checked and written here.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fpscope {

// An output that cannot be written, or must not be; what() is one sentence naming the path the
// user gave (never a temporary file).
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where an output path leads, decided before anything is opened for writing.
struct OutputTarget {
  enum class Kind : std::uint8_t {
    descriptor,    // "-" (standard output), /dev/stdout, /dev/fd/N, /proc/self/fd/N: written to fd N
    stream,        // a device, FIFO or socket: opened and written in place, never replaced
    regular_file,  // an existing regular file: replaced atomically, keeping its mode and owner
    new_file,      // nothing there yet: created atomically
  };
  Kind kind = Kind::new_file;
  std::filesystem::path given;     // as the user wrote it: what messages name
  std::string role;                // the option that named it ("--checkpoint"), for messages; may be empty
  std::filesystem::path resolved;  // the symlinks followed: the file that is replaced or created
  int descriptor = -1;             // for Kind::descriptor
  bool exists = false;             // device and inode are known
  dev_t device = 0;
  ino_t inode = 0;

  bool is_file() const { return kind == Kind::regular_file || kind == Kind::new_file; }
};

// Follows `path` through its symlinks and checks that it can be written: its folder exists and
// is writable, it is not a folder, an existing file is writable by this user. Opens nothing for
// writing. Throws OutputError naming `role` (the option, such as "--csv") and the path.
OutputTarget resolve_output(const std::filesystem::path& path, std::string_view role = {});

// Refuses, before anything is written, an output that is the same file (same device and inode,
// or the same path for files not yet there) as one of the inputs or as another output. Inputs
// that do not exist are ignored (their readers report them). Throws OutputError.
void check_outputs(std::span<const OutputTarget> outputs, std::span<const std::filesystem::path> inputs);

// Refuses to replace a file of another kind: where `target` is an existing, non-empty regular file
// whose first `bytes` bytes (or fewer, all it has) `is_one` does not accept, throws OutputError
// saying it is not `what` ("an fpscope run log") and is left as it is. Reads nothing else.
void check_replaces_only(const OutputTarget& target, std::size_t bytes, std::string_view what, const std::function<bool(std::string_view)>& is_one);

// The kinds of file fpscope writes besides run logs and checkpoints (run_log.hpp, checkpoint.hpp),
// each known by how it starts: a .npy array by its magic "\x93NUMPY", a PNG by its signature, an
// SVG by "<svg" or "<?xml" (after spaces or a byte-order mark), a CSV as text -- no NUL byte in
// its first 4 KiB -- whose first line holds a comma and opens no JSON object (a run log's line).
enum class FileKind : std::uint8_t { csv, png, svg, npy };
std::string_view file_kind_name(FileKind kind);  // "a CSV file", "a PNG image", ...
// Whether a file starting with `start` (its first 4 KiB, or all it has) is of that kind.
bool starts_as(FileKind kind, std::string_view start);
// check_replaces_only for that kind: an export replaces an earlier export, never a run log, a
// checkpoint, a tensor or anything else a mistyped name leads to.
void check_replaces_only(const OutputTarget& target, FileKind kind);

// Writes `contents` whole. A file (new or regular) goes to a temporary in its folder that no
// user file can be named like, is fsynced and renamed over the target, and the folder is
// fsynced: a reader, a kill or a power cut sees the old file or the new one, never a part.
// A descriptor or stream is written in place, every write checked. Throws OutputError.
void write_output(const OutputTarget& target, std::string_view contents);
// resolve_output + write_output.
void write_output(const std::filesystem::path& path, std::string_view contents);
// Several outputs of one command, all or none: every file is written whole beside its target
// before any is replaced, so a failure (a full disk, a file another writer holds) leaves every
// target as it was. (A descriptor or stream among them is written in place, after the files are
// ready.) write_output and write_outputs refuse to replace a file a run log's writer holds.
void write_outputs(std::span<const OutputTarget> targets, std::span<const std::string_view> contents);

// A file written as it goes (the run log), with one writer at a time: a file target is locked
// (flock) for the writer's lifetime, and a second writer is refused in one sentence.
class AppendingOutput {
 public:
  // A new file: `first` (the header line) is written to a temporary and renamed over the target
  // (a follower sees a new file, never a torn one); refused when another writer holds the
  // target. A file it replaces is kept as NAME.previous until keep(): the log's writer calls
  // keep() once the log is whole, and an AppendingOutput destroyed without it (the run failed)
  // puts the replaced file back. A descriptor or stream gets `first` written in place.
  static AppendingOutput create(const OutputTarget& target, std::string_view first);
  // Goes on with an existing file: locked, handed to `accept(prefix)` with its first
  // `keep_bytes` bytes (accept throws to refuse: another run's log), then cut back to them.
  // Only for files; throws OutputError when the file is shorter than keep_bytes.
  template <typename Accept>
  static AppendingOutput resume(const OutputTarget& target, std::uint64_t keep_bytes, Accept accept) {
    AppendingOutput out = open_locked_for_resume(target, keep_bytes);
    accept(out.read_prefix(keep_bytes));
    out.cut_to(keep_bytes);
    return out;
  }

  AppendingOutput(AppendingOutput&& other) noexcept;
  AppendingOutput& operator=(AppendingOutput&& other) noexcept;
  AppendingOutput(const AppendingOutput&) = delete;
  AppendingOutput& operator=(const AppendingOutput&) = delete;
  ~AppendingOutput();

  void append(std::string_view text);  // every byte written, or OutputError
  void sync();                         // a file's bytes made durable (fsync); nothing for streams
  void keep();                         // the log is whole: the file it replaced (NAME.previous) goes
  std::uint64_t bytes_written() const { return bytes_; }  // the file's length after the last append
  const OutputTarget& target() const { return target_; }

 private:
  AppendingOutput() = default;
  static AppendingOutput open_locked_for_resume(const OutputTarget& target, std::uint64_t keep_bytes);
  std::string read_prefix(std::uint64_t bytes);
  void cut_to(std::uint64_t bytes);

  OutputTarget target_;
  int fd_ = -1;
  bool owns_fd_ = false;
  std::uint64_t bytes_ = 0;
  std::filesystem::path previous_;  // the replaced file, kept until keep()
};

// Standard output as an output of the command: "-" is resolve_output("-").
inline const std::filesystem::path standard_output_path{"-"};

}  // namespace fpscope
