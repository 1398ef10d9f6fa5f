#include "server/domain/core.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/workload_config.h"
#include "server/domain/codec.h"

namespace medprof::server {

QueryTimer::~QueryTimer() {
  if (MetricsSink* sink = core_.metrics.load(); sink != nullptr) {
    sink->QueryServed(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
}

ArrivedRunRows NewArrivedRun(const std::string& study_id, const std::string& job_id, const std::string& run_id,
                             const std::string& preset, const std::string& target, const std::string& agent_id,
                             std::string config_json, int64_t now) {
  ArrivedRunRows rows;
  JobRecord& job = rows.job;
  job.job_id = job_id;
  job.study_id = study_id;
  job.preset = preset;
  job.target = target;
  job.repeat = 1;
  job.attempts = 1;
  job.max_attempts = 1;
  job.timeout_s = 1;
  job.config_json = std::move(config_json);
  job.current_run_id = run_id;
  job.created_unix_ms = job.updated_unix_ms = now;
  RunRecord& run = rows.run;
  run.run_id = run_id;
  run.job_id = job_id;
  run.study_id = study_id;
  run.agent_id = agent_id;
  run.attempt = 1;
  run.device_index = -1;
  run.started_unix_ms = now;
  return rows;
}

absl::StatusOr<StudyRecord> OpenStudy(StoreTx& tx, const std::string& study_id, std::string_view verb) {
  MEDPROF_ASSIGN_OR_RETURN(std::optional<StudyRecord> study, tx.GetStudy(study_id));
  if (!study.has_value()) return absl::NotFoundError(absl::StrCat("study_id: no study '", study_id, "'"));
  if (study->cancelled) {
    return absl::FailedPreconditionError(
        absl::StrCat("study ", study_id, " is cancelled: ", std::string(verb), " into another study"));
  }
  return *std::move(study);
}

EventRecord JobEvent(const JobRecord& job, const std::string& run_id, int64_t now, std::string message) {
  EventRecord e;
  e.study_id = job.study_id;
  e.job_id = job.job_id;
  e.run_id = run_id;
  e.job_state = job.state;
  e.message = std::move(message);
  e.unix_ms = now;
  return e;
}

absl::Status RecordJobChange(StoreTx& tx, int64_t now, JobRecord& job, const std::string& run_id,
                             const std::string& message) {
  job.updated_unix_ms = now;
  MEDPROF_RETURN_IF_ERROR(tx.UpdateJob(job));
  MEDPROF_RETURN_IF_ERROR(tx.AppendEvent(JobEvent(job, run_id, now, message)).status());
  if (!IsTerminal(job.state)) return absl::OkStatus();

  MEDPROF_ASSIGN_OR_RETURN(JobCounts counts, tx.CountJobs(job.study_id));
  if (counts.done() < counts.total) return absl::OkStatus();
  MEDPROF_ASSIGN_OR_RETURN(std::optional<StudyRecord> study, tx.GetStudy(job.study_id));
  if (!study.has_value() || study->finished_unix_ms != 0) return absl::OkStatus();
  study->finished_unix_ms = now;
  MEDPROF_RETURN_IF_ERROR(tx.UpdateStudy(*study));
  EventRecord done;
  done.study_id = job.study_id;
  done.study_finished = true;
  done.unix_ms = now;
  done.message = absl::StrCat("study ", study->cancelled ? "cancelled" : "finished", ": ", counts.succeeded,
                              " succeeded, ", counts.failed, " failed, ", counts.cancelled, " cancelled");
  return tx.AppendEvent(done).status();
}

absl::Status RecordProgress(StoreTx& tx, int64_t now, JobRecord& job, const std::string& run_id,
                            const v1::Progress& progress) {
  std::string json = ToJson(progress);
  if (json == job.progress_json) return absl::OkStatus();
  job.progress_json = std::move(json);
  job.updated_unix_ms = now;
  MEDPROF_RETURN_IF_ERROR(tx.UpdateJob(job));
  EventRecord e = JobEvent(job, run_id, now, progress.message());  // stage and step: progress_json
  e.progress_json = job.progress_json;
  return tx.AppendEvent(e).status();
}

absl::StatusOr<JobView> DecodeJob(JobRecord record) {
  JobView v;
  MEDPROF_RETURN_IF_ERROR(FromJson(record.config_json, &v.config, absl::StrCat("config of job ", record.job_id)));
  if (!record.progress_json.empty()) {
    v1::Progress p;
    MEDPROF_RETURN_IF_ERROR(FromJson(record.progress_json, &p, absl::StrCat("progress of job ", record.job_id)));
    v.last_progress = std::move(p);
  }
  v.record = std::move(record);
  return v;
}

absl::StatusOr<StudyEvent> DecodeEvent(EventRecord record) {
  StudyEvent e;
  if (!record.progress_json.empty()) {
    v1::Progress p;
    MEDPROF_RETURN_IF_ERROR(
        FromJson(record.progress_json, &p, absl::StrCat("progress of event ", record.event_id)));
    e.progress = std::move(p);
  }
  e.record = std::move(record);
  return e;
}

StudyState StudyStateOf(const StudyRecord& study, const JobCounts& counts) {
  if (study.cancelled) return StudyState::kCancelled;
  return counts.queued + counts.running > 0 ? StudyState::kActive : StudyState::kDone;
}

selector::Agent SelectorAgent(const AgentRecord& a) {
  selector::Agent s;
  s.name = a.name;
  s.host = a.host;
  s.labels = a.labels;
  for (const DeviceRecord& d : a.devices) s.devices.push_back({d.index, d.kind, d.name, d.compute_capability});
  return s;
}

absl::StatusOr<selector::Selector> JobSelector(const std::string& target, const v1::WorkloadConfig& config) {
  MEDPROF_ASSIGN_OR_RETURN(selector::Selector sel, selector::Parse(target));
  std::string wanted;
  if (config.device() == v1::DEVICE_KIND_CPU) wanted = "cpu";
  if (config.device() == v1::DEVICE_KIND_CUDA) wanted = "cuda";
  if (!wanted.empty()) {
    if (!sel.device.empty() && sel.device != wanted) {
      return absl::InvalidArgumentError(absl::StrCat("device=", sel.device, " contradicts config.device ", wanted,
                                                     " (drop one of them)"));
    }
    sel.device = wanted;
  }
  return sel;
}

std::vector<size_t> EligibleDevices(const selector::Selector& sel, const selector::Agent& agent) {
  std::vector<size_t> out = selector::MatchingDevices(sel, agent);
  std::stable_sort(out.begin(), out.end(), [&](size_t a, size_t b) {
    return (agent.devices[a].kind == "cuda") > (agent.devices[b].kind == "cuda");
  });
  return out;
}

absl::Status RequireId(const std::string& value, const char* field) {
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
  if (value.size() > 64) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", value.size(), " characters (allowed at most 64)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RunRecord>> RunningRunsOf(StoreTx& tx, const std::string& agent_id) {
  RunFilter f;
  f.agent_id = agent_id;
  f.state = RunState::kRunning;
  f.limit = 10000;
  return tx.ListRuns(f);
}

std::string Tail(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t start = text.size() - max_bytes;
  const size_t nl = text.find('\n', start);
  if (nl != std::string::npos && nl + 1 < text.size() && nl - start < 256) start = nl + 1;
  return text.substr(start);
}

}  // namespace medprof::server
