// DomainCore: what the domain services share — the store, the clock, the options, and the two
// notifiers (new work for AcquireJob long-polls; new study events for WatchStudy) — plus the
// state changes every service makes the same way (job transitions with their study events).
//
// Internal to server/domain/. The referenced Store and Clock outlive the core. Thread-safe as
// its parts are.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/selector.h"
#include "server/domain/metrics_sink.h"
#include "server/domain/notifier.h"
#include "server/domain/query_pool.h"
#include "server/domain/types.h"
#include "server/store/store.h"

namespace medprof::server {

// Query threads at most: above the gRPC threads that ask at once on a busy server.
inline constexpr int kMaxQueryThreads = 32;

struct DomainCore {
  DomainCore(Store& s, const Clock& c, DomainOptions o)
      : store(s), clock(c), options(o), query_pool(o.query_nice, kMaxQueryThreads) {}
  Store& store;
  const Clock& clock;
  const DomainOptions options;
  Notifier work;    // a job was queued or requeued, or a run ended (a slot freed up)
  Notifier events;  // a study event was appended
  // Monitoring (Prometheus); null = none. Set once at start-up (Domain::set_metrics_sink).
  std::atomic<MetricsSink*> metrics{nullptr};
  QueryPool query_pool;  // runs the read-only queries at a lower CPU priority
};

// Reports a read query's wall time (from construction to destruction) to the core's metrics
// sink under `name` (a string literal), when a sink is set. Scoped to one query on one thread.
class QueryTimer {
 public:
  QueryTimer(DomainCore& core, const char* name)
      : core_(core), name_(name), start_(std::chrono::steady_clock::now()) {}
  ~QueryTimer();
  QueryTimer(const QueryTimer&) = delete;
  QueryTimer& operator=(const QueryTimer&) = delete;

 private:
  DomainCore& core_;
  const char* name_;
  std::chrono::steady_clock::time_point start_;
};

// The job and run rows of a run that arrives whole (import-ncu, upload) rather than through a
// lease: one attempt, no retry, created `now`. The caller sets the job's and the run's state and
// anything else it knows before inserting them.
struct ArrivedRunRows {
  JobRecord job;
  RunRecord run;
};
ArrivedRunRows NewArrivedRun(const std::string& study_id, const std::string& job_id, const std::string& run_id,
                             const std::string& preset, const std::string& target, const std::string& agent_id,
                             std::string config_json, int64_t now);

// The study `study_id` when it exists and is not cancelled; else NOT_FOUND naming the field, or
// FAILED_PRECONDITION saying to `verb` ("import", "upload") into another study.
absl::StatusOr<StudyRecord> OpenStudy(StoreTx& tx, const std::string& study_id, std::string_view verb);

// The event row of a change to `job` (its current state) in `run_id` ("" for none) at `now`.
EventRecord JobEvent(const JobRecord& job, const std::string& run_id, int64_t now, std::string message);

// Writes `job` (stamping updated_unix_ms = now) and appends its event. When the job has ended
// and was the last running or queued job of its study, marks the study finished and appends
// the study's final event (study_finished = true).
absl::Status RecordJobChange(StoreTx& tx, int64_t now, JobRecord& job, const std::string& run_id,
                             const std::string& message);

// Stores a progress report of the job's current run as its last progress and appends a
// progress event, unless it equals the last report (heartbeats repeat them).
absl::Status RecordProgress(StoreTx& tx, int64_t now, JobRecord& job, const std::string& run_id,
                            const v1::Progress& progress);

absl::StatusOr<JobView> DecodeJob(JobRecord record);
absl::StatusOr<StudyEvent> DecodeEvent(EventRecord record);
StudyState StudyStateOf(const StudyRecord& study, const JobCounts& counts);

// The selector library's view of a registered agent.
selector::Agent SelectorAgent(const AgentRecord& agent);

// The job's target with the device kind its config asks for (config.device cpu/cuda) folded in.
// INVALID_ARGUMENT when they contradict each other.
absl::StatusOr<selector::Selector> JobSelector(const std::string& target, const v1::WorkloadConfig& config);

// Positions (into agent.devices) the job may run on, GPUs first, then the CPU device.
std::vector<size_t> EligibleDevices(const selector::Selector& sel, const selector::Agent& agent);

// INVALID_ARGUMENT "<field>: required" for an empty id, or one longer than 64 characters.
absl::Status RequireId(const std::string& value, const char* field);

// The runs the agent has running now.
absl::StatusOr<std::vector<RunRecord>> RunningRunsOf(StoreTx& tx, const std::string& agent_id);

// Keeps the last `max_bytes` of `text` (at a line start when one is near).
std::string Tail(const std::string& text, size_t max_bytes);

}  // namespace medprof::server
