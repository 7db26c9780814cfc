// FollowThread reads a log's backlog only as fast as the app takes it: without taken() it stops
// after one poll, so the snapshots the store thins are never held by the app and the store both.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "../temp_dir.hpp"
#include "follow_thread.hpp"
#include "fpscope/analyzer/run_log.hpp"

using namespace fpscope;

namespace {

using test::TempDir;

Snapshot snapshot_at(std::int64_t step) {
  Snapshot s;
  s.step = step;
  TensorRecord record;
  record.name = "fc1";
  record.kind = TensorKind::activation_gradient;
  record.histogram.set_count(-20, static_cast<std::uint64_t>(step) + 1);
  s.tensors.push_back(record);
  return s;
}

// Waits up to `seconds` for `done`.
template <typename Done>
bool within(double seconds, Done done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace

TEST_CASE("the follow thread reads a backlog's next poll only once the app has taken the last") {
  TempDir dir;
  const auto path = dir.path / "run.jsonl";
  std::string text = run_header_line(RunHeader{}) + "\n";
  for (int i = 0; i < 200; ++i) text += snapshot_line(snapshot_at(i)) + "\n";
  std::ofstream(path, std::ios::binary) << text;
  const std::size_t line_bytes = snapshot_line(snapshot_at(199)).size() + 1;

  RunStore store;
  gui::FollowThread follower(path, store, 64 * line_bytes, 10 * line_bytes);  // about 10 lines a poll
  REQUIRE(within(10, [&] { return follower.window_ready(); }));
  const std::size_t first = store.size();
  CHECK(first > 0);
  CHECK(first <= 10);
  // Untaken, the thread waits: a quarter of a second later the store holds what it did.
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  CHECK(store.size() == first);
  CHECK(follower.polls() == 1);
  CHECK_FALSE(follower.caught_up());
  // Each taken() lets exactly one more poll through, until the log is read.
  std::size_t before = first;
  int takes = 0;
  while (!follower.caught_up() && takes < 100) {
    follower.taken();
    ++takes;
    REQUIRE(within(10, [&] { return follower.window_ready(); }));
    CHECK(store.size() - before <= 10);
    before = store.size();
  }
  CHECK(follower.caught_up());
  CHECK(store.size() == 200);
  CHECK(takes >= 200 / 10 - 1);
  CHECK(follower.error().empty());
}
