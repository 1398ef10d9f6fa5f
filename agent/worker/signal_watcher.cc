#include "agent/worker/signal_watcher.h"

#include <pthread.h>
#include <signal.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace medprof::worker {
namespace {

sigset_t WatchedSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);  // wakes the thread for shutdown
  return set;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SignalWatcher>> SignalWatcher::Start(Callback on_signal) {
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t set = WatchedSignals();
  if (int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0) {
    return absl::InternalError(absl::StrCat("pthread_sigmask: ", std::strerror(rc)));
  }
  std::unique_ptr<SignalWatcher> w(new SignalWatcher(std::move(on_signal)));
  w->thread_ = std::thread([p = w.get()] { p->Loop(); });
  return w;
}

SignalWatcher::~SignalWatcher() {
  quit_.store(true);
  if (thread_.joinable()) {
    pthread_kill(thread_.native_handle(), SIGUSR1);
    thread_.join();
  }
}

void SignalWatcher::Loop() {
  const sigset_t set = WatchedSignals();
  while (!quit_.load()) {
    int signo = 0;
    if (sigwait(&set, &signo) != 0) continue;
    if (signo == SIGUSR1) continue;  // quit_ is checked by the loop
    last_signal_.store(signo);
    const int count = count_.fetch_add(1) + 1;
    if (on_signal_) on_signal_(signo, count);
  }
}

}  // namespace medprof::worker
