// Notifier: wakes threads waiting for "something changed" (new jobs, new study events).
//
// A generation counter with a condition variable: a waiter reads generation(), checks the
// store, and waits until the generation moves on, a timeout passes, or Shutdown() is called.
// No change is missed: Notify() between the read and the wait makes WaitFor return at once.
//
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace medprof::server {

class Notifier {
 public:
  uint64_t generation() const;
  // Bumps the generation and wakes every waiter.
  void Notify();
  // Waits until generation() != seen, `timeout` passes, or Shutdown(). Returns false once shut down.
  bool WaitFor(uint64_t seen, std::chrono::milliseconds timeout);
  // Wakes every waiter now and makes later waits return at once.
  void Shutdown();
  bool shut_down() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  bool shut_down_ = false;
};

}  // namespace medprof::server
