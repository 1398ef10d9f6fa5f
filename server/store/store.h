// Store: medprof-server's persistent state behind one small interface.
//
// Every access happens inside a transaction: Write() runs a function with a StoreTx and
// commits when it returns OK (rolls back on an error, so a refused request leaves nothing
// behind); Read() gives a consistent snapshot and refuses writes. A committed Write is durable
// (per the synchronous setting of the implementation) before Write() returns, which is what lets
// the server acknowledge results only after they are stored.
//
// The StoreTx passed to the function is valid only during the call. Store implementations are
// thread-safe: transactions from different threads are serialized. Calls on one StoreTx must
// stay on the calling thread. Methods return NOT_FOUND-free results: lookups give
// std::nullopt for missing rows and leave the error text to the caller, which knows the field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/store/records.h"

namespace medprof::server {

struct RunFilter {
  std::string study_id;                  // "" = any
  std::string job_id;                    // "" = any
  std::string agent_id;                  // "" = any
  RunState state = RunState::kUnspecified;  // kUnspecified = any
  int limit = 100;                       // newest first
};

class StoreTx {
 public:
  virtual ~StoreTx() = default;

  // ---- agents
  virtual absl::StatusOr<std::optional<AgentRecord>> GetAgent(const std::string& agent_id) = 0;
  virtual absl::StatusOr<std::optional<AgentRecord>> FindAgentByName(const std::string& name) = 0;
  // Inserts or replaces the agent with its devices and labels.
  virtual absl::Status PutAgent(const AgentRecord& agent) = 0;
  virtual absl::Status TouchAgent(const std::string& agent_id, int64_t last_seen_unix_ms, bool draining) = 0;
  virtual absl::StatusOr<std::vector<AgentRecord>> ListAgents() = 0;

  // ---- studies
  virtual absl::Status InsertStudy(const StudyRecord& study) = 0;
  virtual absl::StatusOr<std::optional<StudyRecord>> GetStudy(const std::string& study_id) = 0;
  // Newest first; only studies with seq < before_seq (0 = from the newest).
  virtual absl::StatusOr<std::vector<StudyRecord>> ListStudies(int64_t before_seq, int limit) = 0;
  // Writes cancelled, cancel_reason and finished_unix_ms.
  virtual absl::Status UpdateStudy(const StudyRecord& study) = 0;

  // ---- jobs
  virtual absl::Status InsertJob(const JobRecord& job) = 0;
  virtual absl::StatusOr<std::optional<JobRecord>> GetJob(const std::string& job_id) = 0;
  // In submission order.
  virtual absl::StatusOr<std::vector<JobRecord>> ListJobs(const std::string& study_id) = 0;
  // Queued jobs of every study, oldest submission first.
  virtual absl::StatusOr<std::vector<JobRecord>> ListQueuedJobs(int limit) = 0;
  // Writes state, attempts, error, current_run_id, progress_json and updated_unix_ms.
  virtual absl::Status UpdateJob(const JobRecord& job) = 0;
  virtual absl::StatusOr<JobCounts> CountJobs(const std::string& study_id) = 0;

  // ---- runs
  virtual absl::Status InsertRun(const RunRecord& run) = 0;
  virtual absl::StatusOr<std::optional<RunRecord>> GetRun(const std::string& run_id) = 0;
  virtual absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunFilter& filter) = 0;
  // Running runs whose lease ends at or before `now_unix_ms`.
  virtual absl::StatusOr<std::vector<RunRecord>> ListExpiredRuns(int64_t now_unix_ms) = 0;
  virtual absl::Status ExtendLease(const std::string& run_id, int64_t lease_expires_unix_ms) = 0;
  // Writes state, error, stderr_tail, exit_code and finished_unix_ms.
  virtual absl::Status UpdateRunState(const RunRecord& run) = 0;
  // Writes the result columns: error_kind, effective_json, environment_json, summary_json,
  // gpu_name, backend, parameters, worker_started_unix_ms, kernels_dropped, chunks_through.
  virtual absl::Status UpdateRunResults(const RunRecord& run) = 0;

  // ---- uploaded chunks (idempotency of result upload)
  // Records (run_id, seq); false when it was already stored.
  virtual absl::StatusOr<bool> InsertChunk(const std::string& run_id, uint64_t seq, std::string_view kind,
                                           int64_t unix_ms) = 0;
  virtual absl::StatusOr<bool> HasChunk(const std::string& run_id, uint64_t seq) = 0;
  // Stored seqs of the run greater than `after`, ascending, at most `limit`.
  virtual absl::StatusOr<std::vector<uint64_t>> ListChunkSeqs(const std::string& run_id, uint64_t after,
                                                              int limit) = 0;

  // ---- results
  virtual absl::Status InsertSteps(const std::string& run_id, const std::vector<StepRow>& rows) = 0;
  virtual absl::Status InsertOps(const std::string& run_id, const std::vector<OpRow>& rows) = 0;
  virtual absl::Status InsertKernels(const std::string& run_id, const std::vector<KernelRow>& rows) = 0;
  virtual absl::Status InsertMetrics(const std::string& run_id, const std::vector<MetricRow>& rows) = 0;
  virtual absl::Status InsertSignatures(const std::string& run_id, const std::vector<SignatureRow>& rows) = 0;
  virtual absl::StatusOr<std::vector<StepRow>> ListSteps(const std::string& run_id) = 0;
  virtual absl::StatusOr<std::vector<OpRow>> ListOps(const std::string& run_id) = 0;
  virtual absl::StatusOr<std::vector<KernelRow>> ListKernels(const std::string& run_id) = 0;
  // The run's kernel rows with only name, op, phase, category, count and total_ns filled (what
  // compare reads for every run; the launch shape columns are left empty).
  virtual absl::StatusOr<std::vector<KernelRow>> ListKernelTimes(const std::string& run_id) = 0;
  virtual absl::StatusOr<std::vector<MetricRow>> ListMetrics(const std::string& run_id) = 0;
  // The run's launch signatures, largest total_ns first.
  virtual absl::StatusOr<std::vector<SignatureRow>> ListSignatures(const std::string& run_id) = 0;

  // ---- findings and timelines (schema version 3)
  virtual absl::Status InsertFindings(const std::string& run_id, const std::vector<FindingRow>& rows) = 0;
  // Highest priority first.
  virtual absl::StatusOr<std::vector<FindingRow>> ListFindings(const std::string& run_id) = 0;
  // Appends one part of `kind` (part = number of parts of that kind stored so far).
  virtual absl::Status AppendTimelinePart(const std::string& run_id, const TimelinePart& part) = 0;
  // The run's parts of `kind`, in part order.
  virtual absl::StatusOr<std::vector<TimelinePart>> ListTimelineParts(const std::string& run_id,
                                                                      std::string_view kind) = 0;
  // Jobs of every study per state name ("queued", "running", ...); states without jobs absent.
  virtual absl::StatusOr<std::map<std::string, int64_t>> CountJobsByState() = 0;

  // ---- events
  // Appends the event and returns its event_id.
  virtual absl::StatusOr<int64_t> AppendEvent(const EventRecord& event) = 0;
  // The study's events with event_id > after_event_id, ascending, at most `limit`.
  virtual absl::StatusOr<std::vector<EventRecord>> ListEvents(const std::string& study_id,
                                                              int64_t after_event_id, int limit) = 0;

  // ---- bearer tokens (hashes only)
  virtual absl::Status InsertToken(const TokenRecord& token) = 0;
  virtual absl::StatusOr<std::optional<TokenRecord>> GetToken(const std::string& token_id) = 0;
  // Every token, oldest first (revoked ones included).
  virtual absl::StatusOr<std::vector<TokenRecord>> ListTokens() = 0;
  // Sets revoked_unix_ms when the token is not revoked yet; false when there is no such token.
  virtual absl::StatusOr<bool> RevokeToken(const std::string& token_id, int64_t revoked_unix_ms) = 0;

  // ---- user models (schema version 8)
  // Inserts the row; false (and nothing written) when (project, sha256) is already there.
  virtual absl::StatusOr<bool> InsertModel(const ModelRecord& model) = 0;
  virtual absl::StatusOr<std::optional<ModelRecord>> GetModel(const std::string& project,
                                                              const std::string& sha256) = 0;
  // The models of `project` ("" = every project), newest first.
  virtual absl::StatusOr<std::vector<ModelRecord>> ListModels(const std::string& project) = 0;
  // Removes the rows of `sha256` in `project` ("" = every project); returns how many.
  virtual absl::StatusOr<int> DeleteModel(const std::string& project, const std::string& sha256) = 0;
  // Rows (in any project) that still name `sha256`.
  virtual absl::StatusOr<int> CountModelRows(const std::string& sha256) = 0;

  // Rows in one of the store's tables (admin and tests); INVALID_ARGUMENT for other names.
  virtual absl::StatusOr<int64_t> CountRows(std::string_view table) = 0;
};

class Store {
 public:
  virtual ~Store() = default;
  // Runs `fn` in one write transaction; commits when it returns OK, else rolls back and
  // returns its error.
  virtual absl::Status Write(absl::FunctionRef<absl::Status(StoreTx&)> fn) = 0;
  // Runs `fn` on a consistent snapshot; writes inside it fail with INTERNAL.
  virtual absl::Status Read(absl::FunctionRef<absl::Status(StoreTx&)> fn) = 0;
  // The schema version the store is at.
  virtual int schema_version() const = 0;
};

}  // namespace medprof::server
