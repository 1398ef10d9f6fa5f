// SignalWatcher: SIGTERM/SIGINT handling for medprof-worker, on one thread of its own.
//
// Start() blocks SIGTERM, SIGINT and SIGUSR1 in the calling thread — call it first in main(),
// before LibTorch, CUPTI or anything else starts threads, so every thread inherits the mask —
// and starts a thread that waits for them with sigwait(). Each SIGTERM/SIGINT sets
// stop_requested() and calls `on_signal(signo, count)` on that thread (count = signals so
// far: the worker stops after the current step on the first, at once on the second). The
// destructor wakes the thread with SIGUSR1 and joins it. SIGPIPE is ignored, so a closed
// result channel is a write error, not a silent death.
//
// Thread-safe: stop_requested() from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"

namespace medprof::worker {

class SignalWatcher {
 public:
  using Callback = std::function<void(int signo, int count)>;
  static absl::StatusOr<std::unique_ptr<SignalWatcher>> Start(Callback on_signal);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  bool stop_requested() const { return count_.load() > 0; }
  int last_signal() const { return last_signal_.load(); }
  const std::atomic<int>& count() const { return count_; }

 private:
  explicit SignalWatcher(Callback on_signal) : on_signal_(std::move(on_signal)) {}
  void Loop();

  Callback on_signal_;
  std::atomic<int> count_{0};
  std::atomic<int> last_signal_{0};
  std::atomic<bool> quit_{false};
  std::thread thread_;
};

}  // namespace medprof::worker
