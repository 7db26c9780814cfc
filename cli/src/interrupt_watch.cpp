// SIGINT and SIGTERM for the training loop, never on a computing thread (interrupt_watch.hpp).
#include "interrupt_watch.hpp"

#include <pthread.h>

#include <atomic>
#include <ctime>

namespace fpscope::cli {

namespace {
std::atomic<int> noted{0};     // the first signal noted, by the handler on a thread started before the watch
std::atomic<int> arrivals{0};  // how many have been noted
void note(int signal_number) {
  int none = 0;
  noted.compare_exchange_strong(none, signal_number);
  arrivals.fetch_add(1);
}

sigset_t interrupt_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Takes a pending SIGINT or SIGTERM, if there is one, without waiting: its number, or 0.
int take_pending() {
  const sigset_t set = interrupt_set();
  sigset_t pending;
  if (sigpending(&pending) != 0 || (sigismember(&pending, SIGINT) != 1 && sigismember(&pending, SIGTERM) != 1)) return 0;
  const timespec no_wait{0, 0};
  const int taken = sigtimedwait(&set, nullptr, &no_wait);
  return taken > 0 ? taken : 0;
}
}  // namespace

InterruptWatch::InterruptWatch() {
  noted.store(0);
  arrivals.store(0);
  const sigset_t set = interrupt_set();
  pthread_sigmask(SIG_BLOCK, &set, &previous_mask_);
  struct sigaction action {};
  action.sa_handler = note;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
}

InterruptWatch::~InterruptWatch() {
  while (take_pending() != 0) {
  }
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
  pthread_sigmask(SIG_SETMASK, &previous_mask_, nullptr);
}

int InterruptWatch::interrupted() {
  if (const int taken = take_pending(); taken != 0) note(taken);
  return noted.load();
}

bool InterruptWatch::interrupted_again() {
  (void)interrupted();
  return arrivals.load() >= 2;
}

}  // namespace fpscope::cli
