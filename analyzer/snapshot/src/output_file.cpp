// The output policy: resolving, checking and writing every file fpscope writes.
#include "fpscope/snapshot/output_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <utility>

#include "fpscope/core/printable_text.hpp"

namespace fpscope {

namespace {

constexpr std::size_t message_path_bytes = 200;

std::string shown(const std::filesystem::path& path) { return printable_text(path.string(), message_path_bytes); }
// "--csv out.csv", or the path alone where no option named it.
std::string shown(const OutputTarget& target) { return (target.role.empty() ? "" : target.role + " ") + shown(target.given); }

[[noreturn]] void fail(const OutputTarget& target, const std::string& what) { throw OutputError(shown(target) + ": " + what); }

[[noreturn]] void fail_errno(const OutputTarget& target, const std::string& what, int error) {
  fail(target, what + ": " + std::strerror(error));
}

// "N" when `text` is a whole non-negative decimal integer that fits an int.
bool parse_descriptor(std::string_view text, int& descriptor) {
  const auto result = std::from_chars(text.data(), text.data() + text.size(), descriptor);
  return !text.empty() && result.ec == std::errc{} && result.ptr == text.data() + text.size() && descriptor >= 0;
}

// The descriptor a path names without naming a file: "-", /dev/stdout, /dev/stderr, /dev/fd/N,
// /proc/self/fd/N and /proc/<this process>/fd/N. Opening such a path would reopen whatever the
// descriptor points at (truncating a redirected file, or failing for a pipe); writing to the
// descriptor is what the user means.
bool names_descriptor(const std::filesystem::path& path, int& descriptor) {
  const std::string text = path.lexically_normal().string();
  if (text == "-" || text == "/dev/stdout") return descriptor = STDOUT_FILENO, true;
  if (text == "/dev/stderr") return descriptor = STDERR_FILENO, true;
  const std::string own = "/proc/" + std::to_string(::getpid()) + "/fd/";
  for (const std::string_view prefix : {std::string_view("/dev/fd/"), std::string_view("/proc/self/fd/"), std::string_view(own)})
    if (text.size() > prefix.size() && text.compare(0, prefix.size(), prefix) == 0 && parse_descriptor(std::string_view(text).substr(prefix.size()), descriptor))
      return true;
  return false;
}

bool same_file(const struct stat& a, dev_t device, ino_t inode) { return a.st_dev == device && a.st_ino == inode; }

// Whether writing the output could destroy data: a file, a FIFO, or a descriptor that points at
// a regular file. A terminal or /dev/null read and written at once loses nothing.
bool holds_data(const OutputTarget& out) {
  if (out.is_file()) return true;
  struct stat info {};
  if (out.kind == OutputTarget::Kind::descriptor) return ::fstat(out.descriptor, &info) == 0 && (S_ISREG(info.st_mode) || S_ISFIFO(info.st_mode));
  return ::stat(out.resolved.c_str(), &info) == 0 && S_ISFIFO(info.st_mode);
}

// What makes two outputs the same: device and inode where the file exists, else its path with
// every symlink of its folders resolved.
std::string identity(const OutputTarget& out) {
  if (out.exists) return std::to_string(out.device) + ":" + std::to_string(out.inode);
  std::error_code error;
  std::filesystem::path path = std::filesystem::absolute(out.resolved, error);
  if (error) path = out.resolved;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, error);
  return (error ? path.lexically_normal() : canonical).string();
}

void write_all(int fd, std::string_view contents, const OutputTarget& target) {
  const char* data = contents.data();
  std::size_t left = contents.size();
  while (left > 0) {
    const ssize_t written = ::write(fd, data, left);
    if (written < 0) {
      if (errno == EINTR) continue;
      fail_errno(target, "cannot write", errno);
    }
    data += written;
    left -= static_cast<std::size_t>(written);
  }
}

// Closes a descriptor this module opened; close errors (NFS, full disks) are write errors.
void close_checked(int fd, const OutputTarget& target) {
  if (::close(fd) != 0 && errno != EINTR) fail_errno(target, "cannot write", errno);
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

std::filesystem::path folder_of(const std::filesystem::path& path) {
  return path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
}

// Temporaries are named ".NAME.fpscope-tmp-XXXXXXXXXXXX": hidden, and a name no user file has
// by accident. Their writer holds an flock on them until the rename.
// (Appended to a string that starts as ".": GCC 12's -Wrestrict misreads "." + std::string&&.)
std::string temporary_prefix(const std::filesystem::path& target) {
  // Within a file name's 255 bytes whatever the target's length: a long name is cut, and a hash
  // of the whole name keeps two long names that share a beginning apart.
  const std::string name = target.filename().string();
  std::string prefix = ".";
  if (name.size() <= 200) {
    prefix += name;
  } else {
    prefix += name.substr(0, 200);
    char hash[24];
    std::snprintf(hash, sizeof hash, "~%016llx", static_cast<unsigned long long>(std::hash<std::string>{}(name)));
    prefix += hash;
  }
  prefix += ".fpscope-tmp-";
  return prefix;
}

std::string random_suffix() {
  static constexpr char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 generator{std::random_device{}() ^ (static_cast<std::uint64_t>(::getpid()) << 32)};
  std::string suffix(12, 'a');
  for (char& c : suffix) c = alphabet[generator() % (sizeof(alphabet) - 1)];
  return suffix;
}

// A killed writer can leave a named temporary behind (only between naming it and renaming it, see
// Temporary). One that nobody holds locked has lost its writer: removed.
void remove_abandoned_temporaries(const std::filesystem::path& target) {
  const std::string prefix = temporary_prefix(target);
  std::error_code error;
  for (std::filesystem::directory_iterator it(folder_of(target), error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.size() != prefix.size() + 12 || name.compare(0, prefix.size(), prefix) != 0) continue;
    const FileDescriptor fd(::open(it->path().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0) continue;
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) ::unlink(it->path().c_str());
  }
}

// A temporary file in the target's folder, locked by its writer from its creation to the rename.
// With O_TMPFILE it is created without a name and written and fsynced so; it is named only just
// before the rename, so a kill almost always leaves nothing, and the clean-up above can never
// take a living writer's file for an abandoned one. Where O_TMPFILE is not supported it is named
// at creation (O_EXCL) and locked right after (a window of one system call).
struct Temporary {
  FileDescriptor fd;
  std::filesystem::path path;  // empty while it has no name
};

void create_locked_temporary(const OutputTarget& target, Temporary& out) {
  const std::filesystem::path folder = folder_of(target.resolved);
#ifdef O_TMPFILE
  FileDescriptor nameless(::open(folder.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666));
  if (nameless.get() >= 0) {
    if (::flock(nameless.get(), LOCK_EX) != 0) fail_errno(target, "cannot lock a temporary file beside it", errno);
    out.fd.reset(nameless.release());
    return;
  }
#endif
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::filesystem::path name = folder / (temporary_prefix(target.resolved) + random_suffix());
    FileDescriptor fd(::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666));
    if (fd.get() < 0) {
      if (errno == EEXIST) continue;
      fail_errno(target, "cannot create a temporary file beside it", errno);
    }
    if (::flock(fd.get(), LOCK_EX) != 0) {
      const int error = errno;
      ::unlink(name.c_str());
      fail_errno(target, "cannot lock a temporary file beside it", error);
    }
    out.fd.reset(fd.release());
    out.path = name;
    return;
  }
  fail(target, "cannot create a temporary file beside it: every name tried exists");
}

// Gives a nameless temporary its name, through /proc/self/fd (linkat needs a name to link from
// unless the process may read any file).
void name_temporary(const OutputTarget& target, Temporary& temporary) {
  if (!temporary.path.empty()) return;
  const std::string self = "/proc/self/fd/" + std::to_string(temporary.fd.get());
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::filesystem::path name = folder_of(target.resolved) / (temporary_prefix(target.resolved) + random_suffix());
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0 ||
        ::linkat(temporary.fd.get(), "", AT_FDCWD, name.c_str(), AT_EMPTY_PATH) == 0) {
      temporary.path = name;
      return;
    }
    if (errno != EEXIST) fail_errno(target, "cannot name a temporary file beside it", errno);
  }
  fail(target, "cannot name a temporary file beside it: every name tried exists");
}

// The folder's entries made durable where nothing may be thrown (a destructor): best effort.
// (rename_into_place fsyncs the folder it opened before its rename.)
void sync_folder_quietly(const std::filesystem::path& folder) {
  const FileDescriptor fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0) ::fsync(fd.get());
}

// Writes `contents` to a locked temporary beside the target, with the target's mode (and owner,
// where allowed), fsynced and named; returns it, not yet renamed.
void prepare_replacement(const OutputTarget& target, std::string_view contents, Temporary& temporary) {
  remove_abandoned_temporaries(target.resolved);
  create_locked_temporary(target, temporary);
  try {
    if (target.kind == OutputTarget::Kind::regular_file) {
      struct stat info {};
      if (::stat(target.resolved.c_str(), &info) == 0) {
        if (::fchown(temporary.fd.get(), info.st_uid, info.st_gid) != 0) {
          // Not ours to give away: the file becomes this user's, as any editor's save would.
        }
        if (::fchmod(temporary.fd.get(), info.st_mode & 07777) != 0) fail_errno(target, "cannot keep its mode", errno);
      }
    }
    write_all(temporary.fd.get(), contents, target);
    if (::fsync(temporary.fd.get()) != 0) fail_errno(target, "cannot write", errno);
    name_temporary(target, temporary);
  } catch (...) {
    if (!temporary.path.empty()) ::unlink(temporary.path.c_str());
    throw;
  }
}

// The folder's lock, held while a file in it is checked and replaced: a run log's writer takes it
// to check and create its log (AppendingOutput::create), so a replacement and a new writer never
// interleave.
FileDescriptor lock_folder(const OutputTarget& target) {
  const std::filesystem::path folder = folder_of(target.resolved);
  FileDescriptor folder_fd(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (folder_fd.get() < 0 || ::flock(folder_fd.get(), LOCK_EX) != 0) fail_errno(target, "cannot lock its folder", errno);
  return folder_fd;
}

// Refuses to replace a file a run log's writer holds (its lock lives as long as the writer):
// the writer would go on into a file nobody can see, and its log would be lost.
void refuse_if_being_written(const OutputTarget& target) {
  const FileDescriptor existing(::open(target.resolved.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (existing.get() >= 0 && ::flock(existing.get(), LOCK_EX | LOCK_NB) != 0)
    fail(target, "another fpscope process is writing it: wait for it to finish, or name another file");
}

void rename_into_place(const OutputTarget& target, Temporary& temporary) {
  // The folder is opened before the rename: a failure to open it (no descriptors left) changes
  // nothing; after the rename only its fsync is left to do.
  const FileDescriptor folder(::open(folder_of(target.resolved).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (folder.get() < 0 || ::rename(temporary.path.c_str(), target.resolved.c_str()) != 0) {
    const int error = errno;  // kept: the clean-up below must not overwrite it
    ::unlink(temporary.path.c_str());
    fail_errno(target, folder.get() < 0 ? "cannot open its folder to make the write durable" : "cannot replace it", error);
  }
  if (::fsync(folder.get()) != 0 && errno != EINVAL) fail_errno(target, "cannot make the write durable", errno);
}

}  // namespace

OutputTarget resolve_output(const std::filesystem::path& given, std::string_view role) {
  OutputTarget target;
  target.given = given;
  target.role = std::string(role);
  if (given.empty()) throw OutputError((role.empty() ? std::string("an output path") : std::string(role)) + " is empty: name a file, or - for standard output");
  std::filesystem::path path = given;
  for (int hop = 0;; ++hop) {
    if (names_descriptor(path, target.descriptor)) {
      target.kind = OutputTarget::Kind::descriptor;
      target.resolved = path;
      struct stat info {};
      if (::fstat(target.descriptor, &info) != 0) {
        if (target.descriptor == STDOUT_FILENO) fail(target, "standard output is closed");
        fail_errno(target, "descriptor " + std::to_string(target.descriptor) + " is not open", errno);
      }
      target.exists = true;
      target.device = info.st_dev;
      target.inode = info.st_ino;
      return target;
    }
    struct stat link {};
    if (::lstat(path.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) break;
    if (hop == 40) fail(target, "too many levels of symbolic links");
    std::error_code error;
    const std::filesystem::path next = std::filesystem::read_symlink(path, error);
    if (error) fail(target, "cannot read the symbolic link: " + error.message());
    path = next.is_absolute() ? next : folder_of(path) / next;
  }
  target.resolved = path;
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    target.exists = true;
    target.device = info.st_dev;
    target.inode = info.st_ino;
    if (S_ISDIR(info.st_mode)) fail(target, "is a folder: expected a file name");
    if (!S_ISREG(info.st_mode)) {
      target.kind = OutputTarget::Kind::stream;
      if (::access(path.c_str(), W_OK) != 0) fail_errno(target, "cannot write", errno);
      return target;
    }
    target.kind = OutputTarget::Kind::regular_file;
    if (::access(path.c_str(), W_OK) != 0) fail_errno(target, "cannot write", errno);
  } else if (errno != ENOENT && errno != ENOTDIR) {  // the folder is checked below
    fail_errno(target, "cannot write", errno);
  } else {
    target.kind = OutputTarget::Kind::new_file;
  }
  // Created or replaced through a temporary in the same folder: the folder must take new files.
  const std::filesystem::path folder = folder_of(path);
  struct stat folder_info {};
  if (::stat(folder.c_str(), &folder_info) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) fail(target, "its folder " + shown(folder) + " does not exist");
    fail_errno(target, "cannot reach its folder", errno);
  }
  if (!S_ISDIR(folder_info.st_mode)) fail(target, shown(folder) + " is not a folder");
  if (::access(folder.c_str(), W_OK | X_OK) != 0) fail_errno(target, "cannot create files in its folder " + shown(folder), errno);
  return target;
}

void check_outputs(std::span<const OutputTarget> outputs, std::span<const std::filesystem::path> inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const OutputTarget& out = outputs[i];
    if (!holds_data(out)) continue;
    for (const std::filesystem::path& input : inputs) {
      struct stat info {};
      if (out.exists && ::stat(input.c_str(), &info) == 0 && same_file(info, out.device, out.inode))
        throw OutputError(shown(out) + " is the input " + shown(input) + ": writing it would destroy what is read; name another output");
    }
    for (std::size_t j = 0; j < i; ++j)
      if (holds_data(outputs[j]) && identity(out) == identity(outputs[j]))
        throw OutputError(shown(out) + " and " + shown(outputs[j]) + " are the same file: one output would overwrite the other");
  }
}

void check_replaces_only(const OutputTarget& target, std::size_t bytes, std::string_view what, const std::function<bool(std::string_view)>& is_one) {
  if (target.kind != OutputTarget::Kind::regular_file) return;
  std::ifstream in(target.resolved, std::ios::binary);
  if (!in) return;  // unreadable: the write itself says why, or succeeds
  std::string start(bytes, '\0');
  in.read(start.data(), static_cast<std::streamsize>(start.size()));
  start.resize(static_cast<std::size_t>(in.gcount()));
  if (start.empty() || is_one(start)) return;
  throw OutputError(shown(target) + " exists and is not " + std::string(what) + ": it is left as it is; name a new file, or remove it first");
}

std::string_view file_kind_name(FileKind kind) {
  switch (kind) {
    case FileKind::csv: return "a CSV file";
    case FileKind::png: return "a PNG image";
    case FileKind::svg: return "an SVG image";
    case FileKind::npy: return "a .npy array";
  }
  return "a file";
}

bool starts_as(FileKind kind, std::string_view start) {
  switch (kind) {
    case FileKind::npy: return start.starts_with("\x93NUMPY");
    case FileKind::png: return start.starts_with("\x89PNG\r\n\x1a\n");
    case FileKind::svg: {
      if (start.starts_with("\xEF\xBB\xBF")) start.remove_prefix(3);
      start.remove_prefix(std::min(start.size(), start.find_first_not_of(" \t\r\n")));
      return start.starts_with("<svg") || start.starts_with("<?xml");
    }
    case FileKind::csv: {
      if (start.find('\0') != std::string_view::npos) return false;
      const std::string_view first_line = start.substr(0, start.find('\n'));
      return first_line.find(',') != std::string_view::npos && !first_line.starts_with("{");
    }
  }
  return false;
}

void check_replaces_only(const OutputTarget& target, FileKind kind) {
  check_replaces_only(target, 4096, file_kind_name(kind), [kind](std::string_view start) { return starts_as(kind, start); });
}

void write_output(const OutputTarget& target, std::string_view contents) {
  switch (target.kind) {
    case OutputTarget::Kind::descriptor:
      if (target.descriptor == STDOUT_FILENO && std::fflush(stdout) != 0) fail_errno(target, "cannot write", errno);
      write_all(target.descriptor, contents, target);
      return;
    case OutputTarget::Kind::stream: {
      FileDescriptor fd(::open(target.resolved.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY));
      if (fd.get() < 0) fail_errno(target, "cannot open", errno);
      write_all(fd.get(), contents, target);
      close_checked(fd.release(), target);
      return;
    }
    case OutputTarget::Kind::regular_file:
    case OutputTarget::Kind::new_file: {
      refuse_if_being_written(target);  // at once, before any temporary: checked again under the folder's lock
      Temporary temporary;
      prepare_replacement(target, contents, temporary);
      try {
        const FileDescriptor folder = lock_folder(target);
        refuse_if_being_written(target);
        rename_into_place(target, temporary);
      } catch (...) {
        if (!temporary.path.empty()) ::unlink(temporary.path.c_str());
        throw;
      }
      return;
    }
  }
}

void write_outputs(std::span<const OutputTarget> targets, std::span<const std::string_view> contents) {
  if (targets.size() != contents.size()) throw std::invalid_argument("write_outputs: one contents per target");
  // Every file written whole beside its target first; only then is any target replaced.
  std::vector<Temporary> temporaries(targets.size());
  const auto abandon = [&] {
    for (Temporary& t : temporaries)
      if (!t.path.empty()) ::unlink(t.path.c_str());
  };
  try {
    // A target a run's writer holds now is refused before any temporary is made (a kill while
    // one is named can leave it behind); each is checked again under its folder's lock below.
    for (std::size_t i = 0; i < targets.size(); ++i)
      if (targets[i].is_file()) refuse_if_being_written(targets[i]);
    for (std::size_t i = 0; i < targets.size(); ++i)
      if (targets[i].is_file()) prepare_replacement(targets[i], contents[i], temporaries[i]);
    for (std::size_t i = 0; i < targets.size(); ++i)
      if (targets[i].is_file()) {
        const FileDescriptor folder = lock_folder(targets[i]);
        refuse_if_being_written(targets[i]);
      }
  } catch (...) {
    abandon();
    throw;
  }
  try {
    for (std::size_t i = 0; i < targets.size(); ++i) {
      if (!targets[i].is_file()) {
        write_output(targets[i], contents[i]);
        continue;
      }
      const FileDescriptor folder = lock_folder(targets[i]);
      rename_into_place(targets[i], temporaries[i]);
      temporaries[i].path.clear();
    }
  } catch (...) {
    abandon();  // the temporaries not yet renamed
    throw;
  }
}

void write_output(const std::filesystem::path& path, std::string_view contents) { write_output(resolve_output(path), contents); }

// AppendingOutput

AppendingOutput AppendingOutput::create(const OutputTarget& target, std::string_view first) {
  AppendingOutput out;
  out.target_ = target;
  if (target.kind == OutputTarget::Kind::descriptor) {
    out.fd_ = target.descriptor;
    out.append(first);
    return out;
  }
  if (target.kind == OutputTarget::Kind::stream) {
    out.fd_ = ::open(target.resolved.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (out.fd_ < 0) fail_errno(target, "cannot open", errno);
    out.owns_fd_ = true;
    out.append(first);
    return out;
  }
  // Two writers creating the same log must not both win: the folder's lock orders them, the
  // file's lock (held for the writer's life) tells the second that the first is there.
  const FileDescriptor folder_fd = lock_folder(target);
  {
    const FileDescriptor existing(::open(target.resolved.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (existing.get() >= 0 && ::flock(existing.get(), LOCK_EX | LOCK_NB) != 0)
      fail(target, "another fpscope process is writing it: wait for it to finish, or name another run log");
  }
  Temporary temporary;
  prepare_replacement(target, first, temporary);
  // A file replaced by a log being written stays, under NAME.previous, until the log is whole
  // (keep()): a run that fails puts it back, byte for byte; one killed leaves it there.
  if (target.kind == OutputTarget::Kind::regular_file) {
    std::filesystem::path previous = target.resolved;
    previous += ".previous";
    if (::link(target.resolved.c_str(), previous.c_str()) == 0) {
      out.previous_ = previous;
    } else if (errno == EEXIST) {
      ::unlink(temporary.path.c_str());
      fail(target, "it would be replaced, and " + printable_text(previous.filename().string(), 200) +
                       " (where an interrupted run kept the file it replaced) is in the way: move it away first");
    }  // a file system without hard links: replaced as before, nothing kept
  }
  try {
    rename_into_place(target, temporary);
  } catch (...) {
    if (!out.previous_.empty()) ::unlink(out.previous_.c_str()), out.previous_.clear();
    throw;
  }
  out.fd_ = temporary.fd.release();  // still locked: the lock lives as long as the descriptor
  out.owns_fd_ = true;
  out.bytes_ = first.size();
  return out;
}

AppendingOutput AppendingOutput::open_locked_for_resume(const OutputTarget& target, std::uint64_t keep_bytes) {
  if (!target.is_file() || !target.exists) fail(target, "cannot resume it: a run log to resume must be an existing file");
  AppendingOutput out;
  out.target_ = target;
  out.fd_ = ::open(target.resolved.c_str(), O_RDWR | O_CLOEXEC);
  if (out.fd_ < 0) fail_errno(target, "cannot open", errno);
  out.owns_fd_ = true;
  if (::flock(out.fd_, LOCK_EX | LOCK_NB) != 0)
    fail(target, "another fpscope process is writing it: wait for it to finish, or name another run log");
  struct stat info {};
  if (::fstat(out.fd_, &info) != 0) fail_errno(target, "cannot read", errno);
  if (static_cast<std::uint64_t>(info.st_size) < keep_bytes)
    fail(target, "cannot resume it: it is " + std::to_string(info.st_size) + " bytes, shorter than the " + std::to_string(keep_bytes) +
                           " the checkpoint covers (it was changed since)");
  return out;
}

std::string AppendingOutput::read_prefix(std::uint64_t bytes) {
  std::string prefix(bytes, '\0');
  std::uint64_t at = 0;
  while (at < bytes) {
    const ssize_t got = ::pread(fd_, prefix.data() + at, bytes - at, static_cast<off_t>(at));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) fail(target_, "cannot read it back to check it");
    at += static_cast<std::uint64_t>(got);
  }
  return prefix;
}

void AppendingOutput::cut_to(std::uint64_t bytes) {
  if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) fail_errno(target_, "cannot cut it back to the checkpoint", errno);
  if (::lseek(fd_, 0, SEEK_END) < 0) fail_errno(target_, "cannot append", errno);
  bytes_ = bytes;
}

AppendingOutput::AppendingOutput(AppendingOutput&& other) noexcept
    : target_(std::move(other.target_)),
      fd_(std::exchange(other.fd_, -1)),
      owns_fd_(std::exchange(other.owns_fd_, false)),
      bytes_(other.bytes_),
      previous_(std::exchange(other.previous_, {})) {}

AppendingOutput& AppendingOutput::operator=(AppendingOutput&& other) noexcept {
  if (this != &other) {
    if (!previous_.empty() && ::rename(previous_.c_str(), target_.resolved.c_str()) == 0) sync_folder_quietly(folder_of(target_.resolved));
    if (owns_fd_ && fd_ >= 0) ::close(fd_);
    target_ = std::move(other.target_);
    fd_ = std::exchange(other.fd_, -1);
    owns_fd_ = std::exchange(other.owns_fd_, false);
    bytes_ = other.bytes_;
    previous_ = std::exchange(other.previous_, {});
  }
  return *this;
}

AppendingOutput::~AppendingOutput() {
  // Not kept: the file this log replaced goes back (an atomic rename; the new log goes with it).
  if (!previous_.empty() && ::rename(previous_.c_str(), target_.resolved.c_str()) == 0) sync_folder_quietly(folder_of(target_.resolved));
  if (owns_fd_ && fd_ >= 0) ::close(fd_);
}

void AppendingOutput::keep() {
  if (previous_.empty()) return;
  if (::unlink(previous_.c_str()) != 0 && errno != ENOENT) fail_errno(target_, "cannot remove the file it replaced", errno);
  previous_.clear();
}

void AppendingOutput::append(std::string_view text) {
  if (fd_ == STDOUT_FILENO && std::fflush(stdout) != 0) fail_errno(target_, "cannot write", errno);
  write_all(fd_, text, target_);
  bytes_ += text.size();
}

void AppendingOutput::sync() {
  if (target_.is_file() && ::fsync(fd_) != 0) fail_errno(target_, "cannot write", errno);
}

}  // namespace fpscope
