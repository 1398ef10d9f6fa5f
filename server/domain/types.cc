#include "server/domain/types.h"

#include "absl/strings/str_cat.h"

namespace medprof::server {

absl::Status DomainOptions::Validate() const {
  if (heartbeat_interval_ms < 100 || heartbeat_interval_ms > 600000) {
    return absl::InvalidArgumentError(absl::StrCat("--heartbeat-interval-ms: ", heartbeat_interval_ms,
                                                   " is out of range (allowed 100..600000)"));
  }
  if (lease_ttl_ms < 1000 || lease_ttl_ms > 3600000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--lease-ttl-ms: ", lease_ttl_ms, " is out of range (allowed 1000..3600000)"));
  }
  if (lease_ttl_ms < 2 * heartbeat_interval_ms) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--lease-ttl-ms: ", lease_ttl_ms, " is shorter than two heartbeat intervals (", 2 * heartbeat_interval_ms,
        "); a single late heartbeat would lose the run"));
  }
  if (max_attempts_default < 1 || max_attempts_default > 10) {
    return absl::InvalidArgumentError(absl::StrCat("--max-attempts-default: ", max_attempts_default,
                                                   " is out of range (allowed 1..10)"));
  }
  if (max_wait_ms < 0 || max_wait_ms > 600000) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_wait_ms: ", max_wait_ms, " is out of range (allowed 0..600000)"));
  }
  if (max_result_bytes_per_run < (int64_t{1} << 20) || max_result_bytes_per_run > (int64_t{64} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-result-bytes-per-run: ", max_result_bytes_per_run,
                                                   " is out of range (allowed 1048576..68719476736)"));
  }
  if (compare_cache_entries < 0 || compare_cache_entries > 100000) {
    return absl::InvalidArgumentError(absl::StrCat("compare_cache_entries: ", compare_cache_entries,
                                                   " is out of range (allowed 0..100000)"));
  }
  if (max_model_bytes < 1 || max_model_bytes > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-model-bytes: ", max_model_bytes,
                                                   " is out of range (allowed 1..1099511627776)"));
  }
  if (query_nice < 0 || query_nice > 19) {
    return absl::InvalidArgumentError(absl::StrCat("query_nice: ", query_nice, " is out of range (allowed 0..19)"));
  }
  if (max_jobs_per_study < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_jobs_per_study: ", max_jobs_per_study, " must be positive"));
  }
  return absl::OkStatus();
}

}  // namespace medprof::server
