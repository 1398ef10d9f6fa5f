#include "server/store/sqlite_store.h"

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <array>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"
#include "server/store/migrations.h"
#include "server/store/sqlite_db.h"

namespace medprof::server {
namespace {

const Logger kStoreLog("store");

constexpr std::array<absl::string_view, 18> kTables = {
    "schema_version", "agents",    "agent_devices", "agent_labels", "studies",     "jobs",   "runs",
    "run_chunks",     "run_steps", "run_ops",       "run_kernels",  "run_metrics", "events", "tokens",
    "run_findings", "run_timelines", "run_kernel_signatures", "models"};

std::string JoinInts(const std::vector<int>& v) { return absl::StrJoin(v, ","); }

// "128,1,1" -> {128, 1, 1}; empty and unparsable items are skipped. Hand-rolled with
// std::from_chars: it runs for every kernel row compare reads (two lists per row), where
// StrSplit + SimpleAtoi showed in the query benchmark's profile.
std::vector<int> SplitInts(const std::string& text) {
  std::vector<int> out;
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    const char* comma = std::find(p, end, ',');
    int v = 0;
    const auto [ptr, ec] = std::from_chars(p, comma, v);
    if (ec == std::errc() && ptr == comma) out.push_back(v);
    p = comma == end ? end : comma + 1;
  }
  return out;
}

std::string PhaseNsJson(const std::vector<std::pair<std::string, int64_t>>& phase_ns) {
  if (phase_ns.empty()) return std::string();
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : phase_ns) j[k] = v;
  return j.dump();
}

std::vector<std::pair<std::string, int64_t>> ParsePhaseNs(const std::string& text) {
  std::vector<std::pair<std::string, int64_t>> out;
  if (text.empty()) return out;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return out;
  for (const auto& [k, v] : j.items()) {
    if (v.is_number_integer()) out.emplace_back(k, v.get<int64_t>());
  }
  return out;
}

absl::Status CorruptState(absl::string_view table, const std::string& id, const std::string& text) {
  return absl::DataLossError(absl::StrCat(table, " row ", id, ": unknown state '", text, "'"));
}

// ---------------------------------------------------------------- row readers

constexpr char kStudyCols[] =
    "seq, study_id, name, project, created_unix_ms, cancelled, cancel_reason, finished_unix_ms, revision";

StudyRecord ReadStudy(const Statement& st) {
  StudyRecord s;
  s.seq = st.Int(0);
  s.study_id = st.Text(1);
  s.name = st.Text(2);
  s.project = st.Text(3);
  s.created_unix_ms = st.Int(4);
  s.cancelled = st.Int(5) != 0;
  s.cancel_reason = st.Text(6);
  s.finished_unix_ms = st.Int(7);
  s.revision = st.Int(8);
  return s;
}

constexpr char kJobCols[] =
    "job_id, study_id, preset, target, repeat, state, attempts, max_attempts, timeout_s, error, config_json, "
    "current_run_id, progress_json, created_unix_ms, updated_unix_ms";

absl::StatusOr<JobRecord> ReadJob(const Statement& st) {
  JobRecord j;
  j.job_id = st.Text(0);
  j.study_id = st.Text(1);
  j.preset = st.Text(2);
  j.target = st.Text(3);
  j.repeat = static_cast<int>(st.Int(4));
  const std::string state = st.Text(5);
  if (!ParseJobState(state, &j.state)) return CorruptState("jobs", j.job_id, state);
  j.attempts = static_cast<int>(st.Int(6));
  j.max_attempts = static_cast<int>(st.Int(7));
  j.timeout_s = static_cast<int>(st.Int(8));
  j.error = st.Text(9);
  j.config_json = st.Text(10);
  j.current_run_id = st.Text(11);
  j.progress_json = st.Text(12);
  j.created_unix_ms = st.Int(13);
  j.updated_unix_ms = st.Int(14);
  return j;
}

constexpr char kRunCols[] =
    "run_id, job_id, study_id, agent_id, attempt, device_index, state, lease_expires_unix_ms, started_unix_ms, "
    "finished_unix_ms, error, stderr_tail, exit_code, error_kind, effective_json, environment_json, summary_json, "
    "gpu_name, backend, parameters, worker_started_unix_ms, kernels_dropped, chunks_through, result_bytes";

absl::StatusOr<RunRecord> ReadRun(const Statement& st) {
  RunRecord r;
  r.run_id = st.Text(0);
  r.job_id = st.Text(1);
  r.study_id = st.Text(2);
  r.agent_id = st.Text(3);
  r.attempt = static_cast<int>(st.Int(4));
  r.device_index = static_cast<int>(st.Int(5));
  const std::string state = st.Text(6);
  if (!ParseRunState(state, &r.state)) return CorruptState("runs", r.run_id, state);
  r.lease_expires_unix_ms = st.Int(7);
  r.started_unix_ms = st.Int(8);
  r.finished_unix_ms = st.Int(9);
  r.error = st.Text(10);
  r.stderr_tail = st.Text(11);
  r.exit_code = static_cast<int>(st.Int(12));
  r.error_kind = st.Text(13);
  r.effective_json = st.Text(14);
  r.environment_json = st.Text(15);
  r.summary_json = st.Text(16);
  r.gpu_name = st.Text(17);
  r.backend = st.Text(18);
  r.parameters = static_cast<uint64_t>(st.Int(19));
  r.worker_started_unix_ms = st.Int(20);
  r.kernels_dropped = st.Int(21);
  r.chunks_through = static_cast<uint64_t>(st.Int(22));
  r.result_bytes = st.Int(23);
  return r;
}

constexpr char kEventCols[] =
    "event_id, study_id, job_id, run_id, job_state, progress_json, message, unix_ms, study_finished";

constexpr char kTokenCols[] =
    "token_id, salt, hash, role, project, agent_name, note, created_unix_ms, revoked_unix_ms";

constexpr char kModelCols[] = "project, sha256, file_name, size_bytes, uploader, created_unix_ms";

ModelRecord ReadModel(const Statement& st) {
  ModelRecord m;
  m.project = st.Text(0);
  m.sha256 = st.Text(1);
  m.file_name = st.Text(2);
  m.size_bytes = st.Int(3);
  m.uploader = st.Text(4);
  m.created_unix_ms = st.Int(5);
  return m;
}

TokenRecord ReadToken(const Statement& st) {
  TokenRecord t;
  t.token_id = st.Text(0);
  t.salt = st.Text(1);
  t.hash = st.Text(2);
  t.role = st.Text(3);
  t.project = st.Text(4);
  t.agent_name = st.Text(5);
  t.note = st.Text(6);
  t.created_unix_ms = st.Int(7);
  t.revoked_unix_ms = st.Int(8);
  return t;
}

EventRecord ReadEvent(const Statement& st) {
  EventRecord e;
  e.event_id = st.Int(0);
  e.study_id = st.Text(1);
  e.job_id = st.Text(2);
  e.run_id = st.Text(3);
  const std::string state = st.Text(4);
  if (!ParseJobState(state, &e.job_state)) e.job_state = JobState::kUnspecified;
  e.progress_json = st.Text(5);
  e.message = st.Text(6);
  e.unix_ms = st.Int(7);
  e.study_finished = st.Int(8) != 0;
  return e;
}

// Collects every row of a prepared, bound statement through `read`.
template <typename T, typename F>
absl::StatusOr<std::vector<T>> Collect(Statement& st, F read) {
  std::vector<T> out;
  while (true) {
    MEDPROF_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return out;
    if constexpr (std::is_same_v<decltype(read(st)), absl::StatusOr<T>>) {
      MEDPROF_ASSIGN_OR_RETURN(T v, read(st));
      out.push_back(std::move(v));
    } else {
      out.push_back(read(st));
    }
  }
}

// ---------------------------------------------------------------- the transaction

class SqliteTx : public StoreTx {
 public:
  explicit SqliteTx(Db& db) : db_(db) {}

  // ---- agents
  absl::StatusOr<std::optional<AgentRecord>> GetAgent(const std::string& agent_id) override {
    return LoadAgent("WHERE agent_id = ?1", agent_id);
  }
  absl::StatusOr<std::optional<AgentRecord>> FindAgentByName(const std::string& name) override {
    return LoadAgent("WHERE name = ?1", name);
  }

  absl::Status PutAgent(const AgentRecord& a) override {
    {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
          "INSERT INTO agents (agent_id, name, host, version, max_concurrent_jobs, draining, registered_unix_ms, "
          "last_seen_unix_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
          "ON CONFLICT(agent_id) DO UPDATE SET name = excluded.name, host = excluded.host, "
          "version = excluded.version, max_concurrent_jobs = excluded.max_concurrent_jobs, "
          "draining = excluded.draining, registered_unix_ms = excluded.registered_unix_ms, "
          "last_seen_unix_ms = excluded.last_seen_unix_ms"));
      MEDPROF_RETURN_IF_ERROR(st->BindAll(a.agent_id, a.name, a.host, a.version, a.max_concurrent_jobs, a.draining,
                                          a.registered_unix_ms, a.last_seen_unix_ms));
      MEDPROF_RETURN_IF_ERROR(st->Run());
    }
    {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare("DELETE FROM agent_devices WHERE agent_id = ?1"));
      MEDPROF_RETURN_IF_ERROR(st->BindAll(a.agent_id));
      MEDPROF_RETURN_IF_ERROR(st->Run());
    }
    for (size_t i = 0; i < a.devices.size(); ++i) {
      const DeviceRecord& d = a.devices[i];
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
          "INSERT INTO agent_devices (agent_id, position, device_index, kind, name, uuid, compute_capability, "
          "memory_bytes, driver_version, cuda_driver_version, mig_enabled, ecc_enabled, counters_admin_only, "
          "sm_count) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"));
      MEDPROF_RETURN_IF_ERROR(st->BindAll(a.agent_id, static_cast<int>(i), d.index, d.kind, d.name, d.uuid,
                                          d.compute_capability, d.memory_bytes, d.driver_version,
                                          d.cuda_driver_version, d.mig_enabled, d.ecc_enabled,
                                          d.counters_admin_only, d.sm_count));
      MEDPROF_RETURN_IF_ERROR(st->Run());
    }
    {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare("DELETE FROM agent_labels WHERE agent_id = ?1"));
      MEDPROF_RETURN_IF_ERROR(st->BindAll(a.agent_id));
      MEDPROF_RETURN_IF_ERROR(st->Run());
    }
    for (const auto& [k, v] : a.labels) {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st,
                               db_.Prepare("INSERT INTO agent_labels (agent_id, key, value) VALUES (?1, ?2, ?3)"));
      MEDPROF_RETURN_IF_ERROR(st->BindAll(a.agent_id, k, v));
      MEDPROF_RETURN_IF_ERROR(st->Run());
    }
    return absl::OkStatus();
  }

  absl::Status TouchAgent(const std::string& agent_id, int64_t last_seen_unix_ms, bool draining) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st,
                             db_.Prepare("UPDATE agents SET last_seen_unix_ms = ?2, draining = ?3 WHERE agent_id = ?1"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(agent_id, last_seen_unix_ms, draining));
    return st->Run();
  }

  absl::StatusOr<std::vector<AgentRecord>> ListAgents() override {
    std::vector<std::string> ids;
    {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare("SELECT agent_id FROM agents ORDER BY name"));
      MEDPROF_ASSIGN_OR_RETURN(ids, Collect<std::string>(*st, [](const Statement& s) { return s.Text(0); }));
    }
    std::vector<AgentRecord> out;
    for (const std::string& id : ids) {
      MEDPROF_ASSIGN_OR_RETURN(std::optional<AgentRecord> a, GetAgent(id));
      if (a.has_value()) out.push_back(std::move(*a));
    }
    return out;
  }

  // ---- studies
  absl::Status InsertStudy(const StudyRecord& s) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "INSERT INTO studies (study_id, name, project, created_unix_ms, cancelled, cancel_reason, "
        "finished_unix_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(s.study_id, s.name, s.project, s.created_unix_ms, s.cancelled,
                                        s.cancel_reason, s.finished_unix_ms));
    return st->Run();
  }

  absl::StatusOr<std::optional<StudyRecord>> GetStudy(const std::string& study_id) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st,
                             db_.Prepare(absl::StrCat("SELECT ", kStudyCols, " FROM studies WHERE study_id = ?1")));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(study_id));
    MEDPROF_ASSIGN_OR_RETURN(bool row, st->Step());
    if (!row) return std::optional<StudyRecord>();
    return std::optional<StudyRecord>(ReadStudy(*st));
  }

  absl::StatusOr<std::vector<StudyRecord>> ListStudies(int64_t before_seq, int limit) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(absl::StrCat(
        "SELECT ", kStudyCols, " FROM studies WHERE (?1 = 0 OR seq < ?1) ORDER BY seq DESC LIMIT ?2")));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(before_seq, limit));
    return Collect<StudyRecord>(*st, ReadStudy);
  }

  absl::Status UpdateStudy(const StudyRecord& s) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "UPDATE studies SET cancelled = ?2, cancel_reason = ?3, finished_unix_ms = ?4 WHERE study_id = ?1"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(s.study_id, s.cancelled, s.cancel_reason, s.finished_unix_ms));
    return st->Run();
  }

  // ---- jobs
  absl::Status InsertJob(const JobRecord& j) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(absl::StrCat(
        "INSERT INTO jobs (", kJobCols, ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)")));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(j.job_id, j.study_id, j.preset, j.target, j.repeat, JobStateName(j.state),
                                        j.attempts, j.max_attempts, j.timeout_s, j.error, j.config_json,
                                        j.current_run_id, j.progress_json, j.created_unix_ms, j.updated_unix_ms));
    return st->Run();
  }

  absl::StatusOr<std::optional<JobRecord>> GetJob(const std::string& job_id) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st,
                             db_.Prepare(absl::StrCat("SELECT ", kJobCols, " FROM jobs WHERE job_id = ?1")));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(job_id));
    MEDPROF_ASSIGN_OR_RETURN(bool row, st->Step());
    if (!row) return std::optional<JobRecord>();
    MEDPROF_ASSIGN_OR_RETURN(JobRecord j, ReadJob(*st));
    return std::optional<JobRecord>(std::move(j));
  }

  absl::StatusOr<std::vector<JobRecord>> ListJobs(const std::string& study_id) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(absl::StrCat(
        "SELECT ", kJobCols, " FROM jobs WHERE study_id = ?1 ORDER BY seq")));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(study_id));
    return Collect<JobRecord>(*st, ReadJob);
  }

  absl::StatusOr<std::vector<JobRecord>> ListQueuedJobs(int limit) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(absl::StrCat(
        "SELECT ", kJobCols, " FROM jobs WHERE state = 'queued' ORDER BY seq LIMIT ?1")));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(limit));
    return Collect<JobRecord>(*st, ReadJob);
  }

  absl::Status UpdateJob(const JobRecord& j) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "UPDATE jobs SET state = ?2, attempts = ?3, error = ?4, current_run_id = ?5, progress_json = ?6, "
        "updated_unix_ms = ?7 WHERE job_id = ?1"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(j.job_id, JobStateName(j.state), j.attempts, j.error, j.current_run_id,
                                        j.progress_json, j.updated_unix_ms));
    return st->Run();
  }

  absl::StatusOr<JobCounts> CountJobs(const std::string& study_id) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st,
                             db_.Prepare("SELECT state, COUNT(*) FROM jobs WHERE study_id = ?1 GROUP BY state"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(study_id));
    JobCounts c;
    while (true) {
      MEDPROF_ASSIGN_OR_RETURN(bool row, st->Step());
      if (!row) break;
      JobState s = JobState::kUnspecified;
      const std::string text = st->Text(0);
      if (!ParseJobState(text, &s)) return CorruptState("jobs", study_id, text);
      const int n = static_cast<int>(st->Int(1));
      c.total += n;
      switch (s) {
        case JobState::kQueued: c.queued += n; break;
        case JobState::kRunning: c.running += n; break;
        case JobState::kSucceeded: c.succeeded += n; break;
        case JobState::kFailed: c.failed += n; break;
        case JobState::kCancelled: c.cancelled += n; break;
        case JobState::kUnspecified: break;
      }
    }
    return c;
  }

  // ---- runs
  absl::Status InsertRun(const RunRecord& r) override {
    // Only the columns of schema version 1: the result columns are written by UpdateRunResults.
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "INSERT INTO runs (run_id, job_id, study_id, agent_id, attempt, device_index, state, "
        "lease_expires_unix_ms, started_unix_ms, finished_unix_ms, error, stderr_tail, exit_code) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(r.run_id, r.job_id, r.study_id, r.agent_id, r.attempt, r.device_index,
                                        RunStateName(r.state), r.lease_expires_unix_ms, r.started_unix_ms,
                                        r.finished_unix_ms, r.error, r.stderr_tail, r.exit_code));
    return st->Run();
  }

  absl::StatusOr<std::optional<RunRecord>> GetRun(const std::string& run_id) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st,
                             db_.Prepare(absl::StrCat("SELECT ", kRunCols, " FROM runs WHERE run_id = ?1")));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id));
    MEDPROF_ASSIGN_OR_RETURN(bool row, st->Step());
    if (!row) return std::optional<RunRecord>();
    MEDPROF_ASSIGN_OR_RETURN(RunRecord r, ReadRun(*st));
    return std::optional<RunRecord>(std::move(r));
  }

  absl::StatusOr<std::vector<RunRecord>> ListRuns(const RunFilter& f) override {
    // One statement text per combination of filters, so each is cached and can use its index.
    std::vector<std::string> where;
    if (!f.study_id.empty()) where.push_back("study_id = ?1");
    if (!f.job_id.empty()) where.push_back("job_id = ?2");
    if (!f.agent_id.empty()) where.push_back("agent_id = ?3");
    if (f.state != RunState::kUnspecified) where.push_back("state = ?4");
    const std::string sql =
        absl::StrCat("SELECT ", kRunCols, " FROM runs", where.empty() ? "" : " WHERE ",
                     absl::StrJoin(where, " AND "), " ORDER BY seq DESC LIMIT ?5");
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(sql));
    if (!f.study_id.empty()) MEDPROF_RETURN_IF_ERROR(st->Bind(1, f.study_id));
    if (!f.job_id.empty()) MEDPROF_RETURN_IF_ERROR(st->Bind(2, f.job_id));
    if (!f.agent_id.empty()) MEDPROF_RETURN_IF_ERROR(st->Bind(3, f.agent_id));
    if (f.state != RunState::kUnspecified) MEDPROF_RETURN_IF_ERROR(st->Bind(4, RunStateName(f.state)));
    MEDPROF_RETURN_IF_ERROR(st->Bind(5, f.limit));
    return Collect<RunRecord>(*st, ReadRun);
  }

  absl::StatusOr<std::vector<RunRecord>> ListExpiredRuns(int64_t now_unix_ms) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(absl::StrCat(
        "SELECT ", kRunCols, " FROM runs WHERE state = 'running' AND lease_expires_unix_ms <= ?1 ORDER BY seq")));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(now_unix_ms));
    return Collect<RunRecord>(*st, ReadRun);
  }

  absl::Status ExtendLease(const std::string& run_id, int64_t lease_expires_unix_ms) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st,
                             db_.Prepare("UPDATE runs SET lease_expires_unix_ms = ?2 WHERE run_id = ?1"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id, lease_expires_unix_ms));
    return st->Run();
  }

  absl::Status UpdateRunState(const RunRecord& r) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "UPDATE runs SET state = ?2, error = ?3, stderr_tail = ?4, exit_code = ?5, finished_unix_ms = ?6 "
        "WHERE run_id = ?1"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(r.run_id, RunStateName(r.state), r.error, r.stderr_tail, r.exit_code,
                                        r.finished_unix_ms));
    return st->Run();
  }

  absl::Status UpdateRunResults(const RunRecord& r) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "UPDATE runs SET error_kind = ?2, effective_json = ?3, environment_json = ?4, summary_json = ?5, "
        "gpu_name = ?6, backend = ?7, parameters = ?8, worker_started_unix_ms = ?9, kernels_dropped = ?10, "
        "chunks_through = ?11, result_bytes = ?12 WHERE run_id = ?1"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(r.run_id, r.error_kind, r.effective_json, r.environment_json,
                                        r.summary_json, r.gpu_name, r.backend, r.parameters,
                                        r.worker_started_unix_ms, r.kernels_dropped, r.chunks_through,
                                        r.result_bytes));
    return st->Run();
  }

  // ---- chunks
  absl::StatusOr<bool> InsertChunk(const std::string& run_id, uint64_t seq, std::string_view kind,
                                   int64_t unix_ms) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "INSERT OR IGNORE INTO run_chunks (run_id, seq, kind, received_unix_ms) VALUES (?1, ?2, ?3, ?4)"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id, seq, kind, unix_ms));
    MEDPROF_RETURN_IF_ERROR(st->Run());
    return db_.Changes() == 1;
  }

  absl::StatusOr<bool> HasChunk(const std::string& run_id, uint64_t seq) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st,
                             db_.Prepare("SELECT 1 FROM run_chunks WHERE run_id = ?1 AND seq = ?2"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id, seq));
    return st->Step();
  }

  absl::StatusOr<std::vector<uint64_t>> ListChunkSeqs(const std::string& run_id, uint64_t after,
                                                      int limit) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "SELECT seq FROM run_chunks WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id, after, limit));
    return Collect<uint64_t>(*st, [](const Statement& s) { return static_cast<uint64_t>(s.Int(0)); });
  }

  // ---- results
  absl::Status InsertSteps(const std::string& run_id, const std::vector<StepRow>& rows) override {
    for (const StepRow& r : rows) {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
          "INSERT INTO run_steps (run_id, phase, step, wall_ns, device_ns, loss, phase_ns_json) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
      MEDPROF_RETURN_IF_ERROR(
          st->BindAll(run_id, r.phase, r.step, r.wall_ns, r.device_ns, r.loss, PhaseNsJson(r.phase_ns)));
      MEDPROF_RETURN_IF_ERROR(st->Run());
    }
    return absl::OkStatus();
  }

  absl::Status InsertOps(const std::string& run_id, const std::vector<OpRow>& rows) override {
    for (const OpRow& r : rows) {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
          "INSERT INTO run_ops (run_id, name, phase, category, count, total_ns, self_ns) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
      MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id, r.name, r.phase, r.category, r.count, r.total_ns, r.self_ns));
      MEDPROF_RETURN_IF_ERROR(st->Run());
    }
    return absl::OkStatus();
  }

  absl::Status InsertKernels(const std::string& run_id, const std::vector<KernelRow>& rows) override {
    for (const KernelRow& r : rows) {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
          "INSERT INTO run_kernels (run_id, name, op, phase, category, count, total_ns, min_ns, max_ns, grid, "
          "block, registers, shared_bytes, theoretical_occupancy) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"));
      MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id, r.name, r.op, r.phase, r.category, r.count, r.total_ns,
                                          r.min_ns, r.max_ns, JoinInts(r.grid), JoinInts(r.block), r.registers,
                                          r.shared_bytes, r.theoretical_occupancy));
      MEDPROF_RETURN_IF_ERROR(st->Run());
    }
    return absl::OkStatus();
  }

  absl::Status InsertMetrics(const std::string& run_id, const std::vector<MetricRow>& rows) override {
    for (const MetricRow& r : rows) {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
          "INSERT INTO run_metrics (run_id, scope, name, value, unit) VALUES (?1, ?2, ?3, ?4, ?5)"));
      MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id, r.scope, r.name, r.value, r.unit));
      MEDPROF_RETURN_IF_ERROR(st->Run());
    }
    return absl::OkStatus();
  }

  absl::Status InsertSignatures(const std::string& run_id, const std::vector<SignatureRow>& rows) override {
    for (const SignatureRow& r : rows) {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
          "INSERT INTO run_kernel_signatures (run_id, id, kernel, op, phase, shapes, grid, block, "
          "dynamic_shared_bytes, count, total_ns, min_ns, max_ns, steps) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"));
      MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id, r.id, r.kernel, r.op, r.phase, r.shapes, JoinInts(r.grid),
                                          JoinInts(r.block), r.dynamic_shared_bytes, r.count, r.total_ns, r.min_ns,
                                          r.max_ns, r.steps));
      MEDPROF_RETURN_IF_ERROR(st->Run());
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<SignatureRow>> ListSignatures(const std::string& run_id) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "SELECT id, kernel, op, phase, shapes, grid, block, dynamic_shared_bytes, count, total_ns, min_ns, max_ns, "
        "steps FROM run_kernel_signatures WHERE run_id = ?1 ORDER BY total_ns DESC, rowid"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id));
    return Collect<SignatureRow>(*st, [](const Statement& s) {
      SignatureRow r;
      r.id = s.Text(0);
      r.kernel = s.Text(1);
      r.op = s.Text(2);
      r.phase = s.Text(3);
      r.shapes = s.Text(4);
      r.grid = SplitInts(s.Text(5));
      r.block = SplitInts(s.Text(6));
      r.dynamic_shared_bytes = s.Int(7);
      r.count = s.Int(8);
      r.total_ns = s.Int(9);
      r.min_ns = s.Int(10);
      r.max_ns = s.Int(11);
      r.steps = s.Int(12);
      return r;
    });
  }

  absl::StatusOr<std::vector<StepRow>> ListSteps(const std::string& run_id) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "SELECT phase, step, wall_ns, device_ns, loss, phase_ns_json FROM run_steps WHERE run_id = ?1 "
        "ORDER BY phase, step, rowid"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id));
    return Collect<StepRow>(*st, [](const Statement& s) {
      StepRow r;
      r.phase = static_cast<int>(s.Int(0));
      r.step = static_cast<int>(s.Int(1));
      r.wall_ns = s.Int(2);
      r.device_ns = s.Int(3);
      r.loss = s.Double(4);
      r.phase_ns = ParsePhaseNs(s.Text(5));
      return r;
    });
  }

  absl::StatusOr<std::vector<OpRow>> ListOps(const std::string& run_id) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "SELECT name, phase, category, count, total_ns, self_ns FROM run_ops WHERE run_id = ?1 ORDER BY rowid"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id));
    return Collect<OpRow>(*st, [](const Statement& s) {
      return OpRow{s.Text(0), s.Text(1), s.Text(2), s.Int(3), s.Int(4), s.Int(5)};
    });
  }

  absl::StatusOr<std::vector<KernelRow>> ListKernels(const std::string& run_id) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "SELECT name, op, phase, category, count, total_ns, min_ns, max_ns, grid, block, registers, shared_bytes, "
        "theoretical_occupancy FROM run_kernels WHERE run_id = ?1 ORDER BY rowid"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id));
    return Collect<KernelRow>(*st, [](const Statement& s) {
      KernelRow r;
      r.name = s.Text(0);
      r.op = s.Text(1);
      r.phase = s.Text(2);
      r.category = s.Text(3);
      r.count = s.Int(4);
      r.total_ns = s.Int(5);
      r.min_ns = s.Int(6);
      r.max_ns = s.Int(7);
      r.grid = SplitInts(s.Text(8));
      r.block = SplitInts(s.Text(9));
      r.registers = static_cast<int>(s.Int(10));
      r.shared_bytes = static_cast<int>(s.Int(11));
      r.theoretical_occupancy = s.Double(12);
      return r;
    });
  }

  absl::StatusOr<std::vector<KernelRow>> ListKernelTimes(const std::string& run_id) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "SELECT name, op, phase, category, count, total_ns FROM run_kernels WHERE run_id = ?1 ORDER BY rowid"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id));
    return Collect<KernelRow>(*st, [](const Statement& s) {
      KernelRow r;
      r.name = s.Text(0);
      r.op = s.Text(1);
      r.phase = s.Text(2);
      r.category = s.Text(3);
      r.count = s.Int(4);
      r.total_ns = s.Int(5);
      return r;
    });
  }

  absl::StatusOr<std::vector<MetricRow>> ListMetrics(const std::string& run_id) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "SELECT scope, name, value, unit FROM run_metrics WHERE run_id = ?1 ORDER BY rowid"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id));
    return Collect<MetricRow>(*st, [](const Statement& s) {
      return MetricRow{s.Text(0), s.Text(1), s.Double(2), s.Text(3)};
    });
  }

  // ---- findings and timelines
  absl::Status InsertFindings(const std::string& run_id, const std::vector<FindingRow>& rows) override {
    for (const FindingRow& r : rows) {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
          "INSERT INTO run_findings (run_id, kernel, op, phase, category, share, speedup, priority, rule, finding) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"));
      MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id, r.kernel, r.op, r.phase, r.category, r.share, r.speedup,
                                          r.priority, r.rule, r.finding));
      MEDPROF_RETURN_IF_ERROR(st->Run());
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<FindingRow>> ListFindings(const std::string& run_id) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "SELECT kernel, op, phase, category, share, speedup, priority, rule, finding FROM run_findings "
        "WHERE run_id = ?1 ORDER BY priority DESC, rowid"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id));
    return Collect<FindingRow>(*st, [](const Statement& s) {
      return FindingRow{s.Text(0), s.Text(1), s.Text(2), s.Text(3), s.Double(4),
                        s.Double(5), s.Double(6), s.Text(7), s.Text(8)};
    });
  }

  absl::Status AppendTimelinePart(const std::string& run_id, const TimelinePart& p) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "INSERT INTO run_timelines (run_id, kind, part, events, body_json) "
        "VALUES (?1, ?2, (SELECT COUNT(*) FROM run_timelines WHERE run_id = ?1 AND kind = ?2), ?3, ?4)"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id, p.kind, p.events, p.body_json));
    return st->Run();
  }

  absl::StatusOr<std::vector<TimelinePart>> ListTimelineParts(const std::string& run_id,
                                                              std::string_view kind) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "SELECT kind, part, events, body_json FROM run_timelines WHERE run_id = ?1 AND kind = ?2 ORDER BY part"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(run_id, kind));
    return Collect<TimelinePart>(*st, [](const Statement& s) {
      return TimelinePart{s.Text(0), static_cast<int>(s.Int(1)), s.Int(2), s.Text(3)};
    });
  }

  absl::StatusOr<std::map<std::string, int64_t>> CountJobsByState() override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare("SELECT state, COUNT(*) FROM jobs GROUP BY state"));
    std::map<std::string, int64_t> out;
    while (true) {
      MEDPROF_ASSIGN_OR_RETURN(bool row, st->Step());
      if (!row) return out;
      out[st->Text(0)] = st->Int(1);
    }
  }

  // ---- events
  absl::StatusOr<int64_t> AppendEvent(const EventRecord& e) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "INSERT INTO events (study_id, job_id, run_id, job_state, progress_json, message, unix_ms, study_finished) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"));
    const char* state = e.job_state == JobState::kUnspecified ? "" : JobStateName(e.job_state);
    MEDPROF_RETURN_IF_ERROR(st->BindAll(e.study_id, e.job_id, e.run_id, state, e.progress_json, e.message,
                                        e.unix_ms, e.study_finished));
    MEDPROF_RETURN_IF_ERROR(st->Run());
    return db_.LastInsertRowid();
  }

  absl::StatusOr<std::vector<EventRecord>> ListEvents(const std::string& study_id, int64_t after_event_id,
                                                      int limit) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(absl::StrCat(
        "SELECT ", kEventCols, " FROM events WHERE study_id = ?1 AND event_id > ?2 ORDER BY event_id LIMIT ?3")));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(study_id, after_event_id, limit));
    return Collect<EventRecord>(*st, ReadEvent);
  }

  // ---- bearer tokens
  absl::Status InsertToken(const TokenRecord& t) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "INSERT INTO tokens (token_id, salt, hash, role, project, agent_name, note, created_unix_ms, "
        "revoked_unix_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(t.token_id, t.salt, t.hash, t.role, t.project, t.agent_name, t.note,
                                        t.created_unix_ms, t.revoked_unix_ms));
    return st->Run();
  }

  absl::StatusOr<std::optional<TokenRecord>> GetToken(const std::string& token_id) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st,
                             db_.Prepare(absl::StrCat("SELECT ", kTokenCols, " FROM tokens WHERE token_id = ?1")));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(token_id));
    MEDPROF_ASSIGN_OR_RETURN(bool row, st->Step());
    if (!row) return std::optional<TokenRecord>();
    return std::optional<TokenRecord>(ReadToken(*st));
  }

  absl::StatusOr<std::vector<TokenRecord>> ListTokens() override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st,
                             db_.Prepare(absl::StrCat("SELECT ", kTokenCols, " FROM tokens ORDER BY seq")));
    return Collect<TokenRecord>(*st, ReadToken);
  }

  absl::StatusOr<bool> RevokeToken(const std::string& token_id, int64_t revoked_unix_ms) override {
    MEDPROF_ASSIGN_OR_RETURN(std::optional<TokenRecord> t, GetToken(token_id));
    if (!t.has_value()) return false;
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "UPDATE tokens SET revoked_unix_ms = ?2 WHERE token_id = ?1 AND revoked_unix_ms = 0"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(token_id, revoked_unix_ms));
    MEDPROF_RETURN_IF_ERROR(st->Run());
    return true;
  }

  absl::StatusOr<bool> InsertModel(const ModelRecord& m) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
        "INSERT OR IGNORE INTO models (project, sha256, file_name, size_bytes, uploader, created_unix_ms) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(m.project, m.sha256, m.file_name, m.size_bytes, m.uploader, m.created_unix_ms));
    MEDPROF_RETURN_IF_ERROR(st->Run());
    return db_.Changes() > 0;
  }

  absl::StatusOr<std::optional<ModelRecord>> GetModel(const std::string& project, const std::string& sha256) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(absl::StrCat(
        "SELECT ", kModelCols, " FROM models WHERE project = ?1 AND sha256 = ?2")));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(project, sha256));
    MEDPROF_ASSIGN_OR_RETURN(bool row, st->Step());
    if (!row) return std::optional<ModelRecord>();
    return std::optional<ModelRecord>(ReadModel(*st));
  }

  absl::StatusOr<std::vector<ModelRecord>> ListModels(const std::string& project) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(absl::StrCat(
        "SELECT ", kModelCols, " FROM models WHERE ?1 = '' OR project = ?1 ORDER BY created_unix_ms DESC, sha256")));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(project));
    return Collect<ModelRecord>(*st, ReadModel);
  }

  absl::StatusOr<int> DeleteModel(const std::string& project, const std::string& sha256) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st,
                             db_.Prepare("DELETE FROM models WHERE sha256 = ?2 AND (?1 = '' OR project = ?1)"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(project, sha256));
    MEDPROF_RETURN_IF_ERROR(st->Run());
    return db_.Changes();
  }

  absl::StatusOr<int> CountModelRows(const std::string& sha256) override {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare("SELECT COUNT(*) FROM models WHERE sha256 = ?1"));
    MEDPROF_RETURN_IF_ERROR(st->BindAll(sha256));
    MEDPROF_ASSIGN_OR_RETURN(bool row, st->Step());
    return row ? static_cast<int>(st->Int(0)) : 0;
  }

  absl::StatusOr<int64_t> CountRows(std::string_view table) override {
    const absl::string_view name(table.data(), table.size());
    if (std::find(kTables.begin(), kTables.end(), name) == kTables.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("table: unknown table '", name, "' (allowed: ", absl::StrJoin(kTables, ", "), ")"));
    }
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(absl::StrCat("SELECT COUNT(*) FROM ", name)));
    MEDPROF_ASSIGN_OR_RETURN(bool row, st->Step());
    return row ? st->Int(0) : 0;
  }

 private:
  absl::StatusOr<std::optional<AgentRecord>> LoadAgent(std::string_view where, const std::string& key) {
    AgentRecord a;
    {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(absl::StrCat(
          "SELECT agent_id, name, host, version, max_concurrent_jobs, draining, registered_unix_ms, "
          "last_seen_unix_ms FROM agents ", absl::string_view(where.data(), where.size()))));
      MEDPROF_RETURN_IF_ERROR(st->BindAll(key));
      MEDPROF_ASSIGN_OR_RETURN(bool row, st->Step());
      if (!row) return std::optional<AgentRecord>();
      a.agent_id = st->Text(0);
      a.name = st->Text(1);
      a.host = st->Text(2);
      a.version = st->Text(3);
      a.max_concurrent_jobs = static_cast<int>(st->Int(4));
      a.draining = st->Int(5) != 0;
      a.registered_unix_ms = st->Int(6);
      a.last_seen_unix_ms = st->Int(7);
    }
    {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db_.Prepare(
          "SELECT device_index, kind, name, uuid, compute_capability, memory_bytes, driver_version, "
          "cuda_driver_version, mig_enabled, ecc_enabled, counters_admin_only, sm_count FROM agent_devices "
          "WHERE agent_id = ?1 ORDER BY position"));
      MEDPROF_RETURN_IF_ERROR(st->BindAll(a.agent_id));
      MEDPROF_ASSIGN_OR_RETURN(a.devices, Collect<DeviceRecord>(*st, [](const Statement& s) {
        DeviceRecord d;
        d.index = static_cast<int>(s.Int(0));
        d.kind = s.Text(1);
        d.name = s.Text(2);
        d.uuid = s.Text(3);
        d.compute_capability = s.Text(4);
        d.memory_bytes = static_cast<uint64_t>(s.Int(5));
        d.driver_version = s.Text(6);
        d.cuda_driver_version = s.Text(7);
        d.mig_enabled = s.Int(8) != 0;
        d.ecc_enabled = s.Int(9) != 0;
        d.counters_admin_only = s.Int(10) != 0;
        d.sm_count = static_cast<int>(s.Int(11));
        return d;
      }));
    }
    {
      MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st,
                               db_.Prepare("SELECT key, value FROM agent_labels WHERE agent_id = ?1 ORDER BY key"));
      MEDPROF_RETURN_IF_ERROR(st->BindAll(a.agent_id));
      while (true) {
        MEDPROF_ASSIGN_OR_RETURN(bool row, st->Step());
        if (!row) break;
        a.labels.emplace(st->Text(0), st->Text(1));
      }
    }
    return std::optional<AgentRecord>(std::move(a));
  }

  Db& db_;
};

absl::StatusOr<std::string> PragmaText(Db& db, std::string_view pragma) {
  MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db.Prepare(pragma));
  MEDPROF_ASSIGN_OR_RETURN(bool row, st->Step());
  return row ? st->Text(0) : std::string();
}

// Start-up: the database file must be writable and its -wal and -shm files writable or
// creatable (a read-only file would open, then refuse every write). Checked on the file system
// first, for a message naming the file; then by a write transaction that is rolled back,
// which catches what access(2) cannot see (read-only mounts, a -wal that is a directory).
absl::Status CheckWritableFiles(const std::string& path) {
  const std::filesystem::path db = std::filesystem::absolute(path);
  const std::string dir = db.parent_path().string();
  for (const std::string& file : {db.string(), db.string() + "-wal", db.string() + "-shm"}) {
    struct stat st {};
    if (stat(file.c_str(), &st) != 0) {
      if (access(dir.c_str(), W_OK | X_OK) != 0) {
        return absl::FailedPreconditionError(absl::StrCat(file, " cannot be created: directory ", dir,
                                                          " is not writable (", std::strerror(errno), ")"));
      }
      continue;
    }
    if (!S_ISREG(st.st_mode)) return absl::FailedPreconditionError(absl::StrCat(file, " is not a regular file"));
    if (access(file.c_str(), R_OK | W_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(file, " is not writable (", std::strerror(errno), "); the server writes it"));
    }
  }
  return absl::OkStatus();
}

absl::Status ProbeWrite(Db& db) {
  if (sqlite3_db_readonly(db.handle(), "main") == 1) {
    return absl::FailedPreconditionError("SQLite opened the database read-only (file or file system read-only)");
  }
  MEDPROF_ASSIGN_OR_RETURN(std::string version, PragmaText(db, "PRAGMA user_version"));
  MEDPROF_RETURN_IF_ERROR(db.ExecScript("BEGIN IMMEDIATE"));
  absl::Status s = db.ExecScript(absl::StrCat("PRAGMA user_version = ", version.empty() ? "0" : version));
  (void)db.ExecScript("ROLLBACK");
  return Annotate(s, "a test write (rolled back) failed");
}

// Runs `fn` in one transaction on `db`: BEGIN IMMEDIATE for writes (the write lock up front),
// BEGIN DEFERRED for reads (a snapshot at the first read; writes refused). Commits when `fn`
// returns OK, rolls back otherwise.
absl::Status RunTransaction(Db& db, bool write, absl::FunctionRef<absl::Status(StoreTx&)> fn) {
  auto exec = [&](std::string_view sql) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(ScopedStatement st, db.Prepare(sql));
    return st->Run();
  };
  MEDPROF_RETURN_IF_ERROR(exec(write ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED"));
  db.write_allowed = write;
  SqliteTx tx(db);
  absl::Status s = fn(tx);
  db.write_allowed = true;
  if (s.ok()) s = exec("COMMIT");
  if (!s.ok()) {
    // The transaction may already be gone (SQLite rolls back by itself after some errors).
    if (sqlite3_get_autocommit(db.handle()) == 0) (void)exec("ROLLBACK");
  }
  return s;
}

// A reader connection: the same file, read-only by pragma, the same busy timeout.
absl::StatusOr<std::unique_ptr<Db>> OpenReader(const SqliteStoreOptions& options) {
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<Db> db, Db::Open(options.path));
  MEDPROF_SQLITE_CALL(db->handle(), sqlite3_busy_timeout(db->handle(), options.busy_timeout_ms));
  MEDPROF_RETURN_IF_ERROR(db->ExecScript("PRAGMA query_only = ON"));
  return db;
}

// Start-up errors ask the operator to fix something: FAILED_PRECONDITION, with the context.
absl::Status StartupError(const absl::Status& s, const std::string& context) {
  const absl::StatusCode code =
      s.code() == absl::StatusCode::kUnavailable ? absl::StatusCode::kFailedPrecondition : s.code();
  return absl::Status(code, absl::StrCat(context, ": ", s.message()));
}

}  // namespace

absl::StatusOr<Synchronous> ParseSynchronous(std::string_view text) {
  const std::string t = absl::AsciiStrToLower(absl::string_view(text.data(), text.size()));
  if (t == "normal") return Synchronous::kNormal;
  if (t == "full") return Synchronous::kFull;
  return absl::InvalidArgumentError(absl::StrCat("synchronous: '", t, "' is not a level (allowed normal|full)"));
}

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const SqliteStoreOptions& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("db path: required (a file, or :memory:)");
  if (options.max_readers < 1 || options.max_readers > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_readers: ", options.max_readers, " is out of range (allowed 1..64)"));
  }
  if (options.busy_timeout_ms < 0 || options.busy_timeout_ms > 600000) {
    return absl::InvalidArgumentError(
        absl::StrCat("busy_timeout_ms: ", options.busy_timeout_ms, " is out of range (allowed 0..600000)"));
  }
  const std::string context = absl::StrCat("opening database ", options.path);
  if (options.path != ":memory:") {
    if (absl::Status s = CheckWritableFiles(options.path); !s.ok()) return StartupError(s, context);
  }
  auto db_or = Db::Open(options.path);
  if (!db_or.ok()) return StartupError(db_or.status(), context);
  std::unique_ptr<Db> db = std::move(db_or).value();

  absl::Status s = [&]() -> absl::Status {
    MEDPROF_SQLITE_CALL(db->handle(), sqlite3_busy_timeout(db->handle(), options.busy_timeout_ms));
    MEDPROF_RETURN_IF_ERROR(db->ExecScript("PRAGMA foreign_keys = ON"));
    return db->ExecScript(options.synchronous == Synchronous::kFull ? "PRAGMA synchronous = FULL"
                                                                      : "PRAGMA synchronous = NORMAL");
  }();
  if (!s.ok()) return StartupError(s, context);
  auto mode = PragmaText(*db, "PRAGMA journal_mode = WAL");
  if (!mode.ok()) return StartupError(mode.status(), context);
  if (*mode == "wal") {
    // The checkpoint thread does it (see the header): no commit pays for a checkpoint.
    if (absl::Status c = db->ExecScript("PRAGMA wal_autocheckpoint = 0"); !c.ok()) return StartupError(c, context);
  }
  auto version = Migrate(*db, options.schema_version, Clock::Real()->NowUnixMs());
  if (!version.ok()) return StartupError(version.status(), context);
  if (absl::Status w = ProbeWrite(*db); !w.ok()) return StartupError(w, context);
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(db), *version, *mode, options));
}

SqliteStore::SqliteStore(std::unique_ptr<Db> db, int schema_version, std::string journal_mode,
                         SqliteStoreOptions options)
    : options_(std::move(options)),
      db_(std::move(db)),
      schema_version_(schema_version),
      journal_mode_(std::move(journal_mode)) {
  if (options_.path != ":memory:") checkpointer_ = std::thread([this] { CheckpointLoop(); });
}

SqliteStore::~SqliteStore() {
  {
    std::lock_guard<std::mutex> lock(checkpoint_mu_);
    stop_ = true;
  }
  checkpoint_cv_.notify_all();
  if (checkpointer_.joinable()) checkpointer_.join();
}

void SqliteStore::CheckpointLoop() {
  absl::StatusOr<std::unique_ptr<Db>> db = Db::Open(options_.path);
  if (!db.ok()) {
    kStoreLog.Error("checkpoint connection: {} (the WAL is checkpointed at close only)", db.status().ToString());
    return;
  }
  std::unique_lock<std::mutex> lock(checkpoint_mu_);
  while (!checkpoint_cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
    lock.unlock();
    // PASSIVE: copies what no reader still needs, never waits for readers or the writer.
    const int rc = sqlite3_wal_checkpoint_v2((*db)->handle(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
      kStoreLog.Warn("WAL checkpoint: {}", SqliteError((*db)->handle(), rc, "sqlite3_wal_checkpoint_v2").ToString());
    }
    lock.lock();
  }
}

absl::Status SqliteStore::Write(absl::FunctionRef<absl::Status(StoreTx&)> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  return RunTransaction(*db_, true, fn);
}

absl::Status SqliteStore::Read(absl::FunctionRef<absl::Status(StoreTx&)> fn) {
  if (options_.path == ":memory:") {
    std::lock_guard<std::mutex> lock(mu_);
    return RunTransaction(*db_, false, fn);
  }
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<Db> reader, TakeReader());
  absl::Status s = RunTransaction(*reader, false, fn);
  ReturnReader(std::move(reader));
  return s;
}

absl::StatusOr<std::unique_ptr<Db>> SqliteStore::TakeReader() {
  std::unique_lock<std::mutex> lock(pool_mu_);
  pool_cv_.wait(lock, [this] { return !idle_readers_.empty() || readers_open_ < options_.max_readers; });
  if (!idle_readers_.empty()) {
    std::unique_ptr<Db> reader = std::move(idle_readers_.back());
    idle_readers_.pop_back();
    return reader;
  }
  ++readers_open_;  // reserved before opening, so the pool never exceeds max_readers
  lock.unlock();
  absl::StatusOr<std::unique_ptr<Db>> reader = OpenReader(options_);
  if (!reader.ok()) {
    lock.lock();
    --readers_open_;
    pool_cv_.notify_one();
  }
  return reader;
}

void SqliteStore::ReturnReader(std::unique_ptr<Db> reader) {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (sqlite3_get_autocommit(reader->handle()) != 0) {
      idle_readers_.push_back(std::move(reader));
    } else {
      --readers_open_;  // left inside a transaction it could not end: closed, not reused
    }
  }
  pool_cv_.notify_one();
}

int SqliteStore::readers_opened() const {
  std::lock_guard<std::mutex> lock(pool_mu_);
  return readers_open_;
}

}  // namespace medprof::server
