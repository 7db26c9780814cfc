// The CPU backend's element-wise passes on several cores: parallel_for splits [0, count) into a
// few contiguous pieces per thread, which the threads of a small pool and the caller claim one at
// a time (a thread held up elsewhere delays one piece, not a share). Between jobs a worker looks
// for the next one for about 50 microseconds -- 3 to 5 milliseconds while a ParallelStep lives --
// then sleeps (OpenBLAS runs single-threaded on the same threads, gemm.cpp, so nothing else wants
// the cores meanwhile).
// Callers give work whose every element is computed on its own, never a sum across ranges, so the
// results are the same bits on any number of threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>

namespace fpscope {

// The threads element-wise passes use (set_gemm_threads sets it with the products' count; 1 runs
// everything on the caller).
void set_parallel_threads(int threads);
int parallel_threads();

// A training step's scope: while one lives, the workers wait for the next pass by spinning for
// 3 to 5 milliseconds rather than 50 microseconds, offering the core to any other thread that
// wants it every 64 polls (the app draws on the same cores). A step is hundreds of passes with short serial
// stretches between them; a worker that slept through one wakes tens of microseconds into the
// next, by when the caller has done much of a small pass alone (A/B on the project's 2-core
// machine: GPT bf16 step -8%, MLP bf16 step -16%). Between steps the workers sleep as before.
class ParallelStep {
 public:
  ParallelStep();
  ~ParallelStep();
  ParallelStep(const ParallelStep&) = delete;
  ParallelStep& operator=(const ParallelStep&) = delete;
};

// fn(begin, end) over ranges covering [0, count); ranges below `grain` elements are not split
// further (a pass smaller than two grains runs on the caller alone).
void parallel_for(std::size_t count, std::size_t grain, const std::function<void(std::size_t, std::size_t)>& fn);

// About how many values a piece of element-wise work should hold, and the grain (in items) for
// items of `values_per_item` values each.
inline constexpr std::size_t parallel_grain = 16384;
inline std::size_t grain_of(std::size_t values_per_item) {
  return std::max<std::size_t>(1, parallel_grain / std::max<std::size_t>(1, values_per_item));
}

// out[i] = f(in[i]) for i < count, on the threads (in and out may be the same array).
template <typename T, typename F>
void parallel_map(const T* in, T* out, std::size_t count, F f) {
  parallel_for(count, parallel_grain, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) out[i] = f(in[i]);
  });
}

}  // namespace fpscope
