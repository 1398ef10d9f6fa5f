#include "server/domain/run_upload.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/workload_config.h"
#include "server/domain/codec.h"

namespace medprof::server {
namespace {

constexpr size_t kMaxMessages = 100000;
constexpr size_t kIngestWindow = 1024;  // chunks per ResultIngestor call (it allows 4096)

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

// The preset of a well-formed stream; INVALID_ARGUMENT naming the message otherwise.
absl::StatusOr<std::string> CheckStream(const UploadRunRequest& r) {
  if (r.study_id.empty()) return Invalid("study_id: required (the study the run joins)");
  if (r.messages.size() < 2 || r.messages.size() > kMaxMessages) {
    return Invalid(absl::StrCat("messages: ", r.messages.size(), " records (allowed 2..", kMaxMessages,
                                "): a worker's run file starts with 'started' and ends with 'summary'"));
  }
  if (r.messages[0].body_case() != v1::WorkerMessage::kStarted) {
    return Invalid(absl::StrCat("messages[0]: is '", ChunkKind(r.messages[0]),
                                "', expected 'started' (is this a medprof-worker --out file?)"));
  }
  const std::string preset = r.messages[0].started().effective().preset();
  if (!config::PresetFor(preset).ok()) {
    return Invalid(absl::StrCat("messages[0].started.effective.preset: '", preset.substr(0, 64),
                                "' is not a preset (allowed: ", config::PresetList(), ")"));
  }
  bool step = false, summary = false;
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const v1::WorkerMessage& m = r.messages[i];
    if (m.body_case() == v1::WorkerMessage::kError) {
      return Invalid(absl::StrCat("messages[", i, "]: the run failed (", m.error().kind(), ": ",
                                  m.error().message().substr(0, 200), "); only succeeded runs are uploaded"));
    }
    if (i > 0 && m.body_case() == v1::WorkerMessage::kStarted) {
      return Invalid(absl::StrCat("messages[", i, "]: a second 'started' (one run per file)"));
    }
    step = step || m.body_case() == v1::WorkerMessage::kStep;
    summary = summary || m.body_case() == v1::WorkerMessage::kSummary;
  }
  if (!step) return Invalid("messages: no 'step' record (the run measured no step)");
  if (!summary) return Invalid("messages: no 'summary' record (the worker did not finish the run)");
  return preset;
}

}  // namespace

absl::StatusOr<UploadRunResult> RunUploader::Upload(const CallContext& ctx, const UploadRunRequest& r) {
  MEDPROF_ASSIGN_OR_RETURN(const std::string preset, CheckStream(r));
  const int64_t now = core_.clock.NowUnixMs();
  UploadRunResult out;
  out.study_id = r.study_id;
  out.job_id = NewId("job");
  out.run_id = NewId("run");
  out.preset = preset;
  const std::string agent = absl::StrCat("upload:", out.run_id);
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    MEDPROF_RETURN_IF_ERROR(OpenStudy(tx, r.study_id, "upload").status());
    auto [job, run] = NewArrivedRun(r.study_id, out.job_id, out.run_id, preset, "upload", agent,
                                    ToJson(r.messages[0].started().effective()), now);
    job.state = JobState::kRunning;
    MEDPROF_RETURN_IF_ERROR(tx.InsertJob(job));
    run.state = RunState::kRunning;
    // A lease like a leased run's, so the lease reaper leaves the upload alone while its windows
    // are ingested (a run inserted with no lease was reaped as lost when a pass fell in between).
    run.lease_expires_unix_ms = now + core_.options.lease_ttl_ms;
    return tx.InsertRun(run);
  }));

  for (size_t begin = 0; begin < r.messages.size(); begin += kIngestWindow) {
    std::vector<ResultChunk> window;
    for (size_t i = begin; i < std::min(r.messages.size(), begin + kIngestWindow); ++i) {
      window.push_back(ResultChunk{out.run_id, agent, i + 1, r.messages[i]});
      out.steps += r.messages[i].body_case() == v1::WorkerMessage::kStep;
    }
    if (absl::StatusOr<CommittedThrough> s = ingestor_.Ingest(ctx, window); !s.ok()) {
      const absl::Status finished = Finish(out.run_id, false, absl::StrCat("upload refused: ", s.status().message()));
      if (!finished.ok()) return finished;
      return s.status();
    }
  }
  MEDPROF_RETURN_IF_ERROR(Finish(out.run_id, true, absl::StrCat("uploaded by hand: ", r.messages.size(), " records")));
  const v1::RunStarted& started = r.messages[0].started();
  out.gpu = started.environment().gpu_name().empty() && started.backend() == "cpu" ? "cpu"
                                                                                    : started.environment().gpu_name();
  return out;
}

absl::Status RunUploader::Finish(const std::string& run_id, bool succeeded, const std::string& message) {
  const int64_t now = core_.clock.NowUnixMs();
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(std::optional<RunRecord> run, tx.GetRun(run_id));
    if (!run.has_value()) return absl::InternalError(absl::StrCat("upload: run ", run_id, " vanished"));
    run->state = succeeded ? RunState::kSucceeded : RunState::kFailed;
    run->finished_unix_ms = now;
    if (!succeeded) run->error = message;
    MEDPROF_RETURN_IF_ERROR(tx.UpdateRunState(*run));
    MEDPROF_ASSIGN_OR_RETURN(std::optional<JobRecord> job, tx.GetJob(run->job_id));
    if (!job.has_value()) return absl::InternalError(absl::StrCat("upload: job ", run->job_id, " vanished"));
    job->state = succeeded ? JobState::kSucceeded : JobState::kFailed;
    if (!succeeded) job->error = message;
    return RecordJobChange(tx, now, *job, run_id, message);
  }));
  core_.events.Notify();
  return absl::OkStatus();
}

}  // namespace medprof::server
