// Following a run log while it grows, is truncated, replaced, or broken.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "../temp_dir.hpp"
#include "fpscope/analyzer/run_log.hpp"
#include "fpscope/analyzer/run_log_follower.hpp"

using namespace fpscope;

namespace {
Snapshot snapshot_at(std::int64_t step) {
  Snapshot s;
  s.step = step;
  s.loss = 1.0 / static_cast<double>(step + 1);
  s.loss_scale = 1024;
  TensorRecord record;
  record.name = "fc1";
  record.kind = TensorKind::activation_gradient;
  record.histogram.set_count(-20 - static_cast<int>(step), 3);
  s.tensors.push_back(record);
  return s;
}
void append_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << text;
}
using test::TempDir;
}  // namespace

TEST_CASE("a follower reads whole lines as they arrive, and only whole lines") {
  TempDir dir;
  const auto path = dir.path / "run.jsonl";
  RunHeader header;
  header.source = "test";
  header.format = "fp16";
  append_text(path, run_header_line(header) + "\n" + snapshot_line(snapshot_at(0)) + "\n" + snapshot_line(snapshot_at(1)) + "\n");
  RunStore store;
  RunLogFollower follower(path, store);
  CHECK(follower.poll() == 2);
  CHECK(follower.error().empty());
  CHECK(store.header() == header);
  CHECK(store.copy_since(0) == std::vector<Snapshot>{snapshot_at(0), snapshot_at(1)});

  const std::string line = snapshot_line(snapshot_at(2));
  append_text(path, line.substr(0, line.size() / 2));  // a write in progress
  CHECK(follower.poll() == 0);
  CHECK(follower.error().empty());
  append_text(path, line.substr(line.size() / 2) + "\n");
  CHECK(follower.poll() == 1);
  CHECK(store.copy_since(2) == std::vector<Snapshot>{snapshot_at(2)});
  CHECK(follower.poll() == 0);
}

TEST_CASE("a follower with a small window reads a long log over several polls and says when it has caught up") {
  TempDir dir;
  const auto path = dir.path / "run.jsonl";
  std::string text = run_header_line(RunHeader{}) + "\n";
  std::vector<Snapshot> written;
  for (int i = 0; i < 100; ++i) {  // snapshot_at's binade goes below float32's past step 128
    written.push_back(snapshot_at(i));
    text += snapshot_line(written.back()) + "\n";
  }
  append_text(path, text);
  RunStore store;
  RunLogFollower follower(path, store, 2048);  // some 10 lines a poll
  int polls = 0;
  do {
    follower.poll();
    ++polls;
    if (store.size() < written.size()) CHECK_FALSE(follower.caught_up());
  } while (!follower.caught_up() && polls < 1000);
  CHECK(polls > 10);
  CHECK(follower.error().empty());
  CHECK(store.copy_since(0) == written);
  const std::string half = snapshot_line(snapshot_at(100));
  append_text(path, half.substr(0, 10));  // a line being written: nothing whole to read
  follower.poll();
  CHECK(follower.caught_up());
}

TEST_CASE("a follower with a poll size takes about that much a poll, its window still taking long lines") {
  TempDir dir;
  const auto path = dir.path / "run.jsonl";
  std::string text = run_header_line(RunHeader{}) + "\n";
  std::vector<Snapshot> written;
  for (int i = 0; i < 100; ++i) {
    written.push_back(snapshot_at(i));
    text += snapshot_line(written.back()) + "\n";
  }
  const std::size_t line_bytes = snapshot_line(written.back()).size() + 1;
  written.push_back(snapshot_at(100));  // a line of about 20 polls' worth, within the window
  written.back().tensors[0].name = std::string(100 * line_bytes, 'w');
  text += snapshot_line(written.back()) + "\n";
  written.push_back(snapshot_at(101));
  text += snapshot_line(written.back()) + "\n";
  append_text(path, text);
  RunStore store;
  RunLogFollower follower(path, store, 128 * line_bytes, 5 * line_bytes);  // the window holds 128 lines, a poll about 5
  std::vector<std::size_t> sizes;
  do {
    follower.poll();
    sizes.push_back(store.size());
  } while (!follower.caught_up() && sizes.size() < 1000);
  CHECK(follower.error().empty());
  CHECK(store.copy_since(0) == written);
  REQUIRE(sizes.size() >= 2);
  CHECK(sizes.size() >= 100 / 5);
  CHECK(sizes.size() <= 100 / 4 + 3);
  CHECK(sizes[0] <= 5);
  for (std::size_t i = 1; i < sizes.size(); ++i) CHECK(sizes[i] - sizes[i - 1] <= 5);
}

TEST_CASE("a follower starts over when the log is truncated or replaced") {
  TempDir dir;
  const auto path = dir.path / "run.jsonl";
  RunHeader header;
  header.source = "first";
  append_text(path, run_header_line(header) + "\n" + snapshot_line(snapshot_at(0)) + "\n" + snapshot_line(snapshot_at(1)) + "\n");
  RunStore store;
  RunLogFollower follower(path, store);
  CHECK(follower.poll() == 2);
  const auto generation = store.generation();

  // Truncated in place (same file, shorter).
  std::filesystem::resize_file(path, 0);
  CHECK(follower.poll() == 0);
  CHECK(follower.restarts() == 1);
  CHECK(store.size() == 0);
  CHECK(store.generation() != generation);
  append_text(path, run_header_line(header) + "\n" + snapshot_line(snapshot_at(5)) + "\n");
  CHECK(follower.poll() == 1);
  CHECK(store.copy_since(0).at(0).step == 5);

  // Replaced by a new file of a greater size (a new run written atomically over the old).
  RunLog second;
  second.header.source = "second";
  for (int i = 0; i < 4; ++i) second.snapshots.push_back(snapshot_at(10 + i));
  write_run_log(resolve_output(path), second);
  CHECK(follower.poll() == 4);
  CHECK(follower.restarts() == 2);
  CHECK(store.header().source == "second");
  CHECK(store.copy_since(0) == second.snapshots);
}

TEST_CASE("a follower starts over when the log is rewritten in place, the same file growing past its old size; saving what it read refuses the mix") {
  TempDir dir;
  const auto path = dir.path / "run.jsonl";
  RunHeader first;
  first.run_id = std::string(32, 'a');
  append_text(path, run_header_line(first) + "\n" + snapshot_line(snapshot_at(0)) + "\n" + snapshot_line(snapshot_at(1)) + "\n");
  RunStore store;
  RunLogFollower follower(path, store);
  CHECK(follower.poll() == 2);
  const auto inode = std::filesystem::hard_link_count(path);
  // A new run cuts the same file and writes past the old size between two polls.
  {
    std::ofstream out(path, std::ios::binary | std::ios::in | std::ios::out);
    RunHeader second = first;
    second.run_id = std::string(32, 'b');
    std::string text = run_header_line(second) + "\n";
    for (int i = 0; i < 6; ++i) text += snapshot_line(snapshot_at(20 + i)) + "\n";
    out.seekp(0);
    out << text;
  }
  CHECK(std::filesystem::hard_link_count(path) == inode);
  // Before the follower reads again, what it read is no longer in the file: saving it refuses.
  CHECK_THROWS_WITH_AS(follower.bytes_read(), doctest::Contains("was rewritten since it was read"), std::runtime_error);
  CHECK(follower.poll() == 6);
  CHECK(follower.restarts() == 1);
  CHECK(follower.error().empty());
  CHECK(store.header().run_id == std::string(32, 'b'));
  CHECK(store.copy_since(0).front().step == 20);
  CHECK(follower.bytes_read().size() == std::filesystem::file_size(path));
}

TEST_CASE("a follower reads a header rewritten in place to the same length before the first step (the bridge's format, settled)") {
  // fpscope_torch writes its header as the Recorder is made, and without fmt rewrites its format
  // ("fp16" -> "bf16", four letters each) at the first recorded step, just before that step's line.
  TempDir dir;
  const auto path = dir.path / "run.jsonl";
  RunHeader header;
  header.source = "fpscope_torch";
  header.format = "fp16";
  header.run_id = std::string(32, 'c');
  append_text(path, run_header_line(header) + "\n");
  RunStore store;
  RunLogFollower follower(path, store);
  CHECK(follower.poll() == 0);
  CHECK(store.header().format == "fp16");
  {
    std::ofstream out(path, std::ios::binary | std::ios::in | std::ios::out);
    RunHeader settled = header;
    settled.format = "bf16";
    const std::string line = run_header_line(settled) + "\n";
    REQUIRE(line.size() == run_header_line(header).size() + 1);
    out.seekp(0);
    out << line;
  }
  append_text(path, snapshot_line(snapshot_at(0)) + "\n");
  CHECK(follower.poll() == 1);
  CHECK(follower.restarts() == 1);
  CHECK(store.header().format == "bf16");
  CHECK(store.copy_since(0).size() == 1);
}

TEST_CASE("a follower reports a missing or malformed log and keeps going") {
  TempDir dir;
  const auto path = dir.path / "later.jsonl";
  RunStore store;
  RunLogFollower follower(path, store);
  CHECK(follower.poll() == 0);
  CHECK(follower.error().find("later.jsonl") != std::string::npos);

  RunHeader header;
  append_text(path, run_header_line(header) + "\n" + snapshot_line(snapshot_at(0)) + "\n{\"step\": \"seven\"}\n");
  CHECK(follower.poll() == 1);
  CHECK(follower.error().find("later.jsonl:3") != std::string::npos);
  CHECK(follower.poll() == 0);  // the same broken line: no new error, no crash
  CHECK(!follower.error().empty());

  std::filesystem::remove(path);
  append_text(path, "not json at all\n");
  CHECK(follower.poll() == 0);
  CHECK(follower.error().find("later.jsonl:1") != std::string::npos);
  CHECK(store.size() == 0);
}

TEST_CASE("a line longer than the follower's window is an error naming the line, not a read repeated forever") {
  TempDir dir;
  const auto path = dir.path / "run.jsonl";
  RunHeader header;
  header.source = "test";
  append_text(path, run_header_line(header) + "\n" + snapshot_line(snapshot_at(0)) + "\n" + std::string(5000, 'x'));
  RunStore store;
  RunLogFollower follower(path, store, 4096);  // a 4 KiB window stands for the 64 MiB one
  std::size_t added = 0;
  for (int poll = 0; poll < 4; ++poll) added += follower.poll();
  CHECK(added == 1);
  CHECK(follower.error().find("run.jsonl:3: a line longer than 4.0 KiB") != std::string::npos);
  // A line that fits the window is read as before.
  RunStore other;
  RunLogFollower wide(path, other, 8192);
  CHECK(wide.poll() == 1);
  CHECK(wide.error().empty());  // the unfinished last line is a write in progress
}

TEST_CASE("loss: a number, or null / absent for a loss not known; anything else is an error, never 0") {
  const RunHeader header;
  CHECK(parse_run_log_line(R"({"step": 1, "loss": 0.25})", "x", header).step.loss == 0.25);
  CHECK(std::isnan(parse_run_log_line(R"({"step": 1, "loss": null})", "x", header).step.loss));
  CHECK(std::isnan(parse_run_log_line(R"({"step": 1})", "x", header).step.loss));
  CHECK(!parse_run_log_line(R"({"step": 1})", "x", header).snapshot);  // a step line
  CHECK_THROWS_WITH_AS(parse_run_log_line(R"({"step": 1, "loss": "garbage"})", "run.jsonl:2", header), doctest::Contains("'loss' must be a number"), RunLogError);
  CHECK_THROWS_WITH_AS(parse_run_log_line(R"({"step": 1, "loss_scale": 0})", "run.jsonl:2", header), doctest::Contains("'loss_scale' must be a positive"), RunLogError);
  CHECK_THROWS_AS(parse_run_log_line(R"({"step": 1, "loss_scale": "big"})", "x", header), RunLogError);
}
