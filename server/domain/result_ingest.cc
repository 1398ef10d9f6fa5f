#include "server/domain/result_ingest.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/kernel_taxonomy.h"
#include "common/status.h"
#include "server/domain/codec.h"
#include "server/domain/limits.h"
#include "server/domain/result_rows.h"

namespace medprof::server {
namespace {

constexpr size_t kMaxChunksPerWindow = 4096;

// A run touched by the window, with what the window changed.
struct TouchedRun {
  RunRecord run;
  bool results_dirty = false;
  bool error_dirty = false;
};

std::string Category(const std::string& stored, taxonomy::Category computed) {
  return stored.empty() ? std::string(taxonomy::CategoryName(computed)) : stored;
}

std::vector<SignatureRow> SignatureRows(const v1::KernelSignatures& m) {
  std::vector<SignatureRow> rows;
  rows.reserve(m.signatures_size());
  for (const v1::KernelSignature& k : m.signatures()) rows.push_back(SignatureRowOf(k, m.steps()));
  return rows;
}

StepRow StepRowOf(const v1::StepTiming& s) {
  StepRow row{.phase = static_cast<int>(s.phase()), .step = s.step(), .wall_ns = s.wall_ns(),
              .device_ns = s.device_ns(), .loss = s.loss()};
  for (const auto& [k, v] : s.phase_ns()) row.phase_ns.emplace_back(k, v);
  std::sort(row.phase_ns.begin(), row.phase_ns.end());
  return row;
}

std::vector<OpRow> OpRows(const v1::OpAggregates& m) {
  std::vector<OpRow> rows;
  for (const v1::OpStat& o : m.ops()) {
    rows.push_back(OpRow{o.name(), o.phase(), Category(o.category(), taxonomy::ClassifyOp(o.name())), o.count(),
                         o.total_ns(), o.self_ns()});
  }
  return rows;
}

std::vector<KernelRow> KernelRows(const v1::KernelAggregates& m) {
  std::vector<KernelRow> rows;
  for (const v1::KernelStat& k : m.kernels()) rows.push_back(KernelRowOf(k));
  return rows;
}

std::vector<MetricRow> MetricRows(const v1::MetricValues& m) {
  std::vector<MetricRow> rows;
  for (const v1::MetricValue& v : m.values()) rows.push_back(MetricRow{v.scope(), v.name(), v.value(), v.unit()});
  return rows;
}

std::vector<FindingRow> FindingRows(const v1::KernelFindings& m) {
  std::vector<FindingRow> rows;
  for (const v1::KernelFinding& f : m.findings()) {
    rows.push_back(FindingRow{f.kernel(), f.op(), f.phase(),
                              Category(f.category(), taxonomy::ClassifyKernel(f.kernel(), f.op())), f.share(),
                              f.speedup(), f.priority(), f.rule(), f.finding()});
  }
  return rows;
}

void ApplyStarted(const v1::RunStarted& s, RunRecord* run) {
  run->effective_json = ToJson(s.effective());
  run->environment_json = ToJson(s.environment());
  run->gpu_name = s.environment().gpu_name();
  if (run->gpu_name.empty() && s.backend() == "cpu") run->gpu_name = "cpu";
  run->backend = s.backend();
  run->parameters = s.parameters();
  run->worker_started_unix_ms = s.started_unix_ms();
}

void ApplyError(const v1::WorkerError& e, RunRecord* run) {
  run->error_kind = e.kind();
  run->error = e.kind().empty() ? e.message() : absl::StrCat(e.kind(), ": ", e.message());
}

// The checks of a window that need no store: its size and each chunk's fields.
absl::Status CheckWindow(const std::vector<ResultChunk>& chunks) {
  if (chunks.size() > kMaxChunksPerWindow) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunks: ", chunks.size(), " in one window (allowed at most ", kMaxChunksPerWindow, ")"));
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    const ResultChunk& c = chunks[i];
    const std::string where = absl::StrCat("chunk ", i, " (run '", c.run_id.substr(0, 64), "', seq ", c.seq, ")");
    if (c.run_id.empty() || c.run_id.size() > 64) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": run_id: required, at most 64 characters"));
    }
    if (c.agent_id.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": agent_id: required"));
    if (c.seq == 0) return absl::InvalidArgumentError(absl::StrCat(where, ": seq: 0 (seqs start at 1)"));
    if (c.message.body_case() == v1::WorkerMessage::BODY_NOT_SET) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": message: empty (expected one of started, progress, step, ops, kernels, metrics, summary, error, "
                 "findings, timeline, utilization, signatures)"));
    }
  }
  return absl::OkStatus();
}

// One window inside its transaction: admits each chunk, stores its record by type, then
// writes back the runs it touched. Lives for one attempt of the transaction, on its thread.
class WindowWriter {
 public:
  WindowWriter(StoreTx& tx, const DomainOptions& options, int64_t now) : tx_(tx), options_(options), now_(now) {}

  absl::Status Add(const ResultChunk& c);
  // Writes back every touched run and returns, per run, its contiguous stored prefix.
  absl::StatusOr<CommittedThrough> Commit();

  int64_t rows() const { return rows_; }
  bool progressed() const { return progressed_; }

 private:
  absl::StatusOr<TouchedRun*> Touch(const ResultChunk& c);
  absl::Status CheckAdmitted(const TouchedRun& rs, const ResultChunk& c) const;
  absl::Status Store(TouchedRun& rs, const v1::WorkerMessage& m);
  absl::Status StoreProgress(const RunRecord& run, const v1::Progress& progress);
  absl::Status AdvancePrefix(TouchedRun& rs);

  StoreTx& tx_;
  const DomainOptions& options_;
  const int64_t now_;
  std::map<std::string, TouchedRun> runs_;
  int64_t rows_ = 0;         // result rows stored by this window (Prometheus)
  bool progressed_ = false;  // a job's progress changed: wake the event waiters
};

// The run of `c`, read once per window; the uploading agent must hold its lease.
absl::StatusOr<TouchedRun*> WindowWriter::Touch(const ResultChunk& c) {
  auto it = runs_.find(c.run_id);
  if (it == runs_.end()) {
    MEDPROF_ASSIGN_OR_RETURN(std::optional<RunRecord> run, tx_.GetRun(c.run_id));
    if (!run.has_value()) return absl::NotFoundError(absl::StrCat("run_id: no run '", c.run_id, "'"));
    it = runs_.emplace(c.run_id, TouchedRun{*std::move(run)}).first;
  }
  const RunRecord& run = it->second.run;
  if (run.agent_id != c.agent_id) {
    return absl::PermissionDeniedError(absl::StrCat("run ", run.run_id, " was leased to agent ", run.agent_id,
                                                    "; agent ", c.agent_id, " may not upload its results"));
  }
  return &it->second;
}

// A new chunk is accepted only while its run is running.
absl::Status WindowWriter::CheckAdmitted(const TouchedRun& rs, const ResultChunk& c) const {
  const RunRecord& run = rs.run;
  if (run.state == RunState::kRunning) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "run ", run.run_id, " is ", RunStateName(run.state), ": seq ", c.seq,
      " was never stored and results are accepted only while the run is running",
      run.error.empty() ? "" : absl::StrCat(" (", run.error, ")")));
}

absl::Status WindowWriter::Add(const ResultChunk& c) {
  MEDPROF_ASSIGN_OR_RETURN(TouchedRun * rs, Touch(c));
  RunRecord& run = rs->run;
  MEDPROF_ASSIGN_OR_RETURN(bool is_new, tx_.InsertChunk(run.run_id, c.seq, ChunkKind(c.message), now_));
  if (!is_new) return absl::OkStatus();  // stored before: acknowledged again by Commit
  MEDPROF_RETURN_IF_ERROR(CheckAdmitted(*rs, c));
  run.result_bytes += static_cast<int64_t>(c.message.ByteSizeLong());
  rs->results_dirty = true;
  if (run.result_bytes > options_.max_result_bytes_per_run) {
    // The whole window rolls back; the agent stops the run on RESOURCE_EXHAUSTED.
    return limits::LimitExceeded("result_bytes_per_run",
                                 absl::StrCat("run ", run.run_id, " would hold ", run.result_bytes,
                                              " bytes of results with seq ", c.seq),
                                 options_.max_result_bytes_per_run);
  }
  return Store(*rs, c.message);
}

absl::Status WindowWriter::StoreProgress(const RunRecord& run, const v1::Progress& progress) {
  MEDPROF_ASSIGN_OR_RETURN(std::optional<JobRecord> job, tx_.GetJob(run.job_id));
  if (job.has_value() && job->state == JobState::kRunning && job->current_run_id == run.run_id) {
    MEDPROF_RETURN_IF_ERROR(RecordProgress(tx_, now_, *job, run.run_id, progress));
    progressed_ = true;
  }
  return absl::OkStatus();
}

// Stores one new record by its type (see result_ingest.h).
absl::Status WindowWriter::Store(TouchedRun& rs, const v1::WorkerMessage& m) {
  RunRecord& run = rs.run;
  // Stores `rows` with `insert` and counts them.
  const auto insert = [&](auto rows, auto insert_fn) -> absl::Status {
    MEDPROF_RETURN_IF_ERROR((tx_.*insert_fn)(run.run_id, rows));
    rows_ += static_cast<int64_t>(rows.size());
    return absl::OkStatus();
  };
  switch (m.body_case()) {
    case v1::WorkerMessage::kStarted:
      ApplyStarted(m.started(), &run);
      return absl::OkStatus();
    case v1::WorkerMessage::kStep:
      return insert(std::vector<StepRow>{StepRowOf(m.step())}, &StoreTx::InsertSteps);
    case v1::WorkerMessage::kOps:
      return insert(OpRows(m.ops()), &StoreTx::InsertOps);
    case v1::WorkerMessage::kKernels:
      run.kernels_dropped += m.kernels().dropped_records();
      return insert(KernelRows(m.kernels()), &StoreTx::InsertKernels);
    case v1::WorkerMessage::kMetrics:
      return insert(MetricRows(m.metrics()), &StoreTx::InsertMetrics);
    case v1::WorkerMessage::kProgress:
      return StoreProgress(run, m.progress());
    case v1::WorkerMessage::kSummary:
      run.summary_json = ToJson(m.summary());
      return absl::OkStatus();
    case v1::WorkerMessage::kError:
      ApplyError(m.error(), &run);
      rs.error_dirty = true;
      return absl::OkStatus();
    case v1::WorkerMessage::kFindings:
      return insert(FindingRows(m.findings()), &StoreTx::InsertFindings);
    case v1::WorkerMessage::kTimeline:
      // Kept whole (as the worker bounded it) for `medprof export --format chrome-trace`.
      ++rows_;
      return tx_.AppendTimelinePart(
          run.run_id, TimelinePart{"timeline", 0, m.timeline().events_size(), ToJson(m.timeline())});
    case v1::WorkerMessage::kUtilization:
      ++rows_;
      return tx_.AppendTimelinePart(
          run.run_id, TimelinePart{"utilization", 0, m.utilization().samples_size(), ToJson(m.utilization())});
    case v1::WorkerMessage::kSignatures:
      return insert(SignatureRows(m.signatures()), &StoreTx::InsertSignatures);
    case v1::WorkerMessage::BODY_NOT_SET:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

// Advances the run's contiguous prefix over what is stored now.
absl::Status WindowWriter::AdvancePrefix(TouchedRun& rs) {
  RunRecord& run = rs.run;
  MEDPROF_ASSIGN_OR_RETURN(std::vector<uint64_t> seqs, tx_.ListChunkSeqs(run.run_id, run.chunks_through, 100000));
  uint64_t through = run.chunks_through;
  for (uint64_t s : seqs) {
    if (s != through + 1) break;
    through = s;
  }
  if (through != run.chunks_through) {
    run.chunks_through = through;
    rs.results_dirty = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<CommittedThrough> WindowWriter::Commit() {
  CommittedThrough out;
  for (auto& [run_id, rs] : runs_) {
    MEDPROF_RETURN_IF_ERROR(AdvancePrefix(rs));
    if (rs.results_dirty) MEDPROF_RETURN_IF_ERROR(tx_.UpdateRunResults(rs.run));
    if (rs.error_dirty) MEDPROF_RETURN_IF_ERROR(tx_.UpdateRunState(rs.run));
    out[run_id] = rs.run.chunks_through;
  }
  return out;
}

}  // namespace

const char* ChunkKind(const v1::WorkerMessage& m) {
  switch (m.body_case()) {
    case v1::WorkerMessage::kStarted: return "started";
    case v1::WorkerMessage::kProgress: return "progress";
    case v1::WorkerMessage::kStep: return "step";
    case v1::WorkerMessage::kOps: return "ops";
    case v1::WorkerMessage::kKernels: return "kernels";
    case v1::WorkerMessage::kMetrics: return "metrics";
    case v1::WorkerMessage::kSummary: return "summary";
    case v1::WorkerMessage::kError: return "error";
    case v1::WorkerMessage::kFindings: return "findings";
    case v1::WorkerMessage::kTimeline: return "timeline";
    case v1::WorkerMessage::kUtilization: return "utilization";
    case v1::WorkerMessage::kSignatures: return "signatures";
    case v1::WorkerMessage::BODY_NOT_SET: return "";
  }
  return "";
}

absl::StatusOr<CommittedThrough> ResultIngestor::Ingest(const CallContext&, const std::vector<ResultChunk>& chunks) {
  MEDPROF_RETURN_IF_ERROR(CheckWindow(chunks));
  const int64_t now = core_.clock.NowUnixMs();
  CommittedThrough out;
  bool progressed = false;
  int64_t rows = 0;
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    WindowWriter window(tx, core_.options, now);  // afresh on each attempt of the transaction
    for (const ResultChunk& c : chunks) MEDPROF_RETURN_IF_ERROR(window.Add(c));
    MEDPROF_ASSIGN_OR_RETURN(out, window.Commit());
    progressed = window.progressed();
    rows = window.rows();
    return absl::OkStatus();
  }));
  if (progressed) core_.events.Notify();
  if (MetricsSink* sink = core_.metrics.load(); sink != nullptr && rows > 0) sink->RowsIngested(rows);
  return out;
}

absl::Status UploadWindow::Add(ResultChunk chunk, size_t wire_bytes) {
  window_bytes_ += wire_bytes;
  window_.push_back(std::move(chunk));
  if (window_.size() < limits::kUploadWindowChunks && window_bytes_ < limits::kUploadWindowBytes) {
    return absl::OkStatus();
  }
  return Flush();
}

absl::Status UploadWindow::Flush() {
  if (window_.empty()) return absl::OkStatus();
  absl::StatusOr<CommittedThrough> done = ingestor_.Ingest(call_, window_);
  window_.clear();
  window_bytes_ = 0;
  if (!done.ok()) return done.status();
  for (const auto& [run_id, seq] : *done) acked_[run_id] = std::max(acked_[run_id], seq);
  return absl::OkStatus();
}

absl::StatusOr<CommittedThrough> UploadWindow::Finish() {
  MEDPROF_RETURN_IF_ERROR(Flush());
  return acked_;
}

}  // namespace medprof::server
