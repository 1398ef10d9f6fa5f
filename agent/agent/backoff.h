// Capped exponential backoff with jitter, for every retry loop of the agent (register,
// acquire, upload, finish).
//
// Delay of attempt n (0-based): base_n = min(max_ms, initial_ms * multiplier^n), then a value
// drawn uniformly from [base_n * (1 - jitter), base_n]. So every delay lies within
// [initial_ms * (1 - jitter), max_ms], and concurrent agents restarting together spread out.
//
// Not thread-safe: each retry loop owns its Backoff.
#pragma once

#include <cstdint>
#include <random>

#include "absl/status/status.h"

namespace medprof::agent {

struct BackoffOptions {
  // First delay, in ms (default 500). Must be >= 1.
  int64_t initial_ms = 500;
  // Largest delay, in ms (default 30000). Must be >= initial_ms.
  int64_t max_ms = 30'000;
  // Growth per attempt (default 2.0). Must be >= 1.
  double multiplier = 2.0;
  // Fraction of each delay drawn at random, 0..1 (default 0.5; 0 = deterministic).
  double jitter = 0.5;
};

absl::Status ValidateBackoffOptions(const BackoffOptions& options);

class Backoff {
 public:
  // `options` must pass ValidateBackoffOptions (checked in debug builds only; out-of-range
  // values are clamped). `seed` makes the jitter reproducible in tests.
  explicit Backoff(BackoffOptions options = {}, uint64_t seed = std::random_device{}());

  // The delay before the next retry; advances the attempt counter.
  int64_t NextDelayMs();
  // Back to the first delay (after a success).
  void Reset() { attempt_ = 0; }
  // Retries handed out since the last Reset.
  int attempt() const { return attempt_; }

 private:
  BackoffOptions options_;
  int attempt_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace medprof::agent
