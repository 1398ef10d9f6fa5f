#include "agent/agent/job_runner.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/result_stream.h"

namespace medprof::agent {
namespace {

const Logger kLog("agent.runner");

constexpr int64_t kNsPerMs = 1'000'000;

}  // namespace

JobRunner::JobRunner(std::shared_ptr<RunSpool> spool, v1::Assignment assignment, LaunchSpec launch,
                     v1::Environment agent_environment, WorkerLauncher* launcher, RunnerOptions options,
                     RunnerCallbacks callbacks)
    : spool_(std::move(spool)),
      assignment_(std::move(assignment)),
      launch_(std::move(launch)),
      agent_environment_(std::move(agent_environment)),
      launcher_(launcher),
      options_(options),
      callbacks_(std::move(callbacks)) {}

JobRunner::~JobRunner() {
  Stop(StopReason::kInterrupted, 0);
  Join();
}

void JobRunner::Start() {
  thread_ = std::thread([this] { Run(); });
}

void JobRunner::Join() {
  if (thread_.joinable()) thread_.join();
}

void JobRunner::Stop(StopReason reason, int64_t grace_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || exited_) return;
  if (stop_ == StopReason::kNone) stop_ = reason;
  const int64_t kill_at = MonotonicNs() + grace_ms * kNsPerMs;
  if (kill_at_ns_ == 0 || kill_at < kill_at_ns_) kill_at_ns_ = kill_at;
  cv_.notify_all();
}

std::optional<v1::Progress> JobRunner::progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  return progress_;
}

bool JobRunner::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

void JobRunner::ReadChannel(int fd) {
  ResultReader reader(fd, /*owns_fd=*/false);
  bool spool_failed = false;
  for (;;) {
    v1::WorkerMessage message;
    absl::StatusOr<bool> more = reader.Next(&message);
    if (!more.ok()) {
      if (absl::IsInvalidArgument(more.status())) {
        // The framing held; only this record's bytes are bad. Skip it, keep reading.
        kLog.Error("run {}: {}", run_id(), std::string(more.status().message()));
        std::lock_guard<std::mutex> lock(mu_);
        if (stream_.problem.empty()) {
          stream_.problem =
              absl::StrCat("the worker wrote an unreadable result record (", more.status().message(), ")");
        }
        continue;
      }
      // A record cut short (the worker died mid-write) or a broken size prefix: the complete
      // records are kept; drain whatever else comes so the worker never blocks on the pipe.
      kLog.Warn("run {}: result channel: {}", run_id(), std::string(more.status().message()));
      {
        std::lock_guard<std::mutex> lock(mu_);
        stream_.problem =
            absl::StrCat("the last result record was cut short (", more.status().message(), ")");
      }
      char sink[65536];
      for (;;) {
        const ssize_t r = ::read(fd, sink, sizeof sink);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
      }
      break;
    }
    if (!*more) break;           // clean end of stream
    if (spool_failed) continue;  // keep draining; nothing more can be kept
    if (absl::Status s = spool_->Append(message); !s.ok()) {
      kLog.Error("run {}: spool write failed, stopping the worker: {}", run_id(), std::string(s.message()));
      spool_failed = true;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_ == StopReason::kNone) stop_ = StopReason::kSpoolError;
        if (stop_ == StopReason::kSpoolError) stop_detail_ = std::string(s.message());
      }
      Stop(StopReason::kSpoolError, options_.kill_grace_ms);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      switch (message.body_case()) {
        case v1::WorkerMessage::kProgress:
          progress_ = message.progress();
          break;
        case v1::WorkerMessage::kSummary:
          stream_.saw_summary = true;
          break;
        case v1::WorkerMessage::kError:
          stream_.error = message.error();
          break;
        default:
          break;
      }
    }
    if (callbacks_.on_chunk) callbacks_.on_chunk();
  }
  std::lock_guard<std::mutex> lock(mu_);
  channel_closed_ = true;
  cv_.notify_all();
}

void JobRunner::Run() {
  LaunchSpec launch = launch_;
  if (callbacks_.prepare) {
    absl::StatusOr<std::vector<std::string>> extra = callbacks_.prepare();
    if (!extra.ok()) {
      kLog.Error("run {}: not started: {}", run_id(), std::string(extra.status().message()));
      Finish({v1::RUN_FAILED, std::string(extra.status().message())}, 127);
      return;
    }
    launch.argv.insert(launch.argv.end(), extra->begin(), extra->end());
  }
  absl::StatusOr<std::unique_ptr<WorkerProcess>> launched = launcher_->Launch(launch);
  if (!launched.ok()) {
    kLog.Error("run {}: could not start the worker: {}", run_id(), std::string(launched.status().message()));
    // Not the workload's fault: INTERRUPTED lets the server requeue the job elsewhere.
    Finish({v1::RUN_INTERRUPTED, absl::StrCat("could not start the worker: ", launched.status().message())},
           127);
    return;
  }
  std::unique_ptr<WorkerProcess> worker = *std::move(launched);
  kLog.Info("run {}: worker pid {} started on device {}", run_id(), worker->pid(), device_index());
  const int fd = worker->result_fd();
  reader_ = std::thread([this, fd] { ReadChannel(fd); });

  const int64_t started = MonotonicNs();
  const int64_t deadline =
      assignment_.timeout_s() > 0 ? started + assignment_.timeout_s() * 1'000'000'000LL : 0;
  bool kill_sent = false;
  std::optional<WorkerExit> exit;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    lock.unlock();
    exit = worker->TryWait();
    lock.lock();
    if (exit.has_value()) {
      exited_ = true;
      break;
    }
    const int64_t now = MonotonicNs();
    if (deadline != 0 && now >= deadline && stop_ == StopReason::kNone) {
      stop_ = StopReason::kTimeout;
      stop_detail_ = absl::StrCat(assignment_.timeout_s());
      kill_at_ns_ = now + options_.kill_grace_ms * kNsPerMs;
      kLog.Warn("run {}: timeout after {} s, stopping the worker", run_id(), assignment_.timeout_s());
    }
    if (stop_ != StopReason::kNone && !term_sent_) {
      term_sent_ = true;
      if (absl::Status s = worker->Signal(SIGTERM); !s.ok())
        kLog.Warn("run {}: {}", run_id(), std::string(s.message()));
    }
    if (kill_at_ns_ != 0 && now >= kill_at_ns_ && !kill_sent) {
      kill_sent = true;
      kLog.Warn("run {}: worker did not stop after SIGTERM, sending SIGKILL", run_id());
      if (absl::Status s = worker->Signal(SIGKILL); !s.ok())
        kLog.Warn("run {}: {}", run_id(), std::string(s.message()));
    }
    cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_ms));
  }
  // The worker is gone; its channel closes when every holder of the write end is gone too.
  if (!cv_.wait_for(lock, std::chrono::milliseconds(options_.channel_close_ms),
                    [this] { return channel_closed_; })) {
    kLog.Warn("run {}: result channel still open after the worker exited; killing its process group",
              run_id());
    lock.unlock();
    (void)worker->Signal(SIGKILL);
    lock.lock();
  }
  lock.unlock();
  reader_.join();
  lock.lock();
  const StreamFacts stream = stream_;
  const StopReason stop = stop_;
  const std::string detail = stop_detail_;
  lock.unlock();
  const Verdict verdict = Classify(*exit, stream, stop, detail);
  kLog.Info("run {}: worker ended with {} after {} ms: {}{}{}", run_id(), exit->Describe(),
            (MonotonicNs() - started) / kNsPerMs, v1::RunState_Name(verdict.state),
            verdict.error.empty() ? "" : " - ", verdict.error);
  worker.reset();
  Finish(verdict, exit->ReportedCode());
}

void JobRunner::Finish(const Verdict& verdict, int32_t exit_code) {
  v1::FinishRunRequest outcome;
  outcome.set_run_id(run_id());
  outcome.set_state(verdict.state);
  outcome.set_error(ToValidUtf8(verdict.error));
  outcome.set_stderr_tail(StderrTail(spool_->stderr_path()));
  outcome.set_last_seq(spool_->last_seq());
  outcome.set_exit_code(exit_code);
  *outcome.mutable_agent_environment() = agent_environment_;
  if (absl::Status s = spool_->WriteOutcome(outcome); !s.ok()) {
    // Kept in memory: the uploader can still finish the run while this process lives.
    kLog.Error("run {}: could not record the outcome on disk: {}", run_id(), std::string(s.message()));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
  }
  if (callbacks_.on_finished) callbacks_.on_finished(run_id());
}

}  // namespace medprof::agent
