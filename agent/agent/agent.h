// medprof-agent's daemon: registers with the server, takes jobs for free devices, runs each
// in a fresh worker (JobRunner), keeps the server's lease alive with heartbeats, uploads the
// results (Uploader) and drains cleanly on SIGTERM.
//
// Lifecycle: Create -> Start (resumes every run left in the spool, starts the threads) ->
// Wait (returns once drained; OK = exit 0) ; Drain(reason) may come from any thread, e.g.
// the signal thread. Threads: control (register with backoff, AcquireJob long-poll while a
// device is free), heartbeat, uploader, one or two per running job.
//
// The server's answers, as this agent reads them:
//   Register FAILED_PRECONDITION / INVALID_ARGUMENT / UNAUTHENTICATED / PERMISSION_DENIED:
//       fatal (protocol version, bad name, bad token) — the agent drains and Wait fails;
//   UNAVAILABLE / DEADLINE_EXCEEDED anywhere: the server is unreachable — logged once; the
//       control thread registers again with capped exponential backoff (same name, so the
//       same agent) before it acquires again, while heartbeats and uploads go on with the
//       known agent id (the leases of running jobs must not lapse meanwhile);
//   Heartbeat or AcquireJob NOT_FOUND: the server does not know this agent id: register again;
//   HeartbeatResponse.cancel_run_ids: stop those workers, runs end CANCELLED;
//   HeartbeatResponse.unknown_run_ids: stop those workers (the server moved on); their
//       results are then refused and dropped (uploader.h).
// A job naming a user model first fetches it (FetchModel, resumed, hash-checked) into the
// bounded cache <work dir>/models (model_cache.h); a fetch that fails ends the run FAILED with
// the cause, the worker never started.
//
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/agent/backoff.h"
#include "agent/agent/host_facts.h"
#include "agent/agent/inventory.h"
#include "agent/agent/job_runner.h"
#include "agent/agent/launcher.h"
#include "agent/agent/model_cache.h"
#include "agent/agent/uplink.h"
#include "agent/agent/uploader.h"
#include "agent/agent/work_dir.h"

namespace medprof::agent {

struct AgentConfig {
  std::string name;                           // validated agent name
  std::string worker_path;                    // medprof-worker executable
  int max_jobs = 1;                           // 1..inventory size
  int64_t drain_timeout_ms = 90'000;          // SIGTERM -> exit budget
  std::map<std::string, std::string> labels;  // registered labels
  HostFacts facts;
  Inventory inventory;
  std::string server;  // for messages
  // Tunables (tests shorten them).
  int64_t acquire_wait_ms = 10'000;      // AcquireJob long-poll
  int64_t default_heartbeat_ms = 5'000;  // when the server sends no interval
  BackoffOptions register_backoff;       // reconnect / register retries
  uint64_t model_cache_bytes = uint64_t{8} << 30;  // <work dir>/models: user models, LRU out
  RunnerOptions runner;
  UploaderOptions uploader;
};

class Agent {
 public:
  static absl::StatusOr<std::unique_ptr<Agent>> Create(AgentConfig config, std::unique_ptr<WorkDir> work_dir,
                                                       std::unique_ptr<Uplink> uplink,
                                                       std::unique_ptr<WorkerLauncher> launcher);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Resumes the spool and starts the threads.
  absl::Status Start();
  // Begins the graceful stop: no more jobs, workers get SIGTERM (SIGKILL before the deadline
  // leaves time to upload), runs end INTERRUPTED, uploads and FinishRun are flushed.
  void Drain(const std::string& reason);
  // Blocks until the agent has drained. OK when drained; the fatal error that ended it
  // otherwise. Runs not flushed by the deadline stay in the spool for the next start.
  absl::Status Wait();

  // Successful registrations so far (tests).
  int registrations() const;

 private:
  Agent(AgentConfig config, std::unique_ptr<WorkDir> work_dir, std::unique_ptr<Uplink> uplink,
        std::unique_ptr<WorkerLauncher> launcher, std::unique_ptr<ModelCache> model_cache);

  void ControlLoop();
  void HeartbeatLoop();
  absl::Status Register();
  void StartAssignment(const v1::Assignment& assignment);
  // The worker arguments of the assignment's user model: fetched into the cache (model_cache.h),
  // hard-linked into the run directory under its uploaded name (so eviction cannot remove it
  // mid-run and the run records that name), `--model <that path>`. Errors name the model.
  absl::StatusOr<std::vector<std::string>> PrepareModel(const v1::Assignment& a, const std::string& run_dir);
  // Records an outcome for a run that got no worker (draining, bad device) and hands it on.
  void FinishWithoutWorker(std::shared_ptr<RunSpool> spool, v1::RunState state, const std::string& error);
  void OnRunFinished(const std::string& run_id);
  void OnRunRejected(const std::string& run_id, const std::string& reason);
  void OnTransportError(const absl::Status& s);
  void OnServerOk();
  void ReapFinishedRunners();
  std::vector<int> FreeDevicesLocked() const;
  bool WaitFor(int64_t ms);  // false when draining began

  const AgentConfig config_;
  const std::unique_ptr<WorkDir> work_dir_;
  const std::unique_ptr<Uplink> uplink_;
  const std::unique_ptr<WorkerLauncher> launcher_;
  const std::unique_ptr<ModelCache> model_cache_;
  std::unique_ptr<Uploader> uploader_;

  mutable std::mutex mu_;
  std::condition_variable cv_;     // control loop
  std::condition_variable hb_cv_;  // heartbeat loop
  std::string agent_id_;           // "" until registered, and after the server said it does not know it
  bool registered_ = false;        // false: the control loop registers (again) before acquiring
  int registrations_ = 0;
  int64_t heartbeat_ms_ = 0;
  bool connected_ = true;  // for logging transitions only
  int64_t disconnected_since_ns_ = 0;
  bool draining_ = false;
  int64_t drain_deadline_ns_ = 0;
  bool stop_heartbeats_ = false;
  absl::Status fatal_;
  std::map<std::string, std::unique_ptr<JobRunner>> runners_;
  std::vector<std::string> finished_runners_;
  std::set<int> busy_devices_;

  std::thread control_thread_;
  std::thread heartbeat_thread_;
};

}  // namespace medprof::agent
