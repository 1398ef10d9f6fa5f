// The domain's requests and answers: plain structs the rpc layer converts to and from proto.
//
// Entities are the store's records (server/store/records.h) plus the documents decoded from
// their JSON (WorkloadConfig, Environment, RunSummary, Progress — protobuf messages, since the
// shared config rules in common/workload_config.h work on them; no gRPC type appears here).
// Numbers and limits that requests are checked against are documented with each field.
//
// Value types; not synchronized.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/request_limits.h"
#include "medprof/v1/results.pb.h"
#include "medprof/v1/workload.pb.h"
#include "server/store/records.h"

namespace medprof::server {

// Server-wide settings of the domain layer (flags of medprof-server).
struct DomainOptions {
  // How long a run's lease lasts without a heartbeat before the run is declared lost and its
  // job requeued (ms, default 30000; 1000..3600000, at least 2 heartbeat intervals).
  int64_t lease_ttl_ms = 30000;
  // Heartbeat interval told to agents at registration (ms, default 5000; 100..600000). An agent
  // is "online" while its last contact is within 3 intervals.
  int64_t heartbeat_interval_ms = 5000;
  // Attempts per job when a submission does not say (default 3; 1..10).
  int max_attempts_default = 3;
  // The longest AcquireJob long-poll (ms, default 30000).
  int64_t max_wait_ms = 30000;
  // Jobs one study may hold (presets x targets x repeats; default 1000).
  int max_jobs_per_study = limits::kMaxJobsPerStudy;
  // Bytes of worker records one run may store (serialized size; default 512 MiB;
  // 1 MiB..64 GiB). Past it the upload is refused with RESOURCE_EXHAUSTED naming the limit, and
  // the agent stops the run.
  int64_t max_result_bytes_per_run = int64_t{512} << 20;
  // Comparisons of studies kept for the next identical compare (default 256; 0..100000; 0 = every
  // compare computed afresh). See compare_cache.h.
  int compare_cache_entries = 256;
  // Nice value of the threads that run read-only queries (compare, studies, runs, kernels, diff,
  // timeline; query_pool.h), so that reads cannot take the CPU from writes (default 10; 0..19;
  // 0 = queries run on the calling thread at its priority).
  int query_nice = 10;
  // User models (model_library.h): the blob directory their files live in ("" = none: model
  // calls are refused), and the largest file accepted (bytes, default 2 GiB; 1..1 TiB).
  std::string model_dir;
  int64_t max_model_bytes = int64_t{2} << 30;

  // INVALID_ARGUMENT naming the flag and its range when a value is out of range.
  absl::Status Validate() const;
};

enum class StudyState { kUnspecified = 0, kActive = 1, kDone = 2, kCancelled = 3 };

// ---------------------------------------------------------------- agents

struct RegisterAgentRequest {
  int protocol_version = 0;                  // must be 1
  std::string agent_name;                    // 1..128 printable characters without spaces
  std::string host;                          // <= 255 characters
  std::string version;                       // <= 128 characters
  std::vector<DeviceRecord> devices;         // 1..64; cuda index 0..63 (unique), cpu index -1
  std::map<std::string, std::string> labels; // <= 64; key 1..64 of [A-Za-z0-9_.-], value <= 256
  int max_concurrent_jobs = 0;               // 0 = 1; 1..64
};

struct RegisterAgentResult {
  std::string agent_id;
  int64_t heartbeat_interval_ms = 0;
  int64_t lease_ttl_ms = 0;
  std::string server_version;
};

struct AgentView {
  AgentRecord record;
  bool online = false;
  int running_jobs = 0;
};

// ---------------------------------------------------------------- scheduling

struct HeartbeatRequest {
  std::string agent_id;
  std::vector<std::string> running_run_ids;                  // <= 1024
  std::vector<std::pair<std::string, v1::Progress>> progress;  // (run_id, progress), <= 1024
  bool draining = false;
};

struct HeartbeatResult {
  std::vector<std::string> cancel_run_ids;   // stop these workers (job cancelled)
  std::vector<std::string> unknown_run_ids;  // reported as running, but not running here for the server
};

struct AcquireJobRequest {
  std::string agent_id;
  std::vector<int> free_device_indexes;  // empty = every device without a running run of this agent
  int wait_ms = 0;                       // 0..max_wait_ms
};

struct Assignment {
  std::string run_id;
  std::string job_id;
  std::string study_id;
  int attempt = 1;
  v1::WorkloadConfig config;
  int device_index = -1;
  int timeout_s = 0;
  int64_t lease_ttl_ms = 0;
};

struct ResultChunk {
  std::string run_id;
  std::string agent_id;
  uint64_t seq = 0;  // >= 1
  v1::WorkerMessage message;
};

// run_id -> every seq <= value is stored.
using CommittedThrough = std::map<std::string, uint64_t>;

struct FinishRunRequest {
  std::string agent_id;
  std::string run_id;
  RunState state = RunState::kUnspecified;  // succeeded | failed | interrupted | cancelled
  std::string error;                        // the first 64 KiB are kept
  std::string stderr_tail;                  // the last 64 KiB are kept
  uint64_t last_seq = 0;
  int exit_code = 0;
  std::optional<v1::Environment> agent_environment;
};

// ---------------------------------------------------------------- studies

struct SubmitStudyRequest {
  std::string name;                  // <= 200 characters
  std::vector<std::string> presets;  // 1..16, known, no repeats
  v1::WorkloadConfig config;         // shared settings; `preset` is ignored
  std::vector<std::string> targets;  // <= 64 selectors; empty = one "any agent" target
  int repeats = 0;                   // 0 = 1; 1..100
  int max_attempts = 0;              // 0 = DomainOptions::max_attempts_default; 1..10
  int timeout_s = 0;                 // 0 = 3600; 1..604800
};

struct JobView {
  JobRecord record;
  v1::WorkloadConfig config;
  std::optional<v1::Progress> last_progress;
};

struct SubmitStudyResult {
  std::string study_id;
  std::vector<JobView> jobs;
  std::vector<std::string> warnings;
};

struct StudyView {
  StudyRecord record;
  StudyState state = StudyState::kUnspecified;
  JobCounts counts;
  std::vector<JobView> jobs;  // GetStudy only
};

struct ListStudiesRequest {
  int limit = 0;           // 0 = 50; 1..1000
  std::string page_token;  // "" = newest
};

struct ListStudiesResult {
  std::vector<StudyView> studies;
  std::string next_page_token;  // "" = no more
};

struct StudyEvent {
  EventRecord record;
  std::optional<v1::Progress> progress;
};

struct ListRunsRequest {
  std::string study_id;  // optional filter
  std::string job_id;    // optional filter
  int limit = 0;         // 0 = 100; 1..10000
};

struct RunView {
  RunRecord record;
  std::string preset;
  v1::WorkloadConfig effective;  // as the worker applied it; the job's config until it reports
  v1::Environment environment;
  std::optional<v1::RunSummary> summary;
  // GetRun only:
  std::vector<StepRow> steps;
  std::vector<OpRow> ops;
  std::vector<KernelRow> kernels;
  std::vector<MetricRow> metrics;
};

// ---------------------------------------------------------------- queries

struct CompareRequest {
  std::string study_id;                // required unless run_ids is given
  std::vector<std::string> run_ids;    // run filter: 0..1000 succeeded runs (within study_id if set)
  std::string baseline_preset;         // "" = "baseline"
  std::string baseline_gpu;            // cross-GPU speedups vs this GPU ("" = none); exact or unique substring
  std::vector<std::string> more_study_ids;  // 0..7 further studies (not with run_ids): cells per study
  v1::Phase phase = v1::PHASE_UNSPECIFIED;  // unspecified = every phase present
  int top_categories = 0;              // 0 = 3; 1..12
  int top_kernels = 0;                 // 0 = 5; 1..50
};

// A cell's counter metrics (metrics layer). Unset = not measured; collected false = none at all.
struct CellMetrics {
  bool collected = false;
  std::string not_collected;           // "metrics not collected: <reason>" when !collected
  std::string source;                  // "phase" | "kernels" (the first run's; see query_engine.h)
  std::optional<double> sm_cycles;     // per measured step, mean over the runs that have it
  std::optional<double> warp_instructions;
  std::optional<double> sm_cycles_ratio;          // vs the baseline preset's cell, same GPU and phase
  std::optional<double> warp_instructions_ratio;
  std::optional<double> tensor_pipe_pct;          // 0..100, time-weighted
  std::optional<double> fma_pipe_pct;
  std::optional<double> achieved_occupancy_pct;
  std::optional<double> l1_hit_pct;
  std::optional<double> l2_hit_pct;
  std::optional<double> dram_throughput_pct;
  std::optional<double> roof_pct;                 // roofline: time-weighted % of the binding roof
  std::optional<double> memory_bound_share;       // 0..1 of the placed kernels' time
  std::optional<double> compute_bound_share;
  std::optional<double> latency_bound_share;
  int runs_with_metrics = 0;
};

struct CellStalls {
  bool collected = false;
  std::string not_collected;           // "stalls not collected: <reason>"
  std::string source;                  // "metrics" | "pc_sampling"
  std::vector<std::pair<std::string, double>> shares;  // reason -> share 0..1, largest first
};

struct TopKernel {
  std::string name;
  std::string op;
  std::string category;
  int64_t total_ns = 0;                // summed over the cell's runs
  double share = 0;                    // of the cell's kernel time
  double priority = 0;                 // mean over the cell's runs (0 without findings)
  double speedup = 0;                  // largest among its findings
  std::vector<FindingRow> findings;    // distinct (rule, finding), largest speedup first
  double coverage_pct = -1;            // mean metrics coverage over the runs that measured it; -1 = none
};

// A speedup's 95 % bootstrap interval; significant = the interval excludes 1.0.
struct SpeedupInterval {
  double lo = 0;
  double hi = 0;
  bool significant = false;
};

struct CompareCell {
  std::string gpu;
  std::string preset;
  std::string model_sha256;     // the cell's user model; "" = the built-in Med-DDPM (a cell key)
  std::string model_file_name;  // its name as uploaded, for labels
  v1::Phase phase = v1::PHASE_UNSPECIFIED;
  int n = 0;
  int steps = 0;
  double step_ms_median = 0;
  double step_ms_p10 = 0;
  double step_ms_p90 = 0;
  bool has_baseline = false;
  double speedup_vs_baseline = 0;
  std::vector<std::pair<std::string, double>> categories;  // largest share first
  std::string time_source;  // "kernels" | "ops" | "" (neither recorded)
  std::vector<std::string> notes;
  CellMetrics metrics;
  CellStalls stalls;
  std::vector<TopKernel> top_kernels;
  std::string findings_note;           // "" when findings exist
  bool has_gpu_baseline = false;
  double speedup_vs_baseline_gpu = 0;  // baseline-GPU median / this median, same preset and phase
  // 95 % bootstrap intervals (intervals.h). interval_method says how the median's was drawn:
  // "runs, then steps" (n > 1) or "steps of 1 run".
  double step_ms_ci_lo = 0;
  double step_ms_ci_hi = 0;
  std::string interval_method;
  std::optional<SpeedupInterval> speedup_ci;      // unset for the baseline cell itself and without a baseline
  std::optional<SpeedupInterval> speedup_gpu_ci;  // unset for the baseline GPU's own cells and without one
  // Cross-study compare only (more_study_ids): the cell's study, and the first study's median for
  // the same GPU, phase and preset / this median.
  std::string study_id;
  bool has_study_baseline = false;
  double speedup_vs_first_study = 0;
  std::optional<SpeedupInterval> speedup_study_ci;
};

struct CompareResult {
  std::string study_id;
  std::string baseline_preset;
  std::string baseline_gpu;            // resolved GPU name ("" = none asked)
  int runs_compared = 0;
  std::vector<std::string> study_ids;  // every compared study, first first (cross-study only)
  std::vector<CompareCell> cells;
};

// `medprof kernels RUN`.
struct KernelsRequest {
  std::string run_id;
  int top = 0;                         // 0 = all; 1..10000
  bool signatures = false;             // also the listed kernels' launch signatures
};

struct KernelShareRow {
  std::string name;
  std::string category;
  std::string op;
  std::string phase;
  int64_t count = 0;
  int64_t total_ns = 0;
  double share = 0;                    // of the run's total (every row)
  double coverage_pct = -1;            // the kernel aggregate's coverage; -1 = not measured
};

struct SignatureShareRow {
  SignatureRow row;
  double launches_per_step = 0;
  double share_of_kernel = 0;
  bool measured = false;
};

struct KernelsResult {
  std::string run_id;
  std::vector<KernelShareRow> kernels; // largest total_ns first
  int64_t total_ns = 0;
  int total_rows = 0;
  std::string time_source;             // "kernels" | "ops" (CPU runs: op self times)
  std::vector<SignatureShareRow> signatures;  // request.signatures: the listed kernels', largest first
};

// `medprof diff RUN_A RUN_B`.
struct DiffRequest {
  std::string run_a;
  std::string run_b;
  int top = 0;                         // 0 = all; 1..10000
};

struct DiffRowView {
  std::string op;
  std::string category;
  int64_t a_ns = 0;                    // per measured step
  int64_t b_ns = 0;
  int64_t delta_ns = 0;                // b - a
  double ratio = 0;                    // b / a; 0 when a is 0
  double a_share = 0;
  double b_share = 0;
  int a_kernels = 0;                   // distinct kernel (or op) names
  int b_kernels = 0;
  int64_t a_count = 0;                 // launches per measured step
  int64_t b_count = 0;
};

struct DiffResult {
  std::string run_a;
  std::string run_b;
  std::vector<DiffRowView> rows;       // largest |delta_ns| first
  int64_t a_total_ns = 0;              // per step
  int64_t b_total_ns = 0;
  int a_steps = 0;
  int b_steps = 0;
  std::string time_source;             // "kernels" | "ops"
  double a_step_ms_median = 0;         // median step wall time (what a step costs; the totals above
  double b_step_ms_median = 0;         // are summed kernel or op self times, which differ from it)
};

// A run's stored raw timeline (and PM-sampling utilization), parts merged.
struct TimelineResult {
  std::string run_id;
  v1::Timeline timeline;
  std::optional<v1::UtilizationTimeline> utilization;
};

}  // namespace medprof::server
