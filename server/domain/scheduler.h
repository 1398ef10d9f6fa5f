// Scheduler: the job queue's leases — agents take jobs, keep them alive, and finish them.
//
// Rules (DESIGN.md "Scheduling"):
//  * AcquireJob leases the oldest queued job (submission order; a requeued job keeps its
//    place) whose target matches the agent and one of its free devices, creating run attempt n
//    with a lease of lease_ttl_ms. It long-polls up to wait_ms, woken when work appears.
//    An agent runs at most max_concurrent_jobs runs, one per device; a draining agent gets none.
//  * Heartbeat extends the leases of the runs the agent reports as running, tells it which of
//    them to cancel (their job was cancelled) and which the server no longer counts as running.
//  * ExpireLeases (called periodically) turns runs whose lease passed into RUN_LOST and requeues
//    their job while attempts < max_attempts, else fails it ("lease expired on attempt 3 of 3:
//    agent <name> stopped heartbeating").
//  * FinishRun: SUCCEEDED -> job succeeded; FAILED (the workload's own failure) -> job failed at
//    once with the error and the stderr tail; INTERRUPTED -> job requeued (bounded attempts);
//    CANCELLED -> job cancelled. Refused while stored chunks have gaps below last_seq; repeating
//    the same finish is answered again, not applied twice. Only the run's own agent may finish it.
//
// Thread-safe; every change is one store transaction. Holds references into its DomainCore.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "server/domain/call_context.h"
#include "server/domain/core.h"
#include "server/domain/types.h"

namespace medprof::server {

class Scheduler {
 public:
  explicit Scheduler(DomainCore& core) : core_(core) {}

  absl::StatusOr<HeartbeatResult> Heartbeat(const CallContext& ctx, const HeartbeatRequest& request);
  // std::nullopt when no job matched within wait_ms (or the caller's deadline, or shutdown).
  absl::StatusOr<std::optional<Assignment>> AcquireJob(const CallContext& ctx, const AcquireJobRequest& request);
  // The job's state after the run ended (e.g. kQueued again after an interrupted run).
  absl::StatusOr<JobState> FinishRun(const CallContext& ctx, const FinishRunRequest& request);
  // Expires every lease that ended by now; returns how many runs were declared lost.
  absl::StatusOr<int> ExpireLeases();

 private:
  absl::StatusOr<std::optional<Assignment>> TryLease(const AcquireJobRequest& request);

  DomainCore& core_;
};

// "seq 5..7 missing" style description of the gaps in `stored` (ascending seqs > through)
// between `through` and `last_seq`; "" when there are none. Exposed for tests.
std::string DescribeGaps(uint64_t through, const std::vector<uint64_t>& stored, uint64_t last_seq);

}  // namespace medprof::server
