// Runs one assignment in one fresh worker process and records everything it reports.
//
// A JobRunner owns a thread that launches the worker (so the worker's PR_SET_PDEATHSIG is
// tied to a thread that outlives it), plus a reader thread that takes the worker's records
// off the result channel (common/result_stream.h), appends each to the run's spool as the
// next seq (fsync'ed before it counts) and keeps the latest Progress. The runner enforces
// the assignment's timeout_s and carries out Stop() requests (cancel, agent SIGTERM): SIGTERM
// to the worker's process group, SIGKILL after the grace. When the worker has exited and its
// channel is closed, the runner classifies the run (outcome.h), writes outcome.pb and calls
// on_finished. A spool write error stops the worker and fails the run with the cause; the
// reader keeps draining the channel so the worker never blocks on it.
//
// Thread-safe: Stop/progress/finished may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

#include "agent/agent/launcher.h"
#include "agent/agent/outcome.h"
#include "agent/agent/spool.h"
#include "medprof/v1/service.pb.h"

namespace medprof::agent {

struct RunnerOptions {
  // SIGTERM -> SIGKILL grace for a timeout or a cancel, in ms (default 10000).
  int64_t kill_grace_ms = 10'000;
  // After the worker exited, how long its result channel may stay open (a child of the
  // worker still holding it) before the process group is SIGKILLed, in ms (default 2000).
  int64_t channel_close_ms = 2'000;
  // How often the runner checks the worker, in ms (default 50).
  int64_t poll_ms = 50;
};

struct RunnerCallbacks {
  // Before the worker starts, on the runner's thread: readies what the worker needs (the job's
  // user model) and returns arguments to append to its argv. An error fails the run with that
  // message and no worker starts; Stop() does not interrupt it. May be empty.
  std::function<absl::StatusOr<std::vector<std::string>>()> prepare;
  // A chunk became durable in the spool (wake the uploader). May be empty.
  std::function<void()> on_chunk;
  // The run ended and its outcome is recorded. Called on the runner's thread, last.
  std::function<void(const std::string& run_id)> on_finished;
};

class JobRunner {
 public:
  // `agent_environment` goes into the outcome as is. `launcher` must outlive the runner.
  JobRunner(std::shared_ptr<RunSpool> spool, v1::Assignment assignment, LaunchSpec launch,
            v1::Environment agent_environment, WorkerLauncher* launcher, RunnerOptions options,
            RunnerCallbacks callbacks);
  // Joins the threads (the worker is stopped first if still running).
  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  void Start();
  // Asks the worker to stop: SIGTERM now, SIGKILL after grace_ms. The first reason is the
  // one recorded; a later call can only shorten the grace.
  void Stop(StopReason reason, int64_t grace_ms);
  // Waits for the run to end (outcome written).
  void Join();

  const std::string& run_id() const { return assignment_.run_id(); }
  int device_index() const { return assignment_.device_index(); }
  std::optional<v1::Progress> progress() const;
  bool finished() const;

 private:
  void Run();
  void ReadChannel(int fd);
  void Finish(const Verdict& verdict, int32_t exit_code);

  const std::shared_ptr<RunSpool> spool_;
  const v1::Assignment assignment_;
  const LaunchSpec launch_;
  const v1::Environment agent_environment_;
  WorkerLauncher* const launcher_;
  const RunnerOptions options_;
  const RunnerCallbacks callbacks_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  StopReason stop_ = StopReason::kNone;
  std::string stop_detail_;
  int64_t kill_at_ns_ = 0;  // 0 = no SIGKILL scheduled
  bool term_sent_ = false;
  bool exited_ = false;  // the worker has been reaped: stops no longer change the verdict
  bool channel_closed_ = false;
  bool finished_ = false;
  std::optional<v1::Progress> progress_;
  StreamFacts stream_;

  std::thread thread_;
  std::thread reader_;
};

}  // namespace medprof::agent
