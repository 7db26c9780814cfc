// A pool of sleeping workers for the CPU backend's element-wise passes (parallel.hpp).
#include "fpscope/gpu/parallel.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace fpscope {

namespace {

class Pool {
 public:
  ~Pool() { resize(1); }

  int size() {
    std::lock_guard lock(mutex_);
    return static_cast<int>(workers_.size()) + 1;
  }

  void resize(int threads) {
    const std::lock_guard one_at_a_time(resize_mutex_);  // two resizes never interleave their joins
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return !running_; });  // another thread's job finishes first
    const std::size_t wanted = static_cast<std::size_t>(std::max(1, threads)) - 1;
    if (wanted == workers_.size()) return;
    quit_ = true;
    ++generation_;
    wake_.notify_all();
    std::vector<std::thread> old;
    old.swap(workers_);
    lock.unlock();
    for (std::thread& t : old) t.join();
    lock.lock();
    quit_ = false;
    // Each worker starts from the generation now, so a job posted before it first waits is not missed.
    for (std::size_t w = 0; w < wanted; ++w)
      workers_.emplace_back([this, w, start = generation_.load()] {
        // Named, for people reading `top -H`, gdb and /proc (a test finds them there).
        pthread_setname_np(pthread_self(), "fpscope-pool");
        work(w + 1, start);
      });
  }

  // A ParallelStep begins (+1) or ends (-1).
  void keep_awake(int change) { awake_.fetch_add(change, std::memory_order_relaxed); }
  void run(std::size_t count, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn) {
    std::unique_lock lock(mutex_);
    const std::size_t threads = workers_.size() + 1;
    const std::size_t parts = std::min(threads, std::max<std::size_t>(1, count / std::max<std::size_t>(1, grain)));
    if (parts <= 1 || running_) {  // small, or called from inside a job: on the caller
      lock.unlock();
      if (count > 0) fn(0, count);
      return;
    }
    running_ = true;
    job_ = &fn;
    count_ = count;
    parts_ = parts;
    // A few pieces per thread, claimed one at a time: a thread the system sets aside for a while
    // (the app's drawing on a small machine) holds up one piece, not a whole share.
    pieces_ = std::min(parts * pieces_per_thread, std::max<std::size_t>(1, count / std::max<std::size_t>(1, grain)));
    next_piece_.store(0, std::memory_order_relaxed);
    pending_ = parts - 1;
    error_ = nullptr;
    ++generation_;
    wake_.notify_all();
    lock.unlock();
    std::exception_ptr caller_error;
    try {
      run_pieces();
    } catch (...) {
      caller_error = std::current_exception();  // the workers still finish before the job ends
    }
    spin_until([this] { return pending_.load(std::memory_order_acquire) == 0; }, spin_polls);
    lock.lock();
    done_.wait(lock, [this] { return pending_ == 0; });
    if (caller_error && !error_) error_ = caller_error;
    running_ = false;
    job_ = nullptr;
    done_.notify_all();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  // Claims pieces until none are left; a piece that throws ends the claiming for everyone.
  void run_pieces() {
    for (;;) {
      const std::size_t piece = next_piece_.fetch_add(1, std::memory_order_relaxed);
      if (piece >= pieces_) return;
      try {
        (*job_)(count_ * piece / pieces_, count_ * (piece + 1) / pieces_);
      } catch (...) {
        next_piece_.store(pieces_, std::memory_order_relaxed);
        throw;
      }
    }
  }

  void work(std::size_t part, std::uint64_t seen) {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (generation_.load(std::memory_order_relaxed) == seen) {
        // The step's next pass usually follows within microseconds: look for it a while before
        // sleeping (a sleeping worker costs a wake-up of tens of microseconds, and the caller
        // has often done a small pass alone by then) -- longer inside a training step.
        lock.unlock();
        const bool awake = awake_.load(std::memory_order_relaxed) > 0;
        spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; }, awake ? awake_spin_polls : spin_polls, awake);
        lock.lock();
      }
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
      seen = generation_.load(std::memory_order_relaxed);
      if (quit_) return;
      if (part >= parts_) continue;
      lock.unlock();
      std::exception_ptr error;
      try {
        run_pieces();
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error && !error_) error_ = error;
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) done_.notify_all();  // all: a resize may wait on done_ too
    }
  }

  // Polls `ready` up to `polls` times, the pause instruction between polls (25-30 ns each on
  // this project's Zen 4: spin_polls is about 50 microseconds). `yielding`: every 64th poll
  // offers the core to any other thread that wants it (the app's drawing, software GL's render
  // threads), so that a long wait takes a core only from nobody.
  template <typename Ready>
  static void spin_until(Ready ready, int polls, bool yielding = false) {
    for (int i = 0; i < polls; ++i) {
      if (ready()) return;
      if (yielding && (i & 63) == 63) {
        std::this_thread::yield();
        continue;
      }
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
  }

  std::mutex resize_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  std::atomic<std::uint64_t> generation_{0};  // changed under mutex_, read by spinning workers without it
  bool quit_ = false;
  bool running_ = false;
  const std::function<void(std::size_t, std::size_t)>* job_ = nullptr;
  static constexpr std::size_t pieces_per_thread = 4;
  static constexpr int spin_polls = 2000;
  static constexpr int awake_spin_polls = 100000;  // 3 to 5 milliseconds: longer than any serial stretch of a step
  std::atomic<int> awake_{0};  // the ParallelSteps alive: the workers spin the longer while any is
  std::size_t count_ = 0, parts_ = 0, pieces_ = 0;
  std::atomic<std::size_t> pending_{0};
  std::atomic<std::size_t> next_piece_{0};
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool instance;
  return instance;
}

}  // namespace

void set_parallel_threads(int threads) { pool().resize(threads); }

ParallelStep::ParallelStep() { pool().keep_awake(+1); }
ParallelStep::~ParallelStep() { pool().keep_awake(-1); }
int parallel_threads() { return pool().size(); }

void parallel_for(std::size_t count, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn) {
  pool().run(count, grain, fn);
}

}  // namespace fpscope
