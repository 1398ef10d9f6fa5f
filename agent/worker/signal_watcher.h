// SignalWatcher: SIGTERM/SIGINT handling for medprof-worker, on one thread of its own.
//
// Start() installs handlers for SIGTERM and SIGINT (any thread may receive them — libraries
// start threads before main() can mask signals, so masking alone is not enough). The handler
// only counts the signal and writes its number to a self-pipe (async-signal-safe); the
// watcher thread reads the pipe and calls `on_signal(signo, count)` (count = signals so far:
// the worker stops after the current step on the first, at once on the second). Also ignores
// SIGPIPE, so a closed result channel is a write error, not a silent death. The destructor
// stops the thread; the handlers stay (they only count once the watcher is gone).
//
// One SignalWatcher per process. Thread-safe: stop_requested()/count() from any thread.
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

  bool stop_requested() const { return count().load() > 0; }
  // SIGTERM/SIGINT received so far (process-wide).
  const std::atomic<int>& count() const;

 private:
  SignalWatcher(Callback on_signal, int read_fd, int write_fd)
      : on_signal_(std::move(on_signal)), read_fd_(read_fd), write_fd_(write_fd) {}
  void Loop();

  Callback on_signal_;
  const int read_fd_;
  const int write_fd_;
  std::thread thread_;
};

}  // namespace medprof::worker
