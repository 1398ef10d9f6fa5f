#include "agent/agent/agent.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/file_util.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/version.h"

namespace medprof::agent {
namespace {

const Logger kLog("agent");
constexpr int64_t kNsPerMs = 1'000'000;
constexpr char kDrainError[] = "agent received SIGTERM";
constexpr char kRestartError[] = "agent restarted while the run was in progress";

bool IsFatalRegisterError(const absl::Status& s) {
  return absl::IsFailedPrecondition(s) || absl::IsInvalidArgument(s) || absl::IsUnauthenticated(s) ||
         absl::IsPermissionDenied(s);
}

// Time kept for uploads and FinishRun at the end of a drain: a third of it, 1..30 s.
int64_t UploadReserveMs(int64_t drain_ms) {
  return std::clamp<int64_t>(drain_ms / 3, std::min<int64_t>(1000, drain_ms), 30'000);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Agent>> Agent::Create(AgentConfig config, std::unique_ptr<WorkDir> work_dir,
                                                     std::unique_ptr<Uplink> uplink,
                                                     std::unique_ptr<WorkerLauncher> launcher) {
  if (work_dir == nullptr || uplink == nullptr || launcher == nullptr) {
    return absl::InvalidArgumentError("Agent::Create: work_dir, uplink and launcher are required");
  }
  MEDPROF_RETURN_IF_ERROR(ValidateAgentName(config.name, "agent name"));
  if (config.worker_path.empty()) return absl::InvalidArgumentError("Agent::Create: empty worker path");
  if (config.inventory.devices.empty())
    return absl::InvalidArgumentError("Agent::Create: the inventory is empty");
  MEDPROF_ASSIGN_OR_RETURN(
      config.max_jobs, ValidateMaxJobs(config.max_jobs, static_cast<int>(config.inventory.devices.size())));
  if (config.drain_timeout_ms < 1)
    return absl::InvalidArgumentError("Agent::Create: drain_timeout_ms must be >= 1");
  MEDPROF_RETURN_IF_ERROR(ValidateBackoffOptions(config.register_backoff));
  MEDPROF_RETURN_IF_ERROR(ValidateBackoffOptions(config.uploader.backoff));
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<ModelCache> models,
                           ModelCache::Open(work_dir->path() + "/models", config.model_cache_bytes));
  return std::unique_ptr<Agent>(new Agent(std::move(config), std::move(work_dir), std::move(uplink),
                                          std::move(launcher), std::move(models)));
}

Agent::Agent(AgentConfig config, std::unique_ptr<WorkDir> work_dir, std::unique_ptr<Uplink> uplink,
             std::unique_ptr<WorkerLauncher> launcher, std::unique_ptr<ModelCache> model_cache)
    : config_(std::move(config)),
      work_dir_(std::move(work_dir)),
      uplink_(std::move(uplink)),
      launcher_(std::move(launcher)),
      model_cache_(std::move(model_cache)) {
  UploaderHooks hooks;
  hooks.agent_id = [this] {
    std::lock_guard<std::mutex> lock(mu_);
    return agent_id_;
  };
  hooks.on_transport_error = [this](const absl::Status& s) { OnTransportError(s); };
  hooks.on_server_ok = [this] { OnServerOk(); };
  hooks.on_run_rejected = [this](const std::string& run_id, const std::string& reason) {
    OnRunRejected(run_id, reason);
  };
  uploader_ = std::make_unique<Uploader>(uplink_.get(), config_.uploader, std::move(hooks));
}

Agent::~Agent() {
  if (control_thread_.joinable() || heartbeat_thread_.joinable()) {
    Drain("agent shut down");
    (void)Wait();
  }
}

absl::Status Agent::Start() {
  MEDPROF_ASSIGN_OR_RETURN(std::vector<std::string> dirs, ListRunDirs(work_dir_->spool_root()));
  int resumed = 0;
  for (const std::string& dir : dirs) {
    absl::StatusOr<std::unique_ptr<RunSpool>> opened = RunSpool::Open(dir);
    if (!opened.ok()) {
      kLog.Error("cannot resume the spool {}: {}; leaving it as it is", dir,
                 std::string(opened.status().message()));
      continue;
    }
    std::shared_ptr<RunSpool> spool = *std::move(opened);
    if (!spool->repair_note().empty()) kLog.Warn("run {}: {}", spool->run_id(), spool->repair_note());
    if (!spool->outcome().has_value()) {
      kLog.Warn("run {}: its worker died with the previous agent process; reporting it INTERRUPTED",
                spool->run_id());
      v1::FinishRunRequest outcome;
      outcome.set_run_id(spool->run_id());
      outcome.set_state(v1::RUN_INTERRUPTED);
      outcome.set_error(kRestartError);
      outcome.set_stderr_tail(StderrTail(spool->stderr_path()));
      outcome.set_last_seq(spool->last_seq());
      *outcome.mutable_agent_environment() = AgentEnvironment(config_.facts, "");
      if (absl::Status s = spool->WriteOutcome(outcome); !s.ok()) {
        kLog.Error("run {}: could not record its outcome on disk: {}", spool->run_id(),
                   std::string(s.message()));
      }
    }
    kLog.Info("run {}: resuming from the spool ({} results, {} acknowledged, outcome {})", spool->run_id(),
              spool->last_seq(), spool->acked_seq(), v1::RunState_Name(spool->outcome()->state()));
    uploader_->Add(std::move(spool));
    ++resumed;
  }
  if (resumed > 0) kLog.Info("resumed {} run(s) from {}", resumed, work_dir_->spool_root());
  uploader_->Start();
  control_thread_ = std::thread([this] { ControlLoop(); });
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  return absl::OkStatus();
}

void Agent::Drain(const std::string& reason) {
  int64_t grace_ms = 0;
  std::vector<std::string> stopping;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_) return;
    draining_ = true;
    drain_deadline_ns_ = MonotonicNs() + config_.drain_timeout_ms * kNsPerMs;
    grace_ms = config_.drain_timeout_ms - UploadReserveMs(config_.drain_timeout_ms);
    for (auto& [id, runner] : runners_) {
      if (runner->finished()) continue;
      runner->Stop(StopReason::kInterrupted, grace_ms);
      stopping.push_back(id);
    }
    cv_.notify_all();
    hb_cv_.notify_all();
  }
  kLog.Info(
      "draining ({}): taking no new jobs; stopping {} worker(s) (SIGKILL after {} ms); exit within {} ms",
      reason, stopping.size(), grace_ms, config_.drain_timeout_ms);
  uplink_->StopAcquiring();
}

absl::Status Agent::Wait() {
  if (control_thread_.joinable()) control_thread_.join();
  // Runners end on their own: the drain sent SIGTERM and scheduled SIGKILL.
  std::map<std::string, std::unique_ptr<JobRunner>> runners;
  {
    std::lock_guard<std::mutex> lock(mu_);
    runners.swap(runners_);
    finished_runners_.clear();
  }
  for (auto& [id, runner] : runners) runner->Join();
  runners.clear();
  int64_t deadline = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    deadline = drain_deadline_ns_;
  }
  uploader_->Notify();
  const std::vector<std::string> left = uploader_->WaitIdle(deadline);
  if (!left.empty()) {
    kLog.Warn(
        "{} run(s) not yet finished on the server at the drain deadline ({}); they stay in {} and the next "
        "agent start resumes them",
        left.size(), absl::StrJoin(left, ", "), work_dir_->spool_root());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_heartbeats_ = true;
    hb_cv_.notify_all();
  }
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  uploader_->Stop();
  std::lock_guard<std::mutex> lock(mu_);
  kLog.Info("drained{}", fatal_.ok() ? "" : " after a fatal error");
  return fatal_;
}

int Agent::registrations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registrations_;
}

bool Agent::WaitFor(int64_t ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return draining_; });
  return !draining_;
}

std::vector<int> Agent::FreeDevicesLocked() const {
  std::vector<int> free;
  for (const OfferedDevice& d : config_.inventory.devices) {
    if (busy_devices_.count(d.device.index()) == 0) free.push_back(d.device.index());
  }
  return free;
}

void Agent::OnTransportError(const absl::Status& s) {
  bool ever_registered = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!connected_) return;
    connected_ = false;
    disconnected_since_ns_ = MonotonicNs();
    ever_registered = registrations_ > 0;
  }
  kLog.Warn("{} the server {}: {}; retrying with backoff", ever_registered ? "lost" : "cannot reach",
            config_.server, s.ToString());
}

void Agent::OnServerOk() {
  int64_t since = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (connected_) return;
    connected_ = true;
    since = disconnected_since_ns_;
  }
  kLog.Info("server {} reachable after {:.1f} s", config_.server,
            static_cast<double>(MonotonicNs() - since) / 1e9);
}

absl::Status Agent::Register() {
  v1::RegisterRequest request;
  request.set_protocol_version(static_cast<v1::ProtocolVersion>(kProtocolVersion));
  request.set_agent_name(config_.name);
  request.set_host(config_.facts.host);
  request.set_version(kVersion);
  for (const OfferedDevice& d : config_.inventory.devices) *request.add_devices() = d.device;
  for (const auto& [k, v] : config_.labels) (*request.mutable_labels())[k] = v;
  request.set_max_concurrent_jobs(config_.max_jobs);
  absl::StatusOr<v1::RegisterResponse> response = uplink_->Register(request);
  if (!response.ok()) {
    if (IsTransportError(response.status())) OnTransportError(response.status());
    return response.status();
  }
  OnServerOk();
  if (response->agent_id().empty())
    return absl::InternalError("Register: the server answered without an agent_id");
  int64_t heartbeat_ms = response->heartbeat_interval_ms() > 0 ? response->heartbeat_interval_ms()
                                                               : config_.default_heartbeat_ms;
  heartbeat_ms = std::clamp<int64_t>(heartbeat_ms, 50, 600'000);
  int count = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    agent_id_ = response->agent_id();
    registered_ = true;
    count = ++registrations_;
    heartbeat_ms_ = heartbeat_ms;
    hb_cv_.notify_all();
  }
  kLog.Info("{} with {} as agent {} (name {}, {} device(s), max {} job(s), server {}); heartbeat every {} ms",
            count == 1 ? "registered" : "registered again", config_.server, response->agent_id(),
            config_.name, config_.inventory.devices.size(), config_.max_jobs, response->server_version(),
            heartbeat_ms);
  if (response->lease_ttl_ms() > 0 && heartbeat_ms * 2 > response->lease_ttl_ms()) {
    kLog.Warn("heartbeat interval {} ms is more than half the lease of {} ms", heartbeat_ms,
              response->lease_ttl_ms());
  }
  uploader_->Notify();
  return absl::OkStatus();
}

void Agent::ControlLoop() {
  Backoff backoff(config_.register_backoff);
  for (;;) {
    ReapFinishedRunners();
    bool registered = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (draining_) return;
      registered = registered_;
    }
    if (!registered) {
      const absl::Status s = Register();
      if (s.ok()) {
        backoff.Reset();
        continue;
      }
      if (IsFatalRegisterError(s)) {
        kLog.Error("the server {} refused this agent: {}", config_.server, s.ToString());
        {
          std::lock_guard<std::mutex> lock(mu_);
          fatal_ = Annotate(s, absl::StrCat("registering with ", config_.server));
        }
        Drain("the server refused the agent");
        return;
      }
      const int64_t delay_ms = backoff.NextDelayMs();
      kLog.Warn("cannot register with {}: {}; retrying in {:.1f} s (attempt {})", config_.server,
                s.ToString(), static_cast<double>(delay_ms) / 1000.0, backoff.attempt());
      if (!WaitFor(delay_ms)) return;
      continue;
    }

    v1::AcquireJobRequest request;
    {
      std::unique_lock<std::mutex> lock(mu_);
      const std::vector<int> free = FreeDevicesLocked();
      const size_t live = runners_.size() - finished_runners_.size();
      if (free.empty() || live >= static_cast<size_t>(config_.max_jobs)) {
        cv_.wait_for(lock, std::chrono::seconds(1),
                     [this] { return draining_ || !finished_runners_.empty() || !registered_; });
        continue;
      }
      request.set_agent_id(agent_id_);
      for (int index : free) request.add_free_device_indexes(index);
      request.set_wait_ms(static_cast<int32_t>(config_.acquire_wait_ms));
    }
    absl::StatusOr<v1::AcquireJobResponse> response = uplink_->AcquireJob(request);
    if (!response.ok()) {
      const absl::Status& s = response.status();
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (draining_) return;
      }
      if (absl::IsNotFound(s) || IsTransportError(s)) {
        if (absl::IsNotFound(s)) {
          kLog.Warn("the server does not know agent {} ({}); registering again", request.agent_id(),
                    std::string(s.message()));
        } else {
          OnTransportError(s);
        }
        std::lock_guard<std::mutex> lock(mu_);
        registered_ = false;
        // An unknown id is useless; after a transport error it stays valid and keeps the
        // heartbeats (and with them the leases of running jobs) going while we register again.
        if (absl::IsNotFound(s) && agent_id_ == request.agent_id()) agent_id_.clear();
        continue;
      }
      const int64_t delay_ms = backoff.NextDelayMs();
      kLog.Warn("{}; retrying in {:.1f} s (attempt {})", s.ToString(), static_cast<double>(delay_ms) / 1000.0,
                backoff.attempt());
      if (!WaitFor(delay_ms)) return;
      continue;
    }
    OnServerOk();
    backoff.Reset();
    if (response->has_assignment()) StartAssignment(response->assignment());
  }
}

void Agent::HeartbeatLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  bool was_draining = false;
  while (!stop_heartbeats_) {
    const int64_t interval = heartbeat_ms_ > 0 ? heartbeat_ms_ : config_.default_heartbeat_ms;
    // Wake early when the server states its interval (the first registration: heartbeat at
    // once, then at its pace — its lease may be shorter than our default interval), and for
    // the first heartbeat after draining began, so the server stops offering jobs at once.
    hb_cv_.wait_for(lock, std::chrono::milliseconds(interval), [&] {
      return stop_heartbeats_ || (!agent_id_.empty() && heartbeat_ms_ != interval) ||
             (draining_ && !was_draining && !agent_id_.empty());
    });
    // Stopping: one last heartbeat when the server has not yet heard of the drain (an idle agent
    // can reach the end of Wait before this thread ran), so it never offers this agent a job again.
    if (stop_heartbeats_ && !(draining_ && !was_draining && !agent_id_.empty())) break;
    if (agent_id_.empty()) continue;  // not registered yet, or the server forgot this id
    was_draining = draining_;
    v1::HeartbeatRequest request;
    request.set_agent_id(agent_id_);
    request.set_draining(draining_);
    for (const auto& [id, runner] : runners_) {
      if (runner->finished()) continue;
      if (std::optional<v1::Progress> p = runner->progress(); p.has_value()) {
        v1::RunProgress* rp = request.add_progress();
        rp->set_run_id(id);
        *rp->mutable_progress() = *p;
      }
    }
    lock.unlock();
    for (const std::string& id : uploader_->RunIds()) request.add_running_run_ids(id);
    absl::StatusOr<v1::HeartbeatResponse> response = uplink_->Heartbeat(request);
    if (response.ok()) {
      OnServerOk();
    } else if (IsTransportError(response.status())) {
      OnTransportError(response.status());
    }
    lock.lock();
    if (!response.ok()) {
      if (absl::IsNotFound(response.status())) {
        kLog.Warn("the server does not know agent {} ({}); registering again", request.agent_id(),
                  std::string(response.status().message()));
        registered_ = false;
        if (agent_id_ == request.agent_id()) agent_id_.clear();
        cv_.notify_all();
      } else if (!IsTransportError(response.status())) {
        kLog.Warn("{}", response.status().ToString());
      }
      continue;
    }
    for (const std::string& id : response->cancel_run_ids()) {
      auto it = runners_.find(id);
      if (it == runners_.end() || it->second->finished()) continue;
      kLog.Info("run {}: cancelled by the server; stopping its worker", id);
      it->second->Stop(StopReason::kCancelled, config_.runner.kill_grace_ms);
    }
    for (const std::string& id : response->unknown_run_ids()) {
      auto it = runners_.find(id);
      if (it == runners_.end() || it->second->finished()) continue;
      kLog.Warn("run {}: the server no longer considers it running; stopping its worker", id);
      it->second->Stop(StopReason::kAbandoned, config_.runner.kill_grace_ms);
    }
  }
}

void Agent::StartAssignment(const v1::Assignment& a) {
  const std::string& run_id = a.run_id();
  kLog.Info("run {}: assigned (job {}, study {}, attempt {}, preset {}, device {}, timeout {} s)", run_id,
            a.job_id(), a.study_id(), a.attempt(), a.config().preset(), a.device_index(), a.timeout_s());
  const std::string dir = absl::StrCat(work_dir_->spool_root(), "/", run_id);
  absl::StatusOr<std::unique_ptr<RunSpool>> created = RunSpool::Create(dir, a);
  if (!created.ok()) {
    // Without a spool nothing can be kept: fail the run at once, with the cause.
    kLog.Error("run {}: cannot create its spool: {}", run_id, std::string(created.status().message()));
    if (absl::IsAlreadyExists(created.status())) return;  // the earlier copy carries on
    if (ValidateRunId(run_id).ok()) (void)RemoveTree(dir);
    v1::FinishRunRequest request;
    {
      std::lock_guard<std::mutex> lock(mu_);
      request.set_agent_id(agent_id_);
    }
    request.set_run_id(run_id);
    request.set_state(v1::RUN_FAILED);
    request.set_error(ToValidUtf8(absl::StrCat("spool write failed: ", created.status().message())));
    *request.mutable_agent_environment() = AgentEnvironment(config_.facts, "");
    if (absl::StatusOr<v1::FinishRunResponse> r = uplink_->FinishRun(request); !r.ok()) {
      kLog.Error("run {}: reporting the failure: {} (the server's lease will expire instead)", run_id,
                 r.status().ToString());
    }
    return;
  }
  std::shared_ptr<RunSpool> spool = *std::move(created);
  const OfferedDevice* device = config_.inventory.Find(a.device_index());
  JobRunner* runner = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!draining_ && device != nullptr && busy_devices_.count(a.device_index()) == 0) {
      LaunchSpec spec = MakeWorkerLaunchSpec(config_.worker_path, spool->dir(), run_id, *device, work_dir_->cache_dir());
      v1::Environment env = AgentEnvironment(config_.facts, spec.env["CUDA_VISIBLE_DEVICES"]);
      RunnerCallbacks callbacks;
      callbacks.on_chunk = [this] { uploader_->Notify(); };
      callbacks.on_finished = [this](const std::string& id) { OnRunFinished(id); };
      if (a.config().has_model()) {
        callbacks.prepare = [this, a, dir = spool->dir()] { return PrepareModel(a, dir); };
      }
      auto owned = std::make_unique<JobRunner>(spool, a, std::move(spec), std::move(env), launcher_.get(),
                                               config_.runner, std::move(callbacks));
      runner = owned.get();
      runners_[run_id] = std::move(owned);
      busy_devices_.insert(a.device_index());
    }
  }
  if (runner == nullptr) {
    bool draining = false;
    std::vector<int> free;
    {
      std::lock_guard<std::mutex> lock(mu_);
      draining = draining_;
      free = FreeDevicesLocked();
    }
    if (draining) {
      FinishWithoutWorker(std::move(spool), v1::RUN_INTERRUPTED, kDrainError);
    } else {
      FinishWithoutWorker(
          std::move(spool), v1::RUN_FAILED,
          absl::StrCat("the server assigned device ", a.device_index(),
                       ", which is not a free device of this agent (free: ", absl::StrJoin(free, ","), ")"));
    }
    return;
  }
  uploader_->Add(spool);
  runner->Start();
}

absl::StatusOr<std::vector<std::string>> Agent::PrepareModel(const v1::Assignment& a, const std::string& run_dir) {
  const v1::ModelRef& m = a.config().model();
  const std::string what = absl::StrCat("model ", m.file_name(), " (", m.sha256(), "): ");
  ModelFetch fetch = [&](uint64_t offset, const ModelSink& sink) {
    v1::FetchModelRequest request;
    {
      std::lock_guard<std::mutex> lock(mu_);
      request.set_agent_id(agent_id_);
    }
    request.set_run_id(a.run_id());
    request.set_sha256(m.sha256());
    request.set_offset(offset);
    return uplink_->FetchModel(request, m.size_bytes(), sink);
  };
  absl::StatusOr<std::string> cached = model_cache_->Get(m, fetch);
  if (!cached.ok()) return absl::Status(cached.status().code(), absl::StrCat(what, cached.status().message()));
  // The uploaded name (checked by the server: a base name) in a folder of its own, so that no
  // name can collide with the spool's files.
  const std::string name = m.file_name() == "." || m.file_name() == ".." ? "model.pt" : m.file_name();
  const std::filesystem::path link = std::filesystem::path(run_dir) / "model" / name;
  std::error_code ec;
  std::filesystem::create_directories(link.parent_path(), ec);
  if (!ec) std::filesystem::create_hard_link(*cached, link, ec);
  if (ec) return absl::InternalError(absl::StrCat(what, "linking it into ", link.string(), ": ", ec.message()));
  kLog.Info("run {}: {}ready at {}", a.run_id(), what, link.string());
  return std::vector<std::string>{"--model", link.string()};
}

void Agent::FinishWithoutWorker(std::shared_ptr<RunSpool> spool, v1::RunState state,
                                const std::string& error) {
  kLog.Warn("run {}: not started: {}", spool->run_id(), error);
  v1::FinishRunRequest outcome;
  outcome.set_run_id(spool->run_id());
  outcome.set_state(state);
  outcome.set_error(error);
  outcome.set_last_seq(spool->last_seq());
  *outcome.mutable_agent_environment() = AgentEnvironment(config_.facts, "");
  if (absl::Status s = spool->WriteOutcome(outcome); !s.ok()) {
    kLog.Error("run {}: could not record its outcome on disk: {}", spool->run_id(), std::string(s.message()));
  }
  uploader_->Add(std::move(spool));
}

void Agent::OnRunFinished(const std::string& run_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_runners_.push_back(run_id);
    if (auto it = runners_.find(run_id); it != runners_.end())
      busy_devices_.erase(it->second->device_index());
    cv_.notify_all();
  }
  uploader_->Notify();
}

void Agent::OnRunRejected(const std::string& run_id, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runners_.find(run_id);
  if (it == runners_.end() || it->second->finished()) return;
  kLog.Warn("run {}: stopping its worker: {}", run_id, reason);
  it->second->Stop(StopReason::kAbandoned, config_.runner.kill_grace_ms);
}

void Agent::ReapFinishedRunners() {
  std::vector<std::unique_ptr<JobRunner>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& id : finished_runners_) {
      auto it = runners_.find(id);
      if (it == runners_.end()) continue;
      done.push_back(std::move(it->second));
      runners_.erase(it);
    }
    finished_runners_.clear();
  }
  for (auto& r : done) r->Join();
}

}  // namespace medprof::agent
