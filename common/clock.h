// Time source for code that must be testable without sleeping (leases, timeouts, backoff).
//
// Clock is an interface; RealClock reads the system clock; FakeClock is advanced by tests.
// Both are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>

namespace medprof {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch.
  virtual int64_t NowUnixMs() const = 0;
  // The process-wide real clock.
  static Clock* Real();
};

class RealClock : public Clock {
 public:
  int64_t NowUnixMs() const override;
};

class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms) {}
  int64_t NowUnixMs() const override { return now_.load(); }
  void AdvanceMs(int64_t ms) { now_ += ms; }
  void SetMs(int64_t ms) { now_ = ms; }

 private:
  std::atomic<int64_t> now_;
};

// Monotonic nanoseconds for measuring durations (never goes back).
int64_t MonotonicNs();

}  // namespace medprof
