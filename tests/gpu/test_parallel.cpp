// parallel_for: ranges that cover the work once, work on the caller when small or nested, an
// exception carried back to the caller, and a pool that can be resized between jobs.
#include <doctest/doctest.h>

#include <atomic>
#include <algorithm>
#include <stdexcept>
#include <thread>
#include <vector>

#include "fpscope/gpu/parallel.hpp"

using namespace fpscope;

TEST_CASE("parallel_for covers every element exactly once, on any number of threads") {
  for (const int threads : {1, 2, 5}) {
    CAPTURE(threads);
    set_parallel_threads(threads);
    CHECK(parallel_threads() == threads);
    for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{100000}}) {
      std::vector<int> hits(count, 0);
      std::atomic<int> calls{0}, below_grain{0};
      parallel_for(count, 10, [&](std::size_t begin, std::size_t end) {
        ++calls;
        if (end - begin < 10) ++below_grain;
        for (std::size_t i = begin; i < end; ++i) ++hits[i];
      });
      for (const int h : hits) CHECK(h == 1);
      CHECK(calls.load() <= 4 * threads);  // a few pieces per thread
      if (count >= 10) CHECK(below_grain.load() == 0);
      if (count < 20) CHECK(calls.load() <= 1);  // under two grains: the caller alone
    }
  }
  set_parallel_threads(1);
}

TEST_CASE("parallel_for runs nested calls on the caller and brings an exception back") {
  set_parallel_threads(3);
  std::vector<int> hits(3000, 0);
  parallel_for(3, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t part = begin; part < end; ++part)
      parallel_for(1000, 1, [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) ++hits[part * 1000 + i];
      });
  });
  for (const int h : hits) CHECK(h == 1);
  CHECK_THROWS_AS(parallel_for(100, 1, [](std::size_t begin, std::size_t) {
                    if (begin > 0) throw std::runtime_error("a worker's part failed");
                  }),
                  std::runtime_error);
  int after = 0;
  parallel_for(100, 1, [&](std::size_t, std::size_t) { after = 1; });  // the pool still works
  CHECK(after == 1);
  set_parallel_threads(1);
}

TEST_CASE("the pool is resized while another thread runs jobs (the app restarting a run)") {
  set_parallel_threads(2);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, jobs{0};
  std::thread runner([&] {
    std::vector<int> hits(5000);
    while (!stop) {
      std::fill(hits.begin(), hits.end(), 0);
      parallel_for(hits.size(), 100, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) ++hits[i];
      });
      for (const int h : hits) bad += h != 1;
      ++jobs;
    }
  });
  for (int round = 0; round < 200; ++round) set_parallel_threads(1 + round % 4);
  while (jobs < 50) std::this_thread::yield();
  stop = true;
  runner.join();
  CHECK(bad.load() == 0);
  set_parallel_threads(1);
}

TEST_CASE("inside ParallelSteps (nested, on two threads) every element is still done once, and the pool still resizes") {
  set_parallel_threads(3);
  std::atomic<int> bad{0};
  const auto pass = [&] {
    std::vector<int> hits(20000);
    parallel_for(hits.size(), 100, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) ++hits[i];
    });
    for (const int h : hits) bad += h != 1;
  };
  {
    const ParallelStep step;
    for (int round = 0; round < 50; ++round) pass();
    std::thread other([&] {
      const ParallelStep inner;
      for (int round = 0; round < 50; ++round) pass();
    });
    set_parallel_threads(2);  // the workers spinning for the next pass are told to quit and replaced
    for (int round = 0; round < 50; ++round) pass();
    other.join();
  }
  pass();  // and after the steps, with the workers back to sleeping
  CHECK(bad.load() == 0);
  CHECK(parallel_threads() == 2);
  set_parallel_threads(1);
}
