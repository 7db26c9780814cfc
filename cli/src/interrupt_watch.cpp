// SIGINT for the training loop, never on a computing thread (interrupt_watch.hpp).
#include "interrupt_watch.hpp"

#include <pthread.h>

#include <atomic>
#include <ctime>

namespace fpscope::cli {

namespace {
std::atomic<bool> noted{false};  // by the handler, on a thread started before the watch
void note(int) { noted.store(true); }

sigset_t interrupt_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  return set;
}

// Takes a pending SIGINT, if there is one, without waiting.
bool take_pending() {
  const sigset_t set = interrupt_set();
  sigset_t pending;
  if (sigpending(&pending) != 0 || sigismember(&pending, SIGINT) != 1) return false;
  const timespec no_wait{0, 0};
  return sigtimedwait(&set, nullptr, &no_wait) == SIGINT;
}
}  // namespace

InterruptWatch::InterruptWatch() {
  noted.store(false);
  const sigset_t set = interrupt_set();
  pthread_sigmask(SIG_BLOCK, &set, &previous_mask_);
  struct sigaction action {};
  action.sa_handler = note;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_action_);
}

InterruptWatch::~InterruptWatch() {
  take_pending();
  sigaction(SIGINT, &previous_action_, nullptr);
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
}

bool InterruptWatch::interrupted() {
  if (take_pending()) noted.store(true);
  return noted.load();
}

}  // namespace fpscope::cli
