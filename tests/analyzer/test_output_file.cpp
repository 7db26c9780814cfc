// The output policy: what each kind of path gets, what is refused before anything is written.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../temp_dir.hpp"
#include "fpscope/snapshot/output_file.hpp"

using namespace fpscope;
namespace fs = std::filesystem;

namespace {

using test::TempDir;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary | std::ios::trunc) << text; }

ino_t inode_of(const fs::path& path) {
  struct stat info {};
  ::stat(path.c_str(), &info);
  return info.st_ino;
}

mode_t mode_of(const fs::path& path) {
  struct stat info {};
  ::stat(path.c_str(), &info);
  return info.st_mode & 07777;
}

std::size_t temporaries_in(const fs::path& folder) {
  std::size_t n = 0;
  for (const auto& entry : fs::directory_iterator(folder)) n += entry.path().filename().string().find(".fpscope-tmp-") != std::string::npos;
  return n;
}

}  // namespace

TEST_CASE("a new file and an existing one: written whole through a rename, the existing one's mode kept") {
  TempDir dir;
  write_output(dir / "new.csv", "first\n");
  CHECK(read(dir / "new.csv") == "first\n");
  const mode_t umask_now = ::umask(0);
  ::umask(umask_now);
  CHECK(mode_of(dir / "new.csv") == (0666 & ~umask_now));

  ::chmod((dir / "new.csv").c_str(), 0640);
  const ino_t before = inode_of(dir / "new.csv");
  const OutputTarget target = resolve_output(dir / "new.csv", "--csv");
  CHECK(target.kind == OutputTarget::Kind::regular_file);
  write_output(target, "second\n");
  CHECK(read(dir / "new.csv") == "second\n");
  CHECK(mode_of(dir / "new.csv") == 0640);
  CHECK(inode_of(dir / "new.csv") != before);  // replaced, not rewritten in place
  CHECK(temporaries_in(dir.path) == 0);
}

TEST_CASE("a symlinked output is written through its link; the link stays") {
  TempDir dir;
  fs::create_directories(dir / "data");
  write(dir / "data/target.csv", "old");
  fs::create_symlink("data/target.csv", dir / "link.csv");
  fs::create_symlink("link.csv", dir / "link2.csv");  // a chain, relative links
  fs::create_symlink("data/absent.csv", dir / "dangling.csv");
  write_output(dir / "link2.csv", "new");
  CHECK(fs::is_symlink(dir / "link.csv"));
  CHECK(fs::is_symlink(dir / "link2.csv"));
  CHECK(read(dir / "data/target.csv") == "new");
  write_output(dir / "dangling.csv", "made");
  CHECK(fs::is_symlink(dir / "dangling.csv"));
  CHECK(read(dir / "data/absent.csv") == "made");
  fs::create_symlink("loop.csv", dir / "loop.csv");
  CHECK_THROWS_WITH_AS(resolve_output(dir / "loop.csv"), doctest::Contains("too many levels of symbolic links"), OutputError);
}

TEST_CASE("a FIFO and a descriptor are streamed, never replaced") {
  TempDir dir;
  const fs::path fifo = dir / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string received;
  std::thread reader([&] { received = read(fifo); });
  const OutputTarget target = resolve_output(fifo);
  CHECK(target.kind == OutputTarget::Kind::stream);
  write_output(target, "through the pipe");
  reader.join();
  CHECK(received == "through the pipe");
  CHECK(fs::is_fifo(fifo));

  int ends[2];
  REQUIRE(::pipe(ends) == 0);
  const OutputTarget descriptor = resolve_output("/dev/fd/" + std::to_string(ends[1]));
  CHECK(descriptor.kind == OutputTarget::Kind::descriptor);
  CHECK(descriptor.descriptor == ends[1]);
  write_output(descriptor, "via /dev/fd");
  ::close(ends[1]);
  char buffer[64] = {};
  CHECK(::read(ends[0], buffer, sizeof buffer) == 11);
  ::close(ends[0]);
  CHECK(std::string(buffer) == "via /dev/fd");
  CHECK(resolve_output("-").descriptor == STDOUT_FILENO);
  CHECK(resolve_output("/dev/stdout").descriptor == STDOUT_FILENO);
}

TEST_CASE("/dev/full: a write error is an error naming the path the user gave") {
  if (!fs::exists("/dev/full")) return;
  CHECK_THROWS_WITH_AS(write_output("/dev/full", "x"), doctest::Contains("/dev/full: cannot write: No space left on device"), OutputError);
}

TEST_CASE("what cannot be an output is refused before anything is written, naming the option") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(resolve_output("", "--out"), doctest::Contains("--out is empty"), OutputError);
  CHECK_THROWS_WITH_AS(resolve_output(dir.path, "--csv"), doctest::Contains("is a folder"), OutputError);
  CHECK_THROWS_WITH_AS(resolve_output(dir / "no/such/out.csv", "--csv"), doctest::Contains(("--csv " + (dir / "no/such/out.csv").string() + ": its folder").c_str()),
                       OutputError);
  write(dir / "file", "x");
  CHECK_THROWS_WITH_AS(resolve_output(dir / "file/out.csv"), doctest::Contains("is not a folder"), OutputError);
  CHECK_THROWS_WITH_AS(resolve_output(std::string("bad\x1b[31mname/x")), doctest::Contains("bad\\x1b[31mname"), OutputError);
}

TEST_CASE("an output that is an input, or another output, is refused") {
  TempDir dir;
  write(dir / "run.jsonl", "log");
  fs::create_symlink("run.jsonl", dir / "alias.jsonl");
  fs::create_hard_link(dir / "run.jsonl", dir / "hard.jsonl");
  const std::vector<fs::path> inputs{dir / "run.jsonl"};
  for (const char* name : {"run.jsonl", "alias.jsonl", "hard.jsonl"}) {
    CAPTURE(name);
    const OutputTarget out = resolve_output(dir / name, "--csv");
    CHECK_THROWS_WITH_AS(check_outputs({&out, 1}, inputs), doctest::Contains("is the input"), OutputError);
  }
  CHECK(read(dir / "run.jsonl") == "log");
  const std::vector<OutputTarget> same_new{resolve_output(dir / "a.ckpt", "--out"), resolve_output(dir / "./a.ckpt", "--checkpoint")};
  CHECK_THROWS_WITH_AS(check_outputs(same_new, {}), doctest::Contains("--checkpoint"), OutputError);
  const std::vector<OutputTarget> different{resolve_output(dir / "a.ckpt"), resolve_output(dir / "b.ckpt")};
  CHECK_NOTHROW(check_outputs(different, inputs));
  if (fs::exists("/dev/null")) {
    const std::vector<OutputTarget> both_null{resolve_output("/dev/null"), resolve_output("/dev/null")};
    const std::vector<fs::path> null_input{"/dev/null"};
    CHECK_NOTHROW(check_outputs(both_null, null_input));  // nothing there to lose
  }
}

TEST_CASE("abandoned temporaries are removed; a living writer's and the user's own files are not") {
  TempDir dir;
  write(dir / ".out.csv.fpscope-tmp-abandoned123", "left by a kill");
  write(dir / ".out.csv.fpscope-tmp-stillwriting", "held");
  write(dir / "out.csv.tmp-1234567", "the user's own file");
  write(dir / "out.csv.tmp-99999999", "the user's own file too");
  const int held = ::open((dir / ".out.csv.fpscope-tmp-stillwriting").c_str(), O_RDONLY);
  REQUIRE(::flock(held, LOCK_EX) == 0);
  // flock locks belong to the open file: another open in this process contends like another writer.
  write_output(dir / "out.csv", "data");
  CHECK(!fs::exists(dir / ".out.csv.fpscope-tmp-abandoned123"));
  CHECK(fs::exists(dir / ".out.csv.fpscope-tmp-stillwriting"));
  CHECK(read(dir / "out.csv.tmp-1234567") == "the user's own file");
  CHECK(read(dir / "out.csv.tmp-99999999") == "the user's own file too");
  ::close(held);
}

TEST_CASE("a write over a file a run's writer holds is refused before anything in its folder changes") {
  // No temporary is made for it, so a kill at that moment leaves nothing; and the folder's
  // abandoned temporaries, which a write would clear, stay as they were.
  TempDir dir;
  AppendingOutput writer = AppendingOutput::create(resolve_output(dir / "run.jsonl", "--out"), "header\n");
  write(dir / ".run.jsonl.fpscope-tmp-abandoned123", "left by a kill");
  CHECK_THROWS_WITH_AS(write_output(dir / "run.jsonl", "other\n"), doctest::Contains("another fpscope process is writing it"), OutputError);
  const std::vector<OutputTarget> both{resolve_output(dir / "a.csv"), resolve_output(dir / "run.jsonl")};
  const std::vector<std::string_view> contents{"a\n", "other\n"};
  CHECK_THROWS_WITH_AS(write_outputs(both, contents), doctest::Contains("another fpscope process is writing it"), OutputError);
  CHECK(read(dir / ".run.jsonl.fpscope-tmp-abandoned123") == "left by a kill");
  CHECK(read(dir / "run.jsonl") == "header\n");
  CHECK_FALSE(fs::exists(dir / "a.csv"));  // all or none
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path)) ++files;
  CHECK(files == 2);
}

TEST_CASE("an appended log has one writer; resuming checks the prefix, then cuts back to it") {
  TempDir dir;
  const OutputTarget target = resolve_output(dir / "run.jsonl", "--out");
  {
    AppendingOutput first = AppendingOutput::create(target, "header\n");
    first.append("line 1\n");
    CHECK(first.bytes_written() == 14);
    CHECK_THROWS_WITH_AS(AppendingOutput::create(resolve_output(dir / "run.jsonl", "--out"), "other\n"),
                         doctest::Contains("another fpscope process is writing it"), OutputError);
    CHECK_THROWS_AS(AppendingOutput::resume(resolve_output(dir / "run.jsonl"), 7, [](const std::string&) {}), OutputError);
    CHECK(read(dir / "run.jsonl") == "header\nline 1\n");
  }
  const OutputTarget again = resolve_output(dir / "run.jsonl");
  CHECK_THROWS_AS(AppendingOutput::resume(again, 7, [](const std::string&) { throw OutputError("not ours"); }), OutputError);
  CHECK(read(dir / "run.jsonl") == "header\nline 1\n");  // refused: untouched
  CHECK_THROWS_WITH_AS(AppendingOutput::resume(again, 100, [](const std::string&) {}), doctest::Contains("shorter than the 100"), OutputError);
  std::string seen;
  {
    AppendingOutput resumed = AppendingOutput::resume(again, 7, [&](const std::string& prefix) { seen = prefix; });
    resumed.append("line 1 again\n");
  }
  CHECK(seen == "header\n");
  CHECK(read(dir / "run.jsonl") == "header\nline 1 again\n");
}

TEST_CASE("an export replaces only an earlier file of its kind, each kind known by how it starts") {
  using namespace std::string_literals;
  const std::string npy = "\x93NUMPY\x01\x00"s + "v\x00{'descr': '<f4'"s, png = "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"s;
  const std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\">", xml = "\xEF\xBB\xBF  \n<?xml version=\"1.0\"?>";
  const std::string csv = "step,loss,loss_scale,skipped\n0,2.3,1,0\n", run_log = "{\"fpscope_run_log\": 1, \"a,b\": 2}\n";
  const std::string text = "notes about a run\n", binary = "a,b\n\x00\x01"s;
  CHECK(starts_as(FileKind::npy, npy));
  CHECK(starts_as(FileKind::png, png));
  CHECK(starts_as(FileKind::svg, svg));
  CHECK(starts_as(FileKind::svg, xml));
  CHECK(starts_as(FileKind::csv, csv));
  for (const std::string& other : {png, svg, csv, run_log, text}) CHECK_FALSE(starts_as(FileKind::npy, other));
  for (const std::string& other : {npy, svg, csv, run_log, text}) CHECK_FALSE(starts_as(FileKind::png, other));
  for (const std::string& other : {npy, png, csv, run_log, text}) CHECK_FALSE(starts_as(FileKind::svg, other));
  for (const std::string& other : {npy, png, svg, run_log, text, binary}) CHECK_FALSE(starts_as(FileKind::csv, other));

  TempDir dir;
  write(dir / "run.jsonl", run_log);
  write(dir / "old.csv", csv);
  write(dir / "empty.csv", "");
  const OutputTarget over_log = resolve_output(dir / "run.jsonl", "--csv");
  try {
    check_replaces_only(over_log, FileKind::csv);
    FAIL("a run log was about to be replaced by a CSV");
  } catch (const OutputError& e) {
    CHECK(std::string(e.what()) == "--csv " + (dir / "run.jsonl").string() + " exists and is not a CSV file: it is left as it is; name a new file, or remove it first");
  }
  CHECK(read(dir / "run.jsonl") == run_log);
  CHECK_NOTHROW(check_replaces_only(resolve_output(dir / "old.csv"), FileKind::csv));
  CHECK_NOTHROW(check_replaces_only(resolve_output(dir / "empty.csv"), FileKind::png));  // an empty file is nobody's
  CHECK_NOTHROW(check_replaces_only(resolve_output(dir / "new.png"), FileKind::png));   // nothing there yet
  CHECK_NOTHROW(check_replaces_only(resolve_output("-"), FileKind::npy));               // standard output
}
