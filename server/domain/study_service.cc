#include "server/domain/study_service.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/request_limits.h"
#include "common/status.h"
#include "common/text_check.h"
#include "common/workload_config.h"
#include "server/domain/access.h"
#include "server/domain/codec.h"

namespace medprof::server {
namespace {

const Logger kLog("studies");

constexpr int kEventBatch = 500;
constexpr auto kWatchSlice = std::chrono::milliseconds(500);

absl::Status Invalid(const std::string& msg) { return absl::InvalidArgumentError(msg); }

// For fields where 0 (proto3's unset) means "the default".
absl::Status CheckOptional(const char* field, int value, int lo, int hi, const char* default_note) {
  if (value != 0 && (value < lo || value > hi)) {
    return Invalid(absl::StrCat(field, ": ", value, " is out of range (allowed ", lo, "..", hi, "; unset = ",
                                default_note, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<StudyRecord> LoadStudy(StoreTx& tx, const std::string& study_id) {
  MEDPROF_ASSIGN_OR_RETURN(std::optional<StudyRecord> study, tx.GetStudy(study_id));
  if (!study.has_value()) return absl::NotFoundError(absl::StrCat("study_id: no study '", study_id, "'"));
  return *std::move(study);
}

absl::StatusOr<RunView> DecodeRun(RunRecord record, const std::string& preset, const std::string& job_config_json) {
  RunView v;
  v.preset = preset;
  const std::string& effective = record.effective_json.empty() ? job_config_json : record.effective_json;
  MEDPROF_RETURN_IF_ERROR(FromJson(effective, &v.effective, absl::StrCat("config of run ", record.run_id)));
  MEDPROF_RETURN_IF_ERROR(
      FromJson(record.environment_json, &v.environment, absl::StrCat("environment of run ", record.run_id)));
  if (!record.summary_json.empty()) {
    v1::RunSummary s;
    MEDPROF_RETURN_IF_ERROR(FromJson(record.summary_json, &s, absl::StrCat("summary of run ", record.run_id)));
    v.summary = std::move(s);
  }
  v.record = std::move(record);
  return v;
}

}  // namespace

absl::StatusOr<std::vector<JobView>> PlanJobs(const SubmitStudyRequest& r, int max_attempts_default,
                                              int max_jobs_per_study) {
  if (r.name.size() > limits::kMaxStudyNameChars) {
    return Invalid(absl::StrCat("name: ", r.name.size(), " characters (allowed at most ", limits::kMaxStudyNameChars, ")"));
  }
  MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(r.name, "name"));
  if (r.presets.empty() || r.presets.size() > limits::kMaxPresets) {
    return Invalid(absl::StrCat("presets: ", r.presets.size(), " presets (allowed 1..", limits::kMaxPresets, " of ",
                                config::PresetList(), ")"));
  }
  std::set<std::string> seen;
  std::vector<v1::WorkloadConfig> configs;
  for (size_t i = 0; i < r.presets.size(); ++i) {
    const std::string& p = r.presets[i];
    if (!config::PresetFor(p).ok()) {
      return Invalid(absl::StrCat("presets[", i, "]: unknown preset '", p.substr(0, 64), "' (allowed: ",
                                  config::PresetList(), ")"));
    }
    if (!seen.insert(p).second) return Invalid(absl::StrCat("presets[", i, "]: '", p, "' is listed twice"));
    v1::WorkloadConfig c = r.config;
    c.set_preset(p);
    config::ApplyDefaults(&c);
    if (absl::Status s = config::Validate(c); !s.ok()) {
      return Invalid(absl::StrCat("config.", s.message(), r.presets.size() > 1 ? absl::StrCat(" [preset ", p, "]") : ""));
    }
    configs.push_back(std::move(c));
  }
  if (r.targets.size() > limits::kMaxTargets) {
    return Invalid(absl::StrCat("targets: ", r.targets.size(), " selectors (allowed at most ", limits::kMaxTargets, ")"));
  }
  std::vector<std::string> targets = r.targets.empty() ? std::vector<std::string>{""} : r.targets;
  for (size_t i = 0; i < targets.size(); ++i) {
    MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(targets[i], absl::StrCat("targets[", i, "]")));
    absl::StatusOr<selector::Selector> sel = JobSelector(targets[i], configs.front());
    if (!sel.ok()) return Invalid(absl::StrCat("targets[", i, "]: ", sel.status().message()));
    targets[i] = std::string(absl::StripAsciiWhitespace(targets[i]));
  }
  const int repeats = r.repeats == 0 ? 1 : r.repeats;
  MEDPROF_RETURN_IF_ERROR(CheckOptional("repeats", r.repeats, 1, limits::kMaxRepeats, "1"));
  const int max_attempts = r.max_attempts == 0 ? max_attempts_default : r.max_attempts;
  MEDPROF_RETURN_IF_ERROR(CheckOptional("max_attempts", r.max_attempts, 1, limits::kMaxAttempts, "the server default"));
  const int timeout_s = r.timeout_s == 0 ? limits::kDefaultRunTimeoutS : r.timeout_s;
  MEDPROF_RETURN_IF_ERROR(CheckOptional("timeout_s", r.timeout_s, 1, limits::kMaxRunTimeoutS,
                                        absl::StrCat(limits::kDefaultRunTimeoutS).c_str()));
  const int64_t total = static_cast<int64_t>(configs.size()) * static_cast<int64_t>(targets.size()) * repeats;
  if (total > max_jobs_per_study) {
    return Invalid(absl::StrCat("presets x targets x repeats: ", configs.size(), " x ", targets.size(), " x ",
                                repeats, " = ", total, " jobs (allowed at most ", max_jobs_per_study,
                                " per study; split it into several studies)"));
  }

  std::vector<JobView> jobs;
  for (int rep = 1; rep <= repeats; ++rep) {
    for (const std::string& target : targets) {
      for (const v1::WorkloadConfig& c : configs) {
        JobView j;
        j.config = c;
        j.record.preset = c.preset();
        j.record.target = target;
        j.record.repeat = rep;
        j.record.state = JobState::kQueued;
        j.record.max_attempts = max_attempts;
        j.record.timeout_s = timeout_s;
        j.record.config_json = ToJson(c);
        jobs.push_back(std::move(j));
      }
    }
  }
  return jobs;
}

absl::StatusOr<SubmitStudyResult> StudyService::SubmitStudy(const CallContext& ctx, const SubmitStudyRequest& r) {
  MEDPROF_ASSIGN_OR_RETURN(std::vector<JobView> jobs,
                           PlanJobs(r, core_.options.max_attempts_default, core_.options.max_jobs_per_study));
  const int64_t now = core_.clock.NowUnixMs();
  SubmitStudyResult out;
  StudyRecord study;
  study.study_id = NewId("st");
  study.name = r.name;
  study.project = ctx.project;
  study.created_unix_ms = now;
  for (JobView& j : jobs) {
    j.record.job_id = NewId("job");
    j.record.study_id = study.study_id;
    j.record.created_unix_ms = j.record.updated_unix_ms = now;
  }
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    out.warnings.clear();
    MEDPROF_RETURN_IF_ERROR(tx.InsertStudy(study));
    for (const JobView& j : jobs) {
      MEDPROF_RETURN_IF_ERROR(tx.InsertJob(j.record));
      const std::string message = absl::StrCat(
          "preset ", j.record.preset, ", target ", j.record.target.empty() ? "any" : absl::StrCat("'", j.record.target, "'"),
          ", repeat ", j.record.repeat);
      MEDPROF_RETURN_IF_ERROR(tx.AppendEvent(JobEvent(j.record, "", now, message)).status());
    }
    // Warn about targets no registered agent can serve (the jobs still wait for one).
    MEDPROF_ASSIGN_OR_RETURN(std::vector<AgentRecord> agents, tx.ListAgents());
    std::vector<std::string> targets = r.targets.empty() ? std::vector<std::string>{""} : r.targets;
    for (size_t i = 0; i < targets.size(); ++i) {
      absl::StatusOr<selector::Selector> sel = JobSelector(targets[i], jobs.front().config);
      if (!sel.ok()) continue;  // validated above
      const bool served = std::any_of(agents.begin(), agents.end(), [&](const AgentRecord& a) {
        return !EligibleDevices(*sel, SelectorAgent(a)).empty();
      });
      if (served) continue;
      out.warnings.push_back(
          agents.empty()
              ? std::string("no agent is registered yet; the jobs wait in the queue until one registers")
              : absl::StrCat("targets[", i, "] ('", targets[i],
                             "'): no registered agent matches yet; its jobs wait in the queue until one does"));
    }
    return absl::OkStatus();
  }));
  kLog.Info("study {} submitted by {}: {} job(s) ({} preset(s) x {} target(s) x {} repeat(s))", study.study_id,
            ctx.peer.empty() ? "local" : ctx.peer, jobs.size(), r.presets.size(),
            r.targets.empty() ? 1 : r.targets.size(), r.repeats == 0 ? 1 : r.repeats);
  core_.work.Notify();
  core_.events.Notify();
  out.study_id = study.study_id;
  out.jobs = std::move(jobs);
  return out;
}

absl::StatusOr<StudyView> StudyService::GetStudy(const CallContext&, const std::string& study_id) {
  return core_.query_pool.Call([&] { return DoGetStudy(study_id); });
}

absl::StatusOr<StudyView> StudyService::DoGetStudy(const std::string& study_id) {
  MEDPROF_RETURN_IF_ERROR(RequireId(study_id, "study_id"));
  StudyView v;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(v.record, LoadStudy(tx, study_id));
    MEDPROF_ASSIGN_OR_RETURN(v.counts, tx.CountJobs(study_id));
    MEDPROF_ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, tx.ListJobs(study_id));
    v.jobs.clear();
    for (JobRecord& j : jobs) {
      MEDPROF_ASSIGN_OR_RETURN(JobView jv, DecodeJob(std::move(j)));
      v.jobs.push_back(std::move(jv));
    }
    return absl::OkStatus();
  }));
  v.state = StudyStateOf(v.record, v.counts);
  return v;
}

absl::StatusOr<ListStudiesResult> StudyService::ListStudies(const CallContext& ctx, const ListStudiesRequest& r) {
  return core_.query_pool.Call([&] { return DoListStudies(ctx, r); });
}

absl::StatusOr<ListStudiesResult> StudyService::DoListStudies(const CallContext& ctx, const ListStudiesRequest& r) {
  MEDPROF_RETURN_IF_ERROR(CheckOptional("limit", r.limit, 1, limits::kMaxStudiesLimit, "50"));
  const int limit = r.limit == 0 ? 50 : r.limit;
  int64_t before = 0;
  if (!r.page_token.empty() && (!absl::SimpleAtoi(r.page_token, &before) || before <= 0)) {
    return Invalid(absl::StrCat("page_token: '", r.page_token.substr(0, 64),
                                "' is not a token from a previous ListStudies answer"));
  }
  ListStudiesResult out;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    out = ListStudiesResult();
    // Only the caller's project (AccessControl::Sees): read on until limit + 1 visible ones.
    std::vector<StudyRecord> studies;
    for (int64_t cursor = before; static_cast<int>(studies.size()) <= limit;) {
      MEDPROF_ASSIGN_OR_RETURN(std::vector<StudyRecord> batch, tx.ListStudies(cursor, limit + 1));
      for (StudyRecord& s : batch) {
        if (AccessControl::Sees(ctx, s.project)) studies.push_back(std::move(s));
      }
      if (static_cast<int>(batch.size()) < limit + 1) break;
      cursor = batch.back().seq;
    }
    const bool more = static_cast<int>(studies.size()) > limit;
    if (more) studies.resize(limit);
    for (StudyRecord& s : studies) {
      StudyView v;
      MEDPROF_ASSIGN_OR_RETURN(v.counts, tx.CountJobs(s.study_id));
      v.state = StudyStateOf(s, v.counts);
      v.record = std::move(s);
      out.studies.push_back(std::move(v));
    }
    if (more) out.next_page_token = absl::StrCat(out.studies.back().record.seq);
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<int> StudyService::CancelStudy(const CallContext& ctx, const std::string& study_id,
                                              const std::string& reason) {
  MEDPROF_RETURN_IF_ERROR(RequireId(study_id, "study_id"));
  if (reason.size() > limits::kMaxCancelReasonChars) {
    return Invalid(absl::StrCat("reason: ", reason.size(), " characters (allowed at most ", limits::kMaxCancelReasonChars, ")"));
  }
  MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(reason, "reason"));
  const int64_t now = core_.clock.NowUnixMs();
  const std::string why = reason.empty() ? "by request" : reason;
  int cancelled = 0;
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    cancelled = 0;
    MEDPROF_ASSIGN_OR_RETURN(StudyRecord study, LoadStudy(tx, study_id));
    if (!study.cancelled) {
      study.cancelled = true;
      study.cancel_reason = reason;
      MEDPROF_RETURN_IF_ERROR(tx.UpdateStudy(study));
    }
    MEDPROF_ASSIGN_OR_RETURN(std::vector<JobRecord> jobs, tx.ListJobs(study_id));
    for (JobRecord& job : jobs) {
      if (IsTerminal(job.state)) continue;
      const bool was_running = job.state == JobState::kRunning;
      job.state = JobState::kCancelled;
      job.error = absl::StrCat("cancelled: ", why);
      ++cancelled;
      MEDPROF_RETURN_IF_ERROR(RecordJobChange(
          tx, now, job, job.current_run_id,
          was_running ? absl::StrCat(why, " (the agent stops run ", job.current_run_id, ")") : why));
    }
    return absl::OkStatus();
  }));
  kLog.Info("study {} cancelled by {}: {} job(s) cancelled", study_id, ctx.peer.empty() ? "local" : ctx.peer,
            cancelled);
  core_.events.Notify();
  return cancelled;
}

absl::Status StudyService::WatchStudy(const CallContext& ctx, const std::string& study_id,
                                      const std::function<bool(const StudyEvent&)>& sink) {
  MEDPROF_RETURN_IF_ERROR(RequireId(study_id, "study_id"));
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) { return LoadStudy(tx, study_id).status(); }));
  int64_t last = 0;
  while (true) {
    const uint64_t generation = core_.events.generation();
    std::vector<EventRecord> batch;
    MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
      MEDPROF_ASSIGN_OR_RETURN(batch, tx.ListEvents(study_id, last, kEventBatch));
      return absl::OkStatus();
    }));
    for (EventRecord& e : batch) {
      last = e.event_id;
      const bool finished = e.study_finished;
      MEDPROF_ASSIGN_OR_RETURN(StudyEvent ev, DecodeEvent(std::move(e)));
      if (!sink(ev)) return absl::CancelledError("the watcher went away");
      if (finished) return absl::OkStatus();
    }
    if (static_cast<int>(batch.size()) == kEventBatch) continue;
    if (ctx.cancelled()) return absl::CancelledError("the watcher went away");
    if (std::chrono::steady_clock::now() >= ctx.deadline) {
      return absl::DeadlineExceededError(absl::StrCat("watch of study ", study_id, " reached its deadline"));
    }
    if (!core_.events.WaitFor(generation, kWatchSlice)) {
      return absl::UnavailableError("the server is shutting down; watch again to resume");
    }
  }
}

absl::StatusOr<std::vector<RunView>> StudyService::ListRuns(const CallContext& ctx, const ListRunsRequest& r) {
  return core_.query_pool.Call([&] { return DoListRuns(ctx, r); });
}

absl::StatusOr<std::vector<RunView>> StudyService::DoListRuns(const CallContext& ctx, const ListRunsRequest& r) {
  MEDPROF_RETURN_IF_ERROR(CheckOptional("limit", r.limit, 1, limits::kMaxRunsLimit, "100"));
  if (r.study_id.size() > 64 || r.job_id.size() > 64) return Invalid("study_id/job_id: at most 64 characters");
  RunFilter f;
  f.study_id = r.study_id;
  f.job_id = r.job_id;
  f.limit = r.limit == 0 ? 100 : r.limit;
  std::vector<RunView> out;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    out.clear();
    MEDPROF_ASSIGN_OR_RETURN(std::vector<RunRecord> runs, tx.ListRuns(f));
    std::unordered_map<std::string, JobRecord> jobs;
    std::unordered_map<std::string, bool> visible;  // by study id (AccessControl::Sees)
    for (RunRecord& run : runs) {
      if (!ctx.all_projects) {
        auto seen = visible.find(run.study_id);
        if (seen == visible.end()) {
          MEDPROF_ASSIGN_OR_RETURN(std::optional<StudyRecord> study, tx.GetStudy(run.study_id));
          seen = visible.emplace(run.study_id, study.has_value() && AccessControl::Sees(ctx, study->project)).first;
        }
        if (!seen->second) continue;
      }
      auto it = jobs.find(run.job_id);
      if (it == jobs.end()) {
        MEDPROF_ASSIGN_OR_RETURN(std::optional<JobRecord> job, tx.GetJob(run.job_id));
        it = jobs.emplace(run.job_id, job.value_or(JobRecord{})).first;
      }
      MEDPROF_ASSIGN_OR_RETURN(RunView v, DecodeRun(std::move(run), it->second.preset, it->second.config_json));
      out.push_back(std::move(v));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<RunView> StudyService::GetRun(const CallContext&, const std::string& run_id) {
  return core_.query_pool.Call([&] { return DoGetRun(run_id); });
}

absl::StatusOr<RunView> StudyService::DoGetRun(const std::string& run_id) {
  MEDPROF_RETURN_IF_ERROR(RequireId(run_id, "run_id"));
  RunView v;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(std::optional<RunRecord> run, tx.GetRun(run_id));
    if (!run.has_value()) return absl::NotFoundError(absl::StrCat("run_id: no run '", run_id, "'"));
    MEDPROF_ASSIGN_OR_RETURN(std::optional<JobRecord> job, tx.GetJob(run->job_id));
    const JobRecord j = job.value_or(JobRecord{});
    MEDPROF_ASSIGN_OR_RETURN(v, DecodeRun(*std::move(run), j.preset, j.config_json));
    MEDPROF_ASSIGN_OR_RETURN(v.steps, tx.ListSteps(run_id));
    MEDPROF_ASSIGN_OR_RETURN(v.ops, tx.ListOps(run_id));
    MEDPROF_ASSIGN_OR_RETURN(v.kernels, tx.ListKernels(run_id));
    MEDPROF_ASSIGN_OR_RETURN(v.metrics, tx.ListMetrics(run_id));
    return absl::OkStatus();
  }));
  return v;
}

}  // namespace medprof::server
