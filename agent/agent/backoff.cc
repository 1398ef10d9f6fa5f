#include "agent/agent/backoff.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace medprof::agent {

absl::Status ValidateBackoffOptions(const BackoffOptions& o) {
  if (o.initial_ms < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("backoff initial_ms: ", o.initial_ms, " is out of range (allowed >= 1)"));
  }
  if (o.max_ms < o.initial_ms) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backoff max_ms: ", o.max_ms, " is out of range (allowed >= initial_ms ", o.initial_ms, ")"));
  }
  if (!(o.multiplier >= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("backoff multiplier: ", o.multiplier, " is out of range (allowed >= 1)"));
  }
  if (!(o.jitter >= 0.0 && o.jitter <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("backoff jitter: ", o.jitter, " is out of range (allowed 0..1)"));
  }
  return absl::OkStatus();
}

Backoff::Backoff(BackoffOptions options, uint64_t seed) : options_(options), rng_(seed) {
  assert(ValidateBackoffOptions(options).ok());
  options_.initial_ms = std::max<int64_t>(1, options_.initial_ms);
  options_.max_ms = std::max(options_.initial_ms, options_.max_ms);
  options_.multiplier = std::max(1.0, options_.multiplier);
  options_.jitter = std::clamp(options_.jitter, 0.0, 1.0);
}

int64_t Backoff::NextDelayMs() {
  // initial * multiplier^attempt, computed in double and capped before it can overflow.
  const double grown = static_cast<double>(options_.initial_ms) * std::pow(options_.multiplier, attempt_);
  const double base = std::min(static_cast<double>(options_.max_ms), grown);
  if (attempt_ < 1'000'000) ++attempt_;
  const double low = base * (1.0 - options_.jitter);
  std::uniform_real_distribution<double> pick(low, base);
  const int64_t delay = options_.jitter > 0 ? static_cast<int64_t>(std::llround(pick(rng_)))
                                            : static_cast<int64_t>(std::llround(base));
  return std::clamp<int64_t>(delay, 1, options_.max_ms);
}

}  // namespace medprof::agent
