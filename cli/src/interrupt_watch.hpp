// Ctrl-C (SIGINT) or SIGTERM (a scheduler preempting the job, `timeout`, `docker stop`) during
// `fpscope train`: the run stops after its current step, its log whole; a second one stops it at
// once, its log whole up to the last step written (command_train.cpp).
#pragma once

#include <signal.h>

namespace fpscope::cli {

// While one lives, SIGINT and SIGTERM are blocked in the thread that made it and so in every thread started
// from there on (the engine's pool, the threads oneDNN and OpenMP start), and the training loop
// asks between steps whether one arrived. No thread that computes ever runs a signal handler:
// oneDNN's JIT sgemm kernels (before its 2026 fix) point the stack pointer into a heap workspace
// while they run, so a signal's frame lands in the heap (oneDNN issue 4845, fixed by pull request
// 4855; Debian's 2.6.3 has the kernels). With SIGINT handled on whichever thread it landed, about
// one interrupted run in twenty died of a corrupted heap inside a step (2 of 40 on one thread;
// none of 60 with the handler moved to an alternate stack, none of 120 with this). Threads started
// before it (a library's own, at load) keep them; there a handler only notes which arrived.
// Make it before the trainer, so before any thread of the run.
class InterruptWatch {
 public:
  InterruptWatch();
  ~InterruptWatch();  // the mask and the handlers as they were, a signal still pending taken first
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;
  // The first of SIGINT and SIGTERM to arrive since it was made (taking it off the pending set);
  // 0 while neither has.
  int interrupted();
  // Whether another SIGINT or SIGTERM arrived after the first (taking it off the pending set): a
  // second Ctrl-C, for a run that should not wait for its step to finish.
  bool interrupted_again();

 private:
  sigset_t previous_mask_;
  struct sigaction previous_int_ {}, previous_term_ {};
};

}  // namespace fpscope::cli
