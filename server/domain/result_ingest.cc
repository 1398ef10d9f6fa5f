#include "server/domain/result_ingest.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/kernel_taxonomy.h"
#include "common/status.h"
#include "server/domain/codec.h"
#include "server/domain/limits.h"

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
  for (const v1::KernelSignature& k : m.signatures()) {
    rows.push_back(SignatureRow{k.id(), k.kernel(), k.op(), k.phase(), k.shapes(),
                                std::vector<int>(k.grid().begin(), k.grid().end()),
                                std::vector<int>(k.block().begin(), k.block().end()), k.dynamic_shared_bytes(),
                                k.count(), k.total_ns(), k.min_ns(), k.max_ns(), m.steps()});
  }
  return rows;
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

  const int64_t now = core_.clock.NowUnixMs();
  CommittedThrough out;
  bool progressed = false;
  int64_t rows = 0;  // result rows stored by this window (Prometheus)
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    out.clear();
    progressed = false;
    rows = 0;
    std::map<std::string, TouchedRun> runs;
    for (const ResultChunk& c : chunks) {
      auto it = runs.find(c.run_id);
      if (it == runs.end()) {
        MEDPROF_ASSIGN_OR_RETURN(std::optional<RunRecord> run, tx.GetRun(c.run_id));
        if (!run.has_value()) return absl::NotFoundError(absl::StrCat("run_id: no run '", c.run_id, "'"));
        it = runs.emplace(c.run_id, TouchedRun{*std::move(run)}).first;
      }
      TouchedRun& rs = it->second;
      RunRecord& run = rs.run;
      if (run.agent_id != c.agent_id) {
        return absl::PermissionDeniedError(absl::StrCat("run ", run.run_id, " was leased to agent ", run.agent_id,
                                                        "; agent ", c.agent_id, " may not upload its results"));
      }
      MEDPROF_ASSIGN_OR_RETURN(bool is_new, tx.InsertChunk(run.run_id, c.seq, ChunkKind(c.message), now));
      if (!is_new) continue;  // stored before: acknowledged again below
      if (run.state != RunState::kRunning) {
        return absl::FailedPreconditionError(absl::StrCat(
            "run ", run.run_id, " is ", RunStateName(run.state), ": seq ", c.seq,
            " was never stored and results are accepted only while the run is running",
            run.error.empty() ? "" : absl::StrCat(" (", run.error, ")")));
      }

      const v1::WorkerMessage& m = c.message;
      run.result_bytes += static_cast<int64_t>(m.ByteSizeLong());
      rs.results_dirty = true;
      if (run.result_bytes > core_.options.max_result_bytes_per_run) {
        // The whole window rolls back; the agent stops the run on RESOURCE_EXHAUSTED.
        return limits::LimitExceeded("result_bytes_per_run",
                                     absl::StrCat("run ", run.run_id, " would hold ", run.result_bytes,
                                                  " bytes of results with seq ", c.seq),
                                     core_.options.max_result_bytes_per_run);
      }
      switch (m.body_case()) {
        case v1::WorkerMessage::kStarted: {
          const v1::RunStarted& s = m.started();
          run.effective_json = ToJson(s.effective());
          run.environment_json = ToJson(s.environment());
          run.gpu_name = s.environment().gpu_name();
          if (run.gpu_name.empty() && s.backend() == "cpu") run.gpu_name = "cpu";
          run.backend = s.backend();
          run.parameters = s.parameters();
          run.worker_started_unix_ms = s.started_unix_ms();
          rs.results_dirty = true;
          break;
        }
        case v1::WorkerMessage::kStep: {
          const v1::StepTiming& s = m.step();
          StepRow row{.phase = static_cast<int>(s.phase()), .step = s.step(), .wall_ns = s.wall_ns(),
                      .device_ns = s.device_ns(), .loss = s.loss()};
          for (const auto& [k, v] : s.phase_ns()) row.phase_ns.emplace_back(k, v);
          std::sort(row.phase_ns.begin(), row.phase_ns.end());
          MEDPROF_RETURN_IF_ERROR(tx.InsertSteps(run.run_id, {row}));
          ++rows;
          break;
        }
        case v1::WorkerMessage::kOps: {
          std::vector<OpRow> op_rows;
          for (const v1::OpStat& o : m.ops().ops()) {
            op_rows.push_back(OpRow{o.name(), o.phase(), Category(o.category(), taxonomy::ClassifyOp(o.name())),
                                 o.count(), o.total_ns(), o.self_ns()});
          }
          MEDPROF_RETURN_IF_ERROR(tx.InsertOps(run.run_id, op_rows));
          rows += static_cast<int64_t>(op_rows.size());
          break;
        }
        case v1::WorkerMessage::kKernels: {
          std::vector<KernelRow> kernel_rows;
          for (const v1::KernelStat& k : m.kernels().kernels()) {
            KernelRow r;
            r.name = k.name();
            r.op = k.op();
            r.phase = k.phase();
            r.category = Category(k.category(), taxonomy::ClassifyKernel(k.name(), k.op()));
            r.count = k.count();
            r.total_ns = k.total_ns();
            r.min_ns = k.min_ns();
            r.max_ns = k.max_ns();
            r.grid.assign(k.grid().begin(), k.grid().end());
            r.block.assign(k.block().begin(), k.block().end());
            r.registers = k.registers();
            r.shared_bytes = k.shared_bytes();
            r.theoretical_occupancy = k.theoretical_occupancy();
            kernel_rows.push_back(std::move(r));
          }
          MEDPROF_RETURN_IF_ERROR(tx.InsertKernels(run.run_id, kernel_rows));
          rows += static_cast<int64_t>(kernel_rows.size());
          run.kernels_dropped += m.kernels().dropped_records();
          rs.results_dirty = true;
          break;
        }
        case v1::WorkerMessage::kMetrics: {
          std::vector<MetricRow> metric_rows;
          for (const v1::MetricValue& v : m.metrics().values()) {
            metric_rows.push_back(MetricRow{v.scope(), v.name(), v.value(), v.unit()});
          }
          MEDPROF_RETURN_IF_ERROR(tx.InsertMetrics(run.run_id, metric_rows));
          rows += static_cast<int64_t>(metric_rows.size());
          break;
        }
        case v1::WorkerMessage::kProgress: {
          MEDPROF_ASSIGN_OR_RETURN(std::optional<JobRecord> job, tx.GetJob(run.job_id));
          if (job.has_value() && job->state == JobState::kRunning && job->current_run_id == run.run_id) {
            MEDPROF_RETURN_IF_ERROR(RecordProgress(tx, now, *job, run.run_id, m.progress()));
            progressed = true;
          }
          break;
        }
        case v1::WorkerMessage::kSummary:
          run.summary_json = ToJson(m.summary());
          rs.results_dirty = true;
          break;
        case v1::WorkerMessage::kError:
          run.error_kind = m.error().kind();
          run.error = m.error().kind().empty() ? m.error().message()
                                               : absl::StrCat(m.error().kind(), ": ", m.error().message());
          rs.results_dirty = true;
          rs.error_dirty = true;
          break;
        case v1::WorkerMessage::kFindings: {
          std::vector<FindingRow> finding_rows;
          for (const v1::KernelFinding& f : m.findings().findings()) {
            finding_rows.push_back(FindingRow{f.kernel(), f.op(), f.phase(),
                                              Category(f.category(), taxonomy::ClassifyKernel(f.kernel(), f.op())),
                                              f.share(), f.speedup(), f.priority(), f.rule(), f.finding()});
          }
          MEDPROF_RETURN_IF_ERROR(tx.InsertFindings(run.run_id, finding_rows));
          rows += static_cast<int64_t>(finding_rows.size());
          break;
        }
        case v1::WorkerMessage::kTimeline:
          // Kept whole (as the worker bounded it) for `medprof export --format chrome-trace`.
          MEDPROF_RETURN_IF_ERROR(tx.AppendTimelinePart(
              run.run_id, TimelinePart{"timeline", 0, m.timeline().events_size(), ToJson(m.timeline())}));
          ++rows;
          break;
        case v1::WorkerMessage::kUtilization:
          MEDPROF_RETURN_IF_ERROR(tx.AppendTimelinePart(
              run.run_id, TimelinePart{"utilization", 0, m.utilization().samples_size(), ToJson(m.utilization())}));
          ++rows;
          break;
        case v1::WorkerMessage::kSignatures: {
          const std::vector<SignatureRow> signature_rows = SignatureRows(m.signatures());
          MEDPROF_RETURN_IF_ERROR(tx.InsertSignatures(run.run_id, signature_rows));
          rows += static_cast<int64_t>(signature_rows.size());
          break;
        }
        case v1::WorkerMessage::BODY_NOT_SET:
          break;
      }
    }

    for (auto& [run_id, rs] : runs) {
      RunRecord& run = rs.run;
      // Advance the contiguous prefix over what is stored now.
      MEDPROF_ASSIGN_OR_RETURN(std::vector<uint64_t> seqs, tx.ListChunkSeqs(run_id, run.chunks_through, 100000));
      uint64_t through = run.chunks_through;
      for (uint64_t s : seqs) {
        if (s != through + 1) break;
        through = s;
      }
      if (through != run.chunks_through) {
        run.chunks_through = through;
        rs.results_dirty = true;
      }
      if (rs.results_dirty) MEDPROF_RETURN_IF_ERROR(tx.UpdateRunResults(run));
      if (rs.error_dirty) MEDPROF_RETURN_IF_ERROR(tx.UpdateRunState(run));
      out[run_id] = run.chunks_through;
    }
    return absl::OkStatus();
  }));
  if (progressed) core_.events.Notify();
  if (MetricsSink* sink = core_.metrics.load(); sink != nullptr && rows > 0) sink->RowsIngested(rows);
  return out;
}

}  // namespace medprof::server
