// The rows medprof-server keeps: agents, studies, jobs, runs, result rows and study events.
//
// Plain structs with no protobuf or gRPC types; the Store reads and writes them and the domain
// layer (server/domain) gives them meaning. Nested documents the server only passes along
// (a job's WorkloadConfig, a run's Environment and RunSummary, a progress report) are kept as
// JSON text (protobuf's JSON mapping) written and read by the domain layer; the store does not
// look inside them. Ids are opaque strings made by the domain layer.
//
// Value types; not synchronized.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace medprof::server {

// The numbering matches medprof.v1.JobState / RunState so logs and the DB read alike.
enum class JobState { kUnspecified = 0, kQueued = 1, kRunning = 2, kSucceeded = 3, kFailed = 4, kCancelled = 5 };
enum class RunState {
  kUnspecified = 0, kRunning = 1, kSucceeded = 2, kFailed = 3, kInterrupted = 4, kLost = 5, kCancelled = 6
};

// "queued", "running", ... (the text stored in the DB); "unspecified" for kUnspecified.
const char* JobStateName(JobState s);
const char* RunStateName(RunState s);
// Parses the names above; false on anything else.
bool ParseJobState(std::string_view text, JobState* out);
bool ParseRunState(std::string_view text, RunState* out);
// Succeeded, failed or cancelled: the job will not run again.
bool IsTerminal(JobState s);

struct DeviceRecord {
  int index = -1;                  // CUDA ordinal; -1 for the CPU device
  std::string kind;                // "cuda" | "cpu"
  std::string name;
  std::string uuid;
  std::string compute_capability;  // "9.0"; "" for the CPU
  uint64_t memory_bytes = 0;
  std::string driver_version;
  std::string cuda_driver_version;
  bool mig_enabled = false;
  bool ecc_enabled = false;
  bool counters_admin_only = false;
  int sm_count = 0;
  bool operator==(const DeviceRecord&) const = default;
};

struct AgentRecord {
  std::string agent_id;
  std::string name;                           // unique: same name = same agent
  std::string host;
  std::string version;                        // medprof-agent --version
  std::vector<DeviceRecord> devices;
  std::map<std::string, std::string> labels;
  int max_concurrent_jobs = 1;
  bool draining = false;                      // takes no new jobs
  int64_t registered_unix_ms = 0;
  int64_t last_seen_unix_ms = 0;
};

struct StudyRecord {
  std::string study_id;
  std::string name;
  std::string project;
  int64_t created_unix_ms = 0;
  bool cancelled = false;
  std::string cancel_reason;
  int64_t finished_unix_ms = 0;  // when the last job ended; 0 while active
  int64_t seq = 0;               // insertion order (read-only; assigned by the store)
  // Changes with every write that changes what compare reads of the study's succeeded runs
  // (read-only; kept by the store). With seq (never reused) it names one state of the study.
  int64_t revision = 0;
};

struct JobRecord {
  std::string job_id;
  std::string study_id;
  std::string preset;
  std::string target;            // selector text as submitted ("" = any agent)
  int repeat = 1;                // 1-based
  JobState state = JobState::kQueued;
  int attempts = 0;              // runs started so far
  int max_attempts = 3;
  int timeout_s = 3600;
  std::string error;             // cause when failed or cancelled
  std::string config_json;       // medprof.v1.WorkloadConfig, defaults applied
  std::string current_run_id;    // the latest run ("" before the first)
  std::string progress_json;     // medprof.v1.Progress of the latest report ("" = none)
  int64_t created_unix_ms = 0;
  int64_t updated_unix_ms = 0;
};

struct RunRecord {
  std::string run_id;
  std::string job_id;
  std::string study_id;
  std::string agent_id;
  int attempt = 1;
  int device_index = -1;
  RunState state = RunState::kRunning;
  int64_t lease_expires_unix_ms = 0;
  int64_t started_unix_ms = 0;    // when the server leased it
  int64_t finished_unix_ms = 0;   // 0 while running
  std::string error;
  std::string stderr_tail;
  int exit_code = 0;
  // Filled from the worker's results (schema version 2).
  std::string error_kind;         // WorkerError.kind ("oom", "cuda", ...)
  std::string effective_json;     // medprof.v1.WorkloadConfig as the worker applied it
  std::string environment_json;   // medprof.v1.Environment (worker's, then the agent's additions)
  std::string summary_json;       // medprof.v1.RunSummary ("" until it arrives)
  std::string gpu_name;           // Environment.gpu_name, "cpu" on the CPU backend
  std::string backend;            // profiler backend: "cpu" | "cupti"
  uint64_t parameters = 0;
  int64_t worker_started_unix_ms = 0;
  int64_t kernels_dropped = 0;    // KernelAggregates.dropped_records, summed
  uint64_t chunks_through = 0;    // every seq 1..chunks_through is stored
  int64_t result_bytes = 0;       // serialized bytes of the worker records stored (schema version 5)
};

struct StepRow {
  int phase = 0;                  // medprof.v1.Phase number
  int step = 0;
  int64_t wall_ns = 0;
  int64_t device_ns = 0;
  double loss = 0;
  std::vector<std::pair<std::string, int64_t>> phase_ns;  // fwd, bwd, optim, sample_step
};

struct OpRow {
  std::string name;
  std::string phase;
  std::string category;
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t self_ns = 0;
};

struct KernelRow {
  std::string name;
  std::string op;
  std::string phase;
  std::string category;
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  std::vector<int> grid;
  std::vector<int> block;
  int registers = 0;
  int shared_bytes = 0;
  double theoretical_occupancy = 0;
};

// One launch signature of a kernel in a run (schema version 6): its launches and trace time over
// the run's measured steps (`steps`), keyed by `id` within the run.
struct SignatureRow {
  std::string id;
  std::string kernel;
  std::string op;
  std::string phase;
  std::string shapes;
  std::vector<int> grid;
  std::vector<int> block;
  int64_t dynamic_shared_bytes = 0;
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  int64_t steps = 0;
};

struct MetricRow {
  std::string scope;
  std::string name;
  double value = 0;
  std::string unit;
};

// One KernelFinding of a run (schema version 3).
struct FindingRow {
  std::string kernel;
  std::string op;
  std::string phase;
  std::string category;
  double share = 0;
  double speedup = 0;
  double priority = 0;
  std::string rule;
  std::string finding;
};

// One stored Timeline or UtilizationTimeline message of a run, as protobuf JSON (schema 3).
struct TimelinePart {
  std::string kind;       // "timeline" | "utilization"
  int part = 0;           // 0-based, in upload order
  int64_t events = 0;     // events (timeline) or samples (utilization) in the part
  std::string body_json;
};

// One user model a project may use (models table, schema version 8). The file itself is in the
// server's blob directory under `sha256`; several projects may hold rows for one file.
struct ModelRecord {
  std::string project;
  std::string sha256;             // 64 lowercase hex digits
  std::string file_name;          // as uploaded, without directories
  int64_t size_bytes = 0;
  std::string uploader;           // token id of the uploader ("" without tokens)
  int64_t created_unix_ms = 0;
};

// One bearer token (tokens table, schema version 4). The secret itself is never stored: only
// `hash` = hex SHA-256(salt || secret), with a random per-token salt.
struct TokenRecord {
  std::string token_id;           // public part of the token ("tok-3fa9c02b71de")
  std::string salt;               // hex, 16 random bytes
  std::string hash;               // hex SHA-256(salt bytes || secret)
  std::string role;               // admin | submit | read | agent
  std::string project;            // the project it acts in; "*" (admin only) = every project
  std::string agent_name;         // agent tokens: the one agent name it may act as
  std::string note;               // free text for people ("lab-a CI")
  int64_t created_unix_ms = 0;
  int64_t revoked_unix_ms = 0;    // 0 while valid
};

// One change of one job (or of the study), in the order the server saw it.
struct EventRecord {
  int64_t event_id = 0;           // assigned by the store; strictly increasing
  std::string study_id;
  std::string job_id;             // "" for study-level events
  std::string run_id;
  JobState job_state = JobState::kUnspecified;
  std::string progress_json;      // medprof.v1.Progress for progress events
  std::string message;
  int64_t unix_ms = 0;
  bool study_finished = false;
};

struct JobCounts {
  int total = 0;
  int queued = 0;
  int running = 0;
  int succeeded = 0;
  int failed = 0;
  int cancelled = 0;
  int done() const { return succeeded + failed + cancelled; }
};

}  // namespace medprof::server
