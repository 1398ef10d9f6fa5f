#include "server/domain/scheduler.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status.h"
#include "server/domain/codec.h"
#include "server/domain/limits.h"

namespace medprof::server {
namespace {

const Logger kLog("scheduler");

constexpr int kMaxQueuedScan = 5000;       // queued jobs considered per lease attempt
constexpr size_t kJobStderrBytes = 2 * 1024;  // stderr lines quoted in a failed job's error
constexpr auto kWaitSlice = std::chrono::milliseconds(250);
constexpr auto kDeadlineMargin = std::chrono::milliseconds(100);

absl::StatusOr<AgentRecord> LoadAgent(StoreTx& tx, const std::string& agent_id) {
  MEDPROF_ASSIGN_OR_RETURN(std::optional<AgentRecord> agent, tx.GetAgent(agent_id));
  if (!agent.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("agent_id: no agent '", agent_id, "' is registered (register again: the server may have a new database)"));
  }
  return *std::move(agent);
}

std::string AttemptText(const JobRecord& job) { return absl::StrCat("attempt ", job.attempts, " of ", job.max_attempts); }

}  // namespace

std::string DescribeGaps(uint64_t through, const std::vector<uint64_t>& stored, uint64_t last_seq) {
  std::vector<std::string> ranges;
  size_t more = 0;
  auto add = [&](uint64_t lo, uint64_t hi) {
    if (ranges.size() >= 5) {
      ++more;
      return;
    }
    ranges.push_back(lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, "..", hi));
  };
  uint64_t next = through + 1;
  for (uint64_t s : stored) {
    if (s > last_seq) break;
    if (s > next) add(next, s - 1);
    next = std::max(next, s + 1);
  }
  if (next <= last_seq) add(next, last_seq);
  if (ranges.empty()) return std::string();
  std::string out = absl::StrCat("seq ", absl::StrJoin(ranges, ", "));
  if (more > 0) absl::StrAppend(&out, " and ", more, " more range(s)");
  return absl::StrCat(out, " missing");
}

// ---------------------------------------------------------------- heartbeat

absl::StatusOr<HeartbeatResult> Scheduler::Heartbeat(const CallContext&, const HeartbeatRequest& r) {
  MEDPROF_RETURN_IF_ERROR(RequireId(r.agent_id, "agent_id"));
  if (r.running_run_ids.size() > limits::kMaxIdsPerHeartbeat || r.progress.size() > limits::kMaxIdsPerHeartbeat) {
    return absl::InvalidArgumentError(absl::StrCat("running_run_ids/progress: at most ", limits::kMaxIdsPerHeartbeat,
                                                   " entries per heartbeat"));
  }
  const int64_t now = core_.clock.NowUnixMs();
  HeartbeatResult out;
  bool progressed = false;
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    out = HeartbeatResult();
    progressed = false;
    MEDPROF_ASSIGN_OR_RETURN(AgentRecord agent, LoadAgent(tx, r.agent_id));
    MEDPROF_RETURN_IF_ERROR(tx.TouchAgent(agent.agent_id, now, r.draining));
    MEDPROF_ASSIGN_OR_RETURN(std::vector<RunRecord> running, RunningRunsOf(tx, agent.agent_id));
    std::unordered_map<std::string, const RunRecord*> by_id;
    for (const RunRecord& run : running) by_id[run.run_id] = &run;

    std::set<std::string> reported;
    for (const std::string& id : r.running_run_ids) {
      if (!reported.insert(id).second) continue;
      if (by_id.count(id) == 0) {
        out.unknown_run_ids.push_back(id);
        continue;
      }
      MEDPROF_RETURN_IF_ERROR(tx.ExtendLease(id, now + core_.options.lease_ttl_ms));
    }
    // Runs of this agent whose job was cancelled, reported or not: the agent stops them.
    for (const RunRecord& run : running) {
      MEDPROF_ASSIGN_OR_RETURN(std::optional<JobRecord> job, tx.GetJob(run.job_id));
      if (job.has_value() && job->state == JobState::kCancelled) out.cancel_run_ids.push_back(run.run_id);
    }
    for (const auto& [run_id, progress] : r.progress) {
      auto it = by_id.find(run_id);
      if (it == by_id.end()) continue;
      MEDPROF_ASSIGN_OR_RETURN(std::optional<JobRecord> job, tx.GetJob(it->second->job_id));
      if (!job.has_value() || job->state != JobState::kRunning || job->current_run_id != run_id) continue;
      MEDPROF_RETURN_IF_ERROR(RecordProgress(tx, now, *job, run_id, progress));
      progressed = true;
    }
    return absl::OkStatus();
  }));
  if (progressed) core_.events.Notify();
  return out;
}

// ---------------------------------------------------------------- acquire

absl::StatusOr<std::optional<Assignment>> Scheduler::AcquireJob(const CallContext& ctx, const AcquireJobRequest& r) {
  MEDPROF_RETURN_IF_ERROR(RequireId(r.agent_id, "agent_id"));
  if (r.wait_ms < 0 || r.wait_ms > core_.options.max_wait_ms) {
    return absl::InvalidArgumentError(
        absl::StrCat("wait_ms: ", r.wait_ms, " is out of range (allowed 0..", core_.options.max_wait_ms, ")"));
  }
  if (r.free_device_indexes.size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("free_device_indexes: ", r.free_device_indexes.size(), " entries (allowed at most 64)"));
  }
  using SteadyClock = std::chrono::steady_clock;
  SteadyClock::time_point deadline = SteadyClock::now() + std::chrono::milliseconds(r.wait_ms);
  if (ctx.deadline != SteadyClock::time_point::max()) deadline = std::min(deadline, ctx.deadline - kDeadlineMargin);

  while (true) {
    const uint64_t generation = core_.work.generation();
    MEDPROF_ASSIGN_OR_RETURN(std::optional<Assignment> a, TryLease(r));
    if (a.has_value()) {
      core_.events.Notify();
      return a;
    }
    const auto now = SteadyClock::now();
    if (now >= deadline || ctx.cancelled() || core_.work.shut_down()) return std::optional<Assignment>();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    core_.work.WaitFor(generation, std::min<std::chrono::milliseconds>(left + std::chrono::milliseconds(1), kWaitSlice));
  }
}

absl::StatusOr<std::optional<Assignment>> Scheduler::TryLease(const AcquireJobRequest& r) {
  const int64_t now = core_.clock.NowUnixMs();
  std::optional<Assignment> out;
  std::string log_line;
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    out.reset();
    MEDPROF_ASSIGN_OR_RETURN(AgentRecord agent, LoadAgent(tx, r.agent_id));
    MEDPROF_RETURN_IF_ERROR(tx.TouchAgent(agent.agent_id, now, agent.draining));
    if (agent.draining) return absl::OkStatus();
    MEDPROF_ASSIGN_OR_RETURN(std::vector<RunRecord> running, RunningRunsOf(tx, agent.agent_id));
    if (static_cast<int>(running.size()) >= agent.max_concurrent_jobs) return absl::OkStatus();

    std::set<int> busy;
    for (const RunRecord& run : running) busy.insert(run.device_index);
    const std::set<int> offered(r.free_device_indexes.begin(), r.free_device_indexes.end());
    const selector::Agent facts = SelectorAgent(agent);

    MEDPROF_ASSIGN_OR_RETURN(std::vector<JobRecord> queued, tx.ListQueuedJobs(kMaxQueuedScan));
    for (JobRecord& job : queued) {
      // Agent-level keys first: most jobs of a busy queue are for other agents, and that test
      // needs no decoding of the config.
      absl::StatusOr<selector::Selector> target = selector::Parse(job.target);
      if (target.ok() && !selector::MatchesAgent(*target, facts)) continue;
      v1::WorkloadConfig config;
      MEDPROF_RETURN_IF_ERROR(FromJson(job.config_json, &config, absl::StrCat("config of job ", job.job_id)));
      absl::StatusOr<selector::Selector> sel = JobSelector(job.target, config);
      if (!sel.ok()) {
        kLog.Warn("job {}: stored target '{}' does not parse: {}", job.job_id, job.target, sel.status().ToString());
        continue;
      }
      std::optional<size_t> chosen;
      for (size_t pos : EligibleDevices(*sel, facts)) {
        const int index = facts.devices[pos].index;
        if (busy.count(index) != 0) continue;
        if (!offered.empty() && offered.count(index) == 0) continue;
        chosen = pos;
        break;
      }
      if (!chosen.has_value()) continue;

      const DeviceRecord& device = agent.devices[*chosen];
      RunRecord run;
      run.run_id = NewId("run");
      run.job_id = job.job_id;
      run.study_id = job.study_id;
      run.agent_id = agent.agent_id;
      run.attempt = job.attempts + 1;
      run.device_index = device.index;
      run.state = RunState::kRunning;
      run.lease_expires_unix_ms = now + core_.options.lease_ttl_ms;
      run.started_unix_ms = now;
      MEDPROF_RETURN_IF_ERROR(tx.InsertRun(run));

      job.attempts = run.attempt;
      job.state = JobState::kRunning;
      job.current_run_id = run.run_id;
      job.progress_json.clear();
      const std::string where = absl::StrCat("agent ", agent.name, " (device ", device.index, ": ", device.name, ")");
      MEDPROF_RETURN_IF_ERROR(RecordJobChange(tx, now, job, run.run_id,
                                              absl::StrCat(AttemptText(job), " on ", where)));
      Assignment a;
      a.run_id = run.run_id;
      a.job_id = job.job_id;
      a.study_id = job.study_id;
      a.attempt = run.attempt;
      a.config = std::move(config);
      a.device_index = device.index;
      a.timeout_s = job.timeout_s;
      a.lease_ttl_ms = core_.options.lease_ttl_ms;
      out = std::move(a);
      log_line = absl::StrCat("job ", job.job_id, " (", job.preset, ") leased as ", run.run_id, ", ",
                              AttemptText(job), ", to ", where);
      return absl::OkStatus();
    }
    return absl::OkStatus();
  }));
  if (out.has_value()) kLog.Info("{}", log_line);
  return out;
}

// ---------------------------------------------------------------- finish

namespace {

// A finish for a run that has already ended: OK when it repeats the same end (answered again),
// FAILED_PRECONDITION saying why otherwise.
absl::Status RepeatedFinish(const RunRecord& run, const JobRecord& job, RunState reported) {
  if (run.state == reported) return absl::OkStatus();
  if (run.state == RunState::kLost) {
    return absl::FailedPreconditionError(absl::StrCat("run ", run.run_id, " is lost: ", run.error,
                                                      "; the server no longer accepts it (job ", job.job_id, " is ",
                                                      JobStateName(job.state), ")"));
  }
  return absl::FailedPreconditionError(absl::StrCat("run ", run.run_id, " already finished as ",
                                                    RunStateName(run.state), "; it cannot finish again as ",
                                                    RunStateName(reported)));
}

// The agent's facts (host, Slurm, container) complete the worker's environment of `run`; the
// worker's own values win where both are set.
absl::Status MergeAgentEnvironment(StoreTx& tx, const v1::Environment& agent, RunRecord& run) {
  v1::Environment env = agent;
  v1::Environment worker;
  MEDPROF_RETURN_IF_ERROR(FromJson(run.environment_json, &worker, absl::StrCat("environment of run ", run.run_id)));
  env.MergeFrom(worker);
  run.environment_json = ToJson(env);
  if (run.gpu_name.empty()) run.gpu_name = env.gpu_name();
  return tx.UpdateRunResults(run);
}

// Moves `job` to where the end of its current run (`run`, already in its final state) takes it:
// done, failed, requeued while attempts remain, or cancelled. Returns the event's message.
std::string MoveJobAfterRun(JobRecord& job, const RunRecord& run, const std::string& error,
                            const std::string& stderr_tail) {
  std::string message;
  switch (run.state) {
    case RunState::kSucceeded:
      job.state = JobState::kSucceeded;
      job.error.clear();
      message = absl::StrCat("on ", AttemptText(job));
      break;
    case RunState::kFailed: {
      job.state = JobState::kFailed;
      job.error = absl::StrCat("failed on ", AttemptText(job), ": ", error);
      if (!stderr_tail.empty()) {
        absl::StrAppend(&job.error, "\n--- worker stderr (last lines) ---\n", Tail(stderr_tail, kJobStderrBytes));
      }
      message = absl::StrCat(error, " (", AttemptText(job), ")");
      break;
    }
    case RunState::kInterrupted: {
      const std::string why = error.empty() ? "interrupted" : absl::StrCat("interrupted (", error, ")");
      if (job.attempts < job.max_attempts) {
        job.state = JobState::kQueued;
        message = absl::StrCat("requeued: run ", run.run_id, " ", why, " on ", AttemptText(job));
      } else {
        job.state = JobState::kFailed;
        job.error = absl::StrCat(why, " on ", AttemptText(job), "; no attempts left");
        message = job.error;
      }
      break;
    }
    case RunState::kCancelled:
      job.state = JobState::kCancelled;
      job.error = error.empty() ? "cancelled by the agent" : absl::StrCat("cancelled by the agent: ", error);
      message = error.empty() ? "by the agent" : absl::StrCat("by the agent: ", error);
      break;
    default:
      break;
  }
  return message;
}

}  // namespace

absl::StatusOr<JobState> Scheduler::FinishRun(const CallContext&, const FinishRunRequest& r) {
  MEDPROF_RETURN_IF_ERROR(RequireId(r.agent_id, "agent_id"));
  MEDPROF_RETURN_IF_ERROR(RequireId(r.run_id, "run_id"));
  if (r.state != RunState::kSucceeded && r.state != RunState::kFailed && r.state != RunState::kInterrupted &&
      r.state != RunState::kCancelled) {
    return absl::InvalidArgumentError(absl::StrCat("state: '", RunStateName(r.state),
                                                   "' is not a state an agent reports (allowed succeeded|failed|"
                                                   "interrupted|cancelled)"));
  }
  // A failure report is never refused for its length (the run would stay running until its
  // lease expired): the head of the error and the tail of stderr are kept.
  const std::string stderr_tail = Tail(r.stderr_tail, limits::kMaxRunStderrBytes);
  const std::string reported_error =
      r.error.size() <= limits::kMaxRunErrorBytes ? r.error : absl::StrCat(r.error.substr(0, limits::kMaxRunErrorBytes), " ... (truncated)");
  const int64_t now = core_.clock.NowUnixMs();
  JobState job_state = JobState::kUnspecified;
  bool changed = false;
  std::string log_line;
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    changed = false;
    MEDPROF_ASSIGN_OR_RETURN(std::optional<RunRecord> run_or, tx.GetRun(r.run_id));
    if (!run_or.has_value()) return absl::NotFoundError(absl::StrCat("run_id: no run '", r.run_id, "'"));
    RunRecord run = *std::move(run_or);
    if (run.agent_id != r.agent_id) {
      return absl::PermissionDeniedError(absl::StrCat("run ", run.run_id, " was leased to agent ", run.agent_id,
                                                      "; agent ", r.agent_id, " may not finish it"));
    }
    MEDPROF_ASSIGN_OR_RETURN(std::optional<JobRecord> job_or, tx.GetJob(run.job_id));
    if (!job_or.has_value()) return absl::DataLossError(absl::StrCat("run ", run.run_id, ": its job is missing"));
    JobRecord job = *std::move(job_or);

    if (run.state != RunState::kRunning) {
      job_state = job.state;
      return RepeatedFinish(run, job, r.state);  // OK when it repeats the same end
    }
    if (r.last_seq > run.chunks_through) {
      MEDPROF_ASSIGN_OR_RETURN(std::vector<uint64_t> stored,
                               tx.ListChunkSeqs(run.run_id, run.chunks_through, 1'000'000));
      return absl::FailedPreconditionError(absl::StrCat(
          "run ", run.run_id, ": ", DescribeGaps(run.chunks_through, stored, r.last_seq), ", resend"));
    }

    if (r.agent_environment.has_value()) {
      MEDPROF_RETURN_IF_ERROR(MergeAgentEnvironment(tx, *r.agent_environment, run));
    }

    std::string error = reported_error;
    if (error.empty() && !run.error.empty()) error = run.error;  // the worker's own WorkerError
    if (error.empty() && r.state == RunState::kFailed) {
      error = absl::StrCat("the worker failed with exit code ", r.exit_code, " and no error message");
    }
    run.state = r.state;
    run.error = error;
    run.stderr_tail = stderr_tail;
    run.exit_code = r.exit_code;
    run.finished_unix_ms = now;
    MEDPROF_RETURN_IF_ERROR(tx.UpdateRunState(run));
    changed = true;

    if (IsTerminal(job.state) || job.current_run_id != run.run_id) {
      // The job moved on (cancelled meanwhile): the run's end is recorded, the job stays.
      job_state = job.state;
      log_line = absl::StrCat("run ", run.run_id, " ended as ", RunStateName(run.state), "; job ", job.job_id,
                              " stays ", JobStateName(job.state));
      return tx
          .AppendEvent(JobEvent(job, run.run_id, now,
                                absl::StrCat("run ", run.run_id, " ended as ", RunStateName(run.state))))
          .status();
    }

    const std::string message = MoveJobAfterRun(job, run, error, stderr_tail);
    MEDPROF_RETURN_IF_ERROR(RecordJobChange(tx, now, job, run.run_id, message));
    job_state = job.state;
    log_line = absl::StrCat("run ", run.run_id, " ended as ", RunStateName(run.state), "; job ", job.job_id, " ",
                            JobStateName(job.state));
    return absl::OkStatus();
  }));
  if (changed) {
    kLog.Info("{}", log_line);
    core_.events.Notify();
    core_.work.Notify();  // a device slot is free again, and a requeued job may be waiting
  }
  return job_state;
}

// ---------------------------------------------------------------- leases

absl::StatusOr<int> Scheduler::ExpireLeases() {
  const int64_t now = core_.clock.NowUnixMs();
  int expired = 0;
  std::vector<std::string> log_lines;
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    expired = 0;
    log_lines.clear();
    MEDPROF_ASSIGN_OR_RETURN(std::vector<RunRecord> runs, tx.ListExpiredRuns(now));
    for (RunRecord& run : runs) {
      MEDPROF_ASSIGN_OR_RETURN(std::optional<AgentRecord> agent, tx.GetAgent(run.agent_id));
      const std::string agent_name = agent.has_value() ? agent->name : run.agent_id;
      const std::string cause = absl::StrCat("agent ", agent_name, " stopped heartbeating");
      run.state = RunState::kLost;
      run.error = absl::StrCat("lease expired: ", cause);
      run.finished_unix_ms = now;
      MEDPROF_RETURN_IF_ERROR(tx.UpdateRunState(run));
      ++expired;

      MEDPROF_ASSIGN_OR_RETURN(std::optional<JobRecord> job_or, tx.GetJob(run.job_id));
      if (!job_or.has_value()) continue;
      JobRecord job = *std::move(job_or);
      if (job.state != JobState::kRunning || job.current_run_id != run.run_id) {
        log_lines.push_back(absl::StrCat("run ", run.run_id, " lost (", cause, "); job ", job.job_id, " stays ",
                                         JobStateName(job.state)));
        continue;
      }
      std::string message;
      if (job.attempts < job.max_attempts) {
        job.state = JobState::kQueued;
        message = absl::StrCat("requeued: lease expired on ", AttemptText(job), ": ", cause);
      } else {
        job.state = JobState::kFailed;
        job.error = absl::StrCat("lease expired on ", AttemptText(job), ": ", cause);
        message = job.error;
      }
      MEDPROF_RETURN_IF_ERROR(RecordJobChange(tx, now, job, run.run_id, message));
      log_lines.push_back(absl::StrCat("run ", run.run_id, " lost; job ", job.job_id, " ", message));
    }
    return absl::OkStatus();
  }));
  for (const std::string& line : log_lines) kLog.Warn("{}", line);
  if (expired > 0) {
    core_.events.Notify();
    core_.work.Notify();
  }
  return expired;
}

}  // namespace medprof::server
