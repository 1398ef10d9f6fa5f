// The agent daemon against an in-process AgentService on 127.0.0.1 (a scripted stand-in for
// medprof-server that keeps its state across "restarts") and a fake worker launcher. The real
// server, agent and worker meet in tests/integration.
#include "agent/agent/agent.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <fstream>
#include <set>
#include <thread>

#include "common/file_util.h"
#include "common/result_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "medprof/v1/service.grpc.pb.h"
#include "tests/testing/status_matchers.h"
#include "tests/unit/agent/test_files.h"

namespace medprof::agent {
namespace {

using ::medprof::agent::testing::FreshDir;
using ::medprof::agent::testing::TempRoot;
using ::medprof::agent::testing::WriteTemp;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

bool Eventually(const std::function<bool()>& pred, std::chrono::milliseconds timeout = 15s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

v1::WorkerMessage Started() {
  v1::WorkerMessage m;
  m.mutable_started()->set_backend("cpu");
  return m;
}
v1::WorkerMessage Progress(int step) {
  v1::WorkerMessage m;
  m.mutable_progress()->set_stage("measure");
  m.mutable_progress()->set_step(step);
  m.mutable_progress()->set_total(10);
  return m;
}
v1::WorkerMessage Step(int step) {
  v1::WorkerMessage m;
  m.mutable_step()->set_step(step);
  return m;
}
v1::WorkerMessage Summary() {
  v1::WorkerMessage m;
  m.mutable_summary()->set_measured_steps(1);
  return m;
}
v1::WorkerMessage Interrupted() {
  v1::WorkerMessage m;
  m.mutable_error()->set_kind("interrupted");
  m.mutable_error()->set_message("received SIGTERM");
  return m;
}

// ---------------------------------------------------------------- fake worker launcher

// How a fake worker behaves: it writes `records`, then (when `hold`) waits to be released or
// signalled, writes on_release / on_term, and exits.
struct FakeBehavior {
  std::vector<v1::WorkerMessage> records;
  bool hold = false;
  std::vector<v1::WorkerMessage> on_release;
  std::vector<v1::WorkerMessage> on_term;
  bool ignore_term = false;                                   // only SIGKILL ends a held worker
  WorkerExit exit;                                            // after release, or when not holding
  WorkerExit term_exit{.signaled = true, .signal = SIGTERM};  // after SIGTERM
};

class FakeLauncher;

class FakeProcess : public WorkerProcess {
 public:
  FakeProcess(FakeLauncher* owner, std::string run_id, FakeBehavior behavior, int pid);
  ~FakeProcess() override;
  int pid() const override { return pid_; }
  int result_fd() const override { return read_fd_; }
  absl::Status Signal(int sig) override {
    std::lock_guard<std::mutex> lock(mu_);
    signals_.push_back(sig);
    if (sig == SIGKILL) killed_ = true;
    if (sig == SIGTERM) termed_ = true;
    cv_.notify_all();
    return absl::OkStatus();
  }
  std::optional<WorkerExit> TryWait() override {
    std::lock_guard<std::mutex> lock(mu_);
    return exit_;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  std::vector<int> signals() {
    std::lock_guard<std::mutex> lock(mu_);
    return signals_;
  }

 private:
  void Write(const std::vector<v1::WorkerMessage>& records) {
    for (const auto& r : records) {
      const std::string bytes = EncodeDelimited(r);
      ASSERT_EQ(::write(write_fd_, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    }
  }
  void Body();

  FakeLauncher* const owner_;
  const std::string run_id_;
  const FakeBehavior behavior_;
  const int pid_;
  int read_fd_ = -1;
  int write_fd_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false, termed_ = false, killed_ = false;
  std::vector<int> signals_;
  std::optional<WorkerExit> exit_;
  std::thread thread_;
};

class FakeLauncher {
 public:
  std::function<FakeBehavior(const LaunchSpec&)> behavior = [](const LaunchSpec&) { return FakeBehavior{}; };

  absl::StatusOr<std::unique_ptr<WorkerProcess>> Launch(const LaunchSpec& spec) {
    std::lock_guard<std::mutex> lock(mu_);
    specs_.push_back(spec);
    const std::string run_id = spec.env.at("MEDPROF_RUN_ID");
    ++live_;
    max_live_ = std::max(max_live_, live_);
    auto p =
        std::make_unique<FakeProcess>(this, run_id, behavior(spec), 10'000 + static_cast<int>(specs_.size()));
    processes_[run_id] = p.get();
    return std::unique_ptr<WorkerProcess>(std::move(p));
  }
  void Exited() {
    std::lock_guard<std::mutex> lock(mu_);
    --live_;
  }
  void Gone(const std::string& run_id) {
    std::lock_guard<std::mutex> lock(mu_);
    processes_.erase(run_id);
  }
  bool Release(const std::string& run_id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = processes_.find(run_id);
    if (it == processes_.end()) return false;
    it->second->Release();
    return true;
  }
  std::vector<int> SignalsOf(const std::string& run_id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = processes_.find(run_id);
    return it == processes_.end() ? std::vector<int>{} : it->second->signals();
  }
  std::vector<LaunchSpec> specs() {
    std::lock_guard<std::mutex> lock(mu_);
    return specs_;
  }
  int live() {
    std::lock_guard<std::mutex> lock(mu_);
    return live_;
  }
  int max_live() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_live_;
  }

 private:
  std::mutex mu_;
  std::vector<LaunchSpec> specs_;
  std::map<std::string, FakeProcess*> processes_;
  int live_ = 0;
  int max_live_ = 0;
};

// The agent owns its launcher; this one forwards to the test's FakeLauncher.
class ForwardingLauncher : public WorkerLauncher {
 public:
  explicit ForwardingLauncher(FakeLauncher* fake) : fake_(fake) {}
  absl::StatusOr<std::unique_ptr<WorkerProcess>> Launch(const LaunchSpec& spec) override {
    return fake_->Launch(spec);
  }

 private:
  FakeLauncher* fake_;
};

FakeProcess::FakeProcess(FakeLauncher* owner, std::string run_id, FakeBehavior behavior, int pid)
    : owner_(owner), run_id_(std::move(run_id)), behavior_(std::move(behavior)), pid_(pid) {
  int fds[2];
  EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  thread_ = std::thread([this] { Body(); });
}

void FakeProcess::Body() {
  Write(behavior_.records);
  WorkerExit exit = behavior_.exit;
  if (behavior_.hold) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return released_ || killed_ || (termed_ && !behavior_.ignore_term); });
    const bool killed = killed_, termed = termed_;
    lock.unlock();
    if (killed) {
      exit = WorkerExit{.signaled = true, .signal = SIGKILL};
    } else if (termed) {
      Write(behavior_.on_term);
      exit = behavior_.term_exit;
    } else {
      Write(behavior_.on_release);
    }
  }
  ::close(write_fd_);
  owner_->Exited();
  std::lock_guard<std::mutex> lock(mu_);
  exit_ = exit;
}

FakeProcess::~FakeProcess() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    killed_ = true;
    cv_.notify_all();
  }
  thread_.join();
  owner_->Gone(run_id_);
  ::close(read_fd_);
}

// ---------------------------------------------------------------- fake server

// What the stand-in server knows; it outlives server restarts, like the SQLite file.
struct ServerState {
  std::mutex mu;
  std::condition_variable cv;
  int registrations = 0;
  std::vector<v1::RegisterRequest> registers;
  std::set<std::string> known_agents;
  bool refuse_register = false;
  bool register_unavailable = false;  // Register and AcquireJob answer UNAVAILABLE
  std::deque<v1::Assignment> queue;   // device_index < -1: the first free device
  std::vector<v1::AcquireJobRequest> acquires;
  std::vector<v1::HeartbeatRequest> heartbeats;
  std::set<std::string> cancel;
  std::set<std::string> inactive;
  std::set<uint64_t> lose_once;  // seqs acknowledged but not stored the first time they arrive
  std::map<std::string, std::map<uint64_t, v1::ResultChunk>> chunks;
  std::map<std::string, v1::FinishRunRequest> finished;
  int finish_refusals = 0;

  uint64_t Contiguous(const std::string& run_id) {
    uint64_t through = 0;
    for (const auto& [seq, c] : chunks[run_id]) {
      if (seq != through + 1) break;
      through = seq;
    }
    return through;
  }
};

class FakeAgentService final : public v1::AgentService::Service {
 public:
  explicit FakeAgentService(ServerState* s) : s_(s) {}

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* r,
                        v1::RegisterResponse* out) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->registers.push_back(*r);
    if (s_->register_unavailable) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
    if (s_->refuse_register) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "protocol_version: this server speaks protocol 2: run a newer medprof-agent");
    }
    ++s_->registrations;
    const std::string id = "agent-" + r->agent_name();
    s_->known_agents.insert(id);
    out->set_agent_id(id);
    out->set_heartbeat_interval_ms(50);
    out->set_lease_ttl_ms(5000);
    out->set_server_version("fake");
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* r,
                         v1::HeartbeatResponse* out) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (s_->known_agents.count(r->agent_id()) == 0) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "agent_id: no agent '" + r->agent_id() + "' is registered");
    }
    s_->heartbeats.push_back(*r);
    for (const std::string& id : r->running_run_ids()) {
      if (s_->cancel.count(id)) out->add_cancel_run_ids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status AcquireJob(grpc::ServerContext* ctx, const v1::AcquireJobRequest* r,
                          v1::AcquireJobResponse* out) override {
    std::unique_lock<std::mutex> lock(s_->mu);
    if (s_->known_agents.count(r->agent_id()) == 0) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "agent_id: no agent '" + r->agent_id() + "' is registered");
    }
    if (s_->register_unavailable) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
    s_->acquires.push_back(*r);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(r->wait_ms());
    while (s_->queue.empty() && std::chrono::steady_clock::now() < deadline && !ctx->IsCancelled()) {
      s_->cv.wait_for(lock, 10ms);
    }
    if (s_->queue.empty() || ctx->IsCancelled() || r->free_device_indexes_size() == 0)
      return grpc::Status::OK;
    v1::Assignment a = s_->queue.front();
    s_->queue.pop_front();
    if (a.device_index() < -1) a.set_device_index(r->free_device_indexes(0));
    *out->mutable_assignment() = a;
    return grpc::Status::OK;
  }

  grpc::Status UploadResults(grpc::ServerContext*, grpc::ServerReader<v1::ResultChunk>* reader,
                             v1::UploadAck* ack) override {
    v1::ResultChunk c;
    std::set<std::string> runs;
    std::lock_guard<std::mutex> lock(s_->mu);
    std::map<std::string, uint64_t> lied;
    while (reader->Read(&c)) {
      if (s_->inactive.count(c.run_id())) {
        return grpc::Status(
            grpc::StatusCode::FAILED_PRECONDITION,
            "run " + c.run_id() + " is lost: results are accepted only while the run is running");
      }
      if (c.agent_id().empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "agent_id: required");
      runs.insert(c.run_id());
      if (s_->lose_once.erase(c.seq())) {
        lied[c.run_id()] = std::max(lied[c.run_id()], c.seq());
        continue;
      }
      s_->chunks[c.run_id()].emplace(c.seq(), c);
    }
    for (const std::string& id : runs) {
      (*ack->mutable_committed_through_seq())[id] = std::max(s_->Contiguous(id), lied[id]);
    }
    return grpc::Status::OK;
  }

  grpc::Status FinishRun(grpc::ServerContext*, const v1::FinishRunRequest* r,
                         v1::FinishRunResponse* out) override {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (s_->inactive.count(r->run_id())) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "run " + r->run_id() + " is lost");
    }
    const uint64_t through = s_->Contiguous(r->run_id());
    if (r->last_seq() > through) {
      ++s_->finish_refusals;
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat("run ", r->run_id(), ": seq ", through + 1, " missing, resend"));
    }
    s_->finished[r->run_id()] = *r;
    out->set_job_state(r->state() == v1::RUN_INTERRUPTED ? v1::JOB_QUEUED : v1::JOB_SUCCEEDED);
    return grpc::Status::OK;
  }

 private:
  ServerState* s_;
};

std::string TlsFile(const std::string& name) {
  auto text = ReadFile(std::string(MEDPROF_AGENT_TESTDATA) + "/tls/" + name);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.value_or("");
}

enum class ServerTls { kNone, kTls, kMutual };

class TestServer {
 public:
  TestServer(ServerState* state, int port = 0, ServerTls tls = ServerTls::kNone) : service_(state) {
    grpc::ServerBuilder builder;
    std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
    if (tls != ServerTls::kNone) {
      grpc::SslServerCredentialsOptions o(tls == ServerTls::kMutual
                                              ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                              : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
      o.pem_key_cert_pairs.push_back({TlsFile("server.key"), TlsFile("server.crt")});
      if (tls == ServerTls::kMutual) o.pem_root_certs = TlsFile("ca.crt");
      creds = grpc::SslServerCredentials(o);
    }
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), creds, &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~TestServer() { server_->Shutdown(std::chrono::system_clock::now() + 100ms); }
  int port() const { return port_; }

 private:
  FakeAgentService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// ---------------------------------------------------------------- fixture

class FakeProbe : public GpuProbe {
 public:
  explicit FakeProbe(int gpus) : gpus_(gpus) {}
  absl::StatusOr<std::vector<v1::Device>> Probe() override {
    std::vector<v1::Device> out;
    for (int i = 0; i < gpus_; ++i) {
      v1::Device d;
      d.set_index(i);
      d.set_kind("cuda");
      d.set_name("NVIDIA H200");
      d.set_uuid(absl::StrCat("GPU-", i));
      d.set_compute_capability("9.0");
      out.push_back(d);
    }
    return out;
  }

 private:
  int gpus_;
};

v1::Assignment Job(const std::string& run_id, int device = -2) {
  v1::Assignment a;
  a.set_run_id(run_id);
  a.set_job_id("job-" + run_id);
  a.set_study_id("study-1");
  a.set_attempt(1);
  a.mutable_config()->set_preset("baseline");
  a.set_device_index(device);
  a.set_timeout_s(60);
  return a;
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = FreshDir("agent");
    server_ = std::make_unique<TestServer>(&state_);
  }
  void TearDown() override {
    if (agent_ != nullptr) {
      agent_->Drain("test end");
      (void)agent_->Wait();
      agent_.reset();
    }
    server_.reset();
  }

  std::unique_ptr<Agent> MakeAgent(int gpus, int max_jobs = 0, int port = 0,
                                   const std::function<void(UplinkOptions&)>& tls = nullptr) {
    auto work_dir = WorkDir::Open(work_);
    EXPECT_TRUE(work_dir.ok()) << work_dir.status();
    UplinkOptions uo;
    uo.target = absl::StrCat("127.0.0.1:", port != 0 ? port : server_->port());
    uo.call_timeout_ms = 2000;
    uo.upload_timeout_ms = 2000;
    if (tls) tls(uo);
    auto uplink = Uplink::Create(uo);
    EXPECT_TRUE(uplink.ok());
    FakeProbe probe(gpus);
    AgentConfig c;
    c.name = "node-1";
    c.worker_path = "/opt/medprof/bin/medprof-worker";
    c.max_jobs = max_jobs;
    c.drain_timeout_ms = 5000;
    c.labels = {{"site", "test"}};
    c.facts.host = "node-1.example.org";
    c.facts.site = "test";
    InventoryInputs in;
    in.nvidia_params_path = "/nonexistent";
    c.inventory = BuildInventory(gpus > 0 ? &probe : nullptr, in);
    c.server = uo.target;
    c.acquire_wait_ms = 100;
    c.default_heartbeat_ms = default_heartbeat_ms_;
    c.register_backoff = {.initial_ms = 20, .max_ms = 200, .multiplier = 2, .jitter = 0.5};
    c.runner.kill_grace_ms = 500;
    c.runner.poll_ms = 5;
    c.uploader.live_interval_ms = 20;
    c.uploader.backoff = {.initial_ms = 20, .max_ms = 200, .multiplier = 2, .jitter = 0.5};
    auto agent = Agent::Create(std::move(c), *std::move(work_dir), *std::move(uplink),
                               std::make_unique<ForwardingLauncher>(&launcher_));
    EXPECT_TRUE(agent.ok()) << agent.status();
    return *std::move(agent);
  }

  void Queue(const v1::Assignment& a) {
    std::lock_guard<std::mutex> lock(state_.mu);
    state_.queue.push_back(a);
    state_.cv.notify_all();
  }
  bool Finished(const std::string& run_id) {
    std::lock_guard<std::mutex> lock(state_.mu);
    return state_.finished.count(run_id) > 0;
  }
  v1::FinishRunRequest FinishOf(const std::string& run_id) {
    std::lock_guard<std::mutex> lock(state_.mu);
    return state_.finished.at(run_id);
  }
  std::vector<uint64_t> StoredSeqs(const std::string& run_id) {
    std::lock_guard<std::mutex> lock(state_.mu);
    std::vector<uint64_t> out;
    for (const auto& [seq, c] : state_.chunks[run_id]) out.push_back(seq);
    return out;
  }
  std::string RunIdOf(const LaunchSpec& spec) { return spec.env.at("MEDPROF_RUN_ID"); }
  bool SpoolEmpty() {
    auto dirs = ListRunDirs(work_ + "/spool");
    return dirs.ok() && dirs->empty();
  }

  std::string work_;
  int64_t default_heartbeat_ms_ = 50;
  ServerState state_;
  std::unique_ptr<TestServer> server_;
  FakeLauncher launcher_;
  std::unique_ptr<Agent> agent_;
};

FakeBehavior HeldJob() {
  FakeBehavior b;
  b.records = {Started(), Progress(1), Step(0)};
  b.hold = true;
  b.on_release = {Summary()};
  b.on_term = {Interrupted()};
  b.term_exit = WorkerExit{.code = 0};
  return b;
}

// ---------------------------------------------------------------- tests

TEST_F(AgentTest, TwoGpusRunTwoJobsAtOnceEachPinnedToItsOwnDevice) {
  launcher_.behavior = [](const LaunchSpec&) { return HeldJob(); };
  for (const char* id : {"r1", "r2", "r3"}) Queue(Job(id));
  agent_ = MakeAgent(/*gpus=*/2);
  ASSERT_TRUE(agent_->Start().ok());

  ASSERT_TRUE(Eventually([&] { return launcher_.specs().size() == 2; }));
  std::this_thread::sleep_for(300ms);
  std::vector<LaunchSpec> specs = launcher_.specs();
  ASSERT_EQ(specs.size(), 2u) << "a third worker started while both GPUs were busy";
  std::set<std::string> pinned;
  for (const LaunchSpec& s : specs) {
    const std::string run = RunIdOf(s);
    EXPECT_THAT(s.argv, ElementsAre("/opt/medprof/bin/medprof-worker", "--job",
                                    absl::StrCat(work_, "/spool/", run, "/job.pb"), "--result-fd", "3"));
    EXPECT_EQ(s.env.at("CUDA_VISIBLE_DEVICES"), s.env.at("MEDPROF_DEVICE_INDEX"));
    EXPECT_EQ(s.env.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
    pinned.insert(s.env.at("CUDA_VISIBLE_DEVICES"));
    EXPECT_TRUE(PathExists(absl::StrCat(work_, "/spool/", run, "/assignment.pb")));
  }
  EXPECT_THAT(pinned, ElementsAre("0", "1"));
  // The live runs and their progress reach the server with the heartbeats.
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(state_.mu);
    for (const auto& hb : state_.heartbeats) {
      if (hb.running_run_ids_size() == 2 && hb.progress_size() == 2 && hb.progress(0).progress().step() == 1)
        return true;
    }
    return false;
  }));

  // Freeing one GPU lets the third job in, on that GPU.
  const std::string first = RunIdOf(specs[0]);
  ASSERT_TRUE(launcher_.Release(first));
  ASSERT_TRUE(Eventually([&] { return launcher_.specs().size() == 3; }));
  const LaunchSpec third = launcher_.specs()[2];
  EXPECT_EQ(RunIdOf(third), "r3");
  EXPECT_EQ(third.env.at("CUDA_VISIBLE_DEVICES"), specs[0].env.at("CUDA_VISIBLE_DEVICES"));
  std::map<std::string, std::string> device_of;  // run -> CUDA_VISIBLE_DEVICES it got
  for (const LaunchSpec& s : launcher_.specs()) device_of[RunIdOf(s)] = s.env.at("CUDA_VISIBLE_DEVICES");
  for (const std::string& id : {RunIdOf(specs[1]), std::string("r3")}) {
    ASSERT_TRUE(Eventually([&] { return launcher_.Release(id); }));
  }

  ASSERT_TRUE(Eventually([&] { return Finished("r1") && Finished("r2") && Finished("r3"); }));
  for (const char* id : {"r1", "r2", "r3"}) {
    const v1::FinishRunRequest f = FinishOf(id);
    EXPECT_EQ(v1::RunState_Name(f.state()), "RUN_SUCCEEDED") << id << ": " << f.error();
    EXPECT_EQ(f.last_seq(), 4u);
    EXPECT_EQ(f.agent_id(), "agent-node-1");
    EXPECT_EQ(f.agent_environment().host(), "node-1.example.org");
    EXPECT_EQ(f.agent_environment().cuda_visible_devices(), device_of.at(id));
    EXPECT_THAT(StoredSeqs(id), ElementsAre(1, 2, 3, 4));
  }
  EXPECT_EQ(launcher_.max_live(), 2);
  ASSERT_TRUE(Eventually([&] { return SpoolEmpty(); })) << "finished runs leave the spool";
  std::lock_guard<std::mutex> lock(state_.mu);
  ASSERT_FALSE(state_.registers.empty());
  const v1::RegisterRequest& reg = state_.registers.front();
  EXPECT_EQ(reg.protocol_version(), v1::PROTOCOL_VERSION_1);
  EXPECT_EQ(reg.agent_name(), "node-1");
  EXPECT_EQ(reg.max_concurrent_jobs(), 2);
  ASSERT_EQ(reg.devices_size(), 2);
  EXPECT_EQ(reg.devices(1).uuid(), "GPU-1");
  EXPECT_EQ(reg.labels().at("site"), "test");
  for (const auto& a : state_.acquires)
    EXPECT_GT(a.free_device_indexes_size(), 0) << "acquired with no free device";
}

TEST_F(AgentTest, MaxJobsLimitsConcurrencyBelowTheDeviceCount) {
  launcher_.behavior = [](const LaunchSpec&) { return HeldJob(); };
  Queue(Job("a"));
  Queue(Job("b"));
  agent_ = MakeAgent(/*gpus=*/2, /*max_jobs=*/1);
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return launcher_.specs().size() == 1; }));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(launcher_.specs().size(), 1u);
  ASSERT_TRUE(launcher_.Release("a"));
  ASSERT_TRUE(Eventually([&] { return launcher_.specs().size() == 2; }));
  ASSERT_TRUE(Eventually([&] { return launcher_.Release("b"); }));
  ASSERT_TRUE(Eventually([&] { return Finished("a") && Finished("b"); }));
  EXPECT_EQ(launcher_.max_live(), 1);
  std::lock_guard<std::mutex> lock(state_.mu);
  EXPECT_EQ(state_.registers.front().max_concurrent_jobs(), 1);
}

TEST_F(AgentTest, ACpuAgentRegistersTheCpuAndACancelStopsItsWorker) {
  launcher_.behavior = [](const LaunchSpec&) {
    FakeBehavior b = HeldJob();
    b.on_term = {};
    b.term_exit = WorkerExit{.signaled = true, .signal = SIGTERM};
    return b;
  };
  Queue(Job("c1"));
  agent_ = MakeAgent(/*gpus=*/0);
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return launcher_.specs().size() == 1; }));
  const LaunchSpec spec = launcher_.specs()[0];
  EXPECT_EQ(spec.env.at("CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(spec.env.at("MEDPROF_DEVICE_INDEX"), "-1");
  {
    std::lock_guard<std::mutex> lock(state_.mu);
    ASSERT_EQ(state_.registers.front().devices_size(), 1);
    EXPECT_EQ(state_.registers.front().devices(0).kind(), "cpu");
    EXPECT_EQ(state_.registers.front().devices(0).index(), -1);
    state_.cancel.insert("c1");
  }
  ASSERT_TRUE(Eventually([&] { return Finished("c1"); }));
  const v1::FinishRunRequest f = FinishOf("c1");
  EXPECT_EQ(v1::RunState_Name(f.state()), "RUN_CANCELLED");
  EXPECT_EQ(f.error(), "cancelled by the server");
  EXPECT_EQ(f.exit_code(), -SIGTERM);
  EXPECT_EQ(f.last_seq(), 3u);
  // The agent carries on: the next job runs.
  launcher_.behavior = [](const LaunchSpec&) {
    FakeBehavior b;
    b.records = {Started(), Summary()};
    return b;
  };
  Queue(Job("c2"));
  ASSERT_TRUE(Eventually([&] { return Finished("c2"); }));
  EXPECT_EQ(v1::RunState_Name(FinishOf("c2").state()), "RUN_SUCCEEDED");
}

TEST_F(AgentTest, DrainInterruptsTheRunFinishesItAndTakesNoMoreJobs) {
  launcher_.behavior = [](const LaunchSpec&) { return HeldJob(); };
  Queue(Job("d1"));
  Queue(Job("d2"));
  agent_ = MakeAgent(/*gpus=*/1);
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return launcher_.specs().size() == 1; }));
  ASSERT_TRUE(Eventually([&] { return StoredSeqs("d1").size() == 3; }));
  agent_->Drain("received SIGTERM");
  EXPECT_TRUE(agent_->Wait().ok());
  ASSERT_TRUE(Finished("d1"));
  const v1::FinishRunRequest f = FinishOf("d1");
  EXPECT_EQ(v1::RunState_Name(f.state()), "RUN_INTERRUPTED");
  EXPECT_EQ(f.error(), "agent received SIGTERM");
  EXPECT_EQ(f.last_seq(), 4u) << "the worker's interrupted record is uploaded too";
  EXPECT_THAT(StoredSeqs("d1"), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(launcher_.specs().size(), 1u);
  EXPECT_TRUE(SpoolEmpty());
  std::lock_guard<std::mutex> lock(state_.mu);
  EXPECT_EQ(state_.queue.size(), 1u) << "no job is taken while draining";
  bool saw_draining = false;
  for (const auto& hb : state_.heartbeats) saw_draining |= hb.draining();
  EXPECT_TRUE(saw_draining);
  agent_.reset();
}

TEST_F(AgentTest, ADrainKillsAWorkerThatIgnoresSigtermBeforeTheDeadline) {
  launcher_.behavior = [](const LaunchSpec&) {
    FakeBehavior b = HeldJob();
    b.ignore_term = true;
    return b;
  };
  Queue(Job("k1"));
  agent_ = MakeAgent(/*gpus=*/1);
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return launcher_.specs().size() == 1; }));
  ASSERT_TRUE(Eventually([&] { return StoredSeqs("k1").size() == 3; }));
  const auto start = std::chrono::steady_clock::now();
  agent_->Drain("received SIGTERM");
  EXPECT_TRUE(agent_->Wait().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << "drain timeout is 5 s";
  ASSERT_TRUE(Finished("k1"));
  EXPECT_EQ(v1::RunState_Name(FinishOf("k1").state()), "RUN_INTERRUPTED");
  EXPECT_EQ(FinishOf("k1").exit_code(), -SIGKILL);
  agent_.reset();
}

TEST_F(AgentTest, ResumesTheSpoolOfAnAgentThatDied) {
  // What a SIGKILLed agent leaves: run "old" with 3 results (1 acknowledged, the server
  // holds it), a record cut short at the end, no outcome; run "done" finished and acked.
  ASSERT_TRUE(MakeDirs(work_ + "/spool").ok());
  {
    auto spool = RunSpool::Create(work_ + "/spool/old", Job("old", 0));
    ASSERT_TRUE(spool.ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*spool)->Append(Step(i)).ok());
    ASSERT_TRUE((*spool)->SetAcked(1).ok());
    auto first = (*spool)->ReadChunks(1, 1, 1 << 20);
    std::lock_guard<std::mutex> lock(state_.mu);
    state_.chunks["old"][1] = (*first)[0];
    std::ofstream((*spool)->stderr_path()) << "step 2 done\n";
  }
  {
    std::ofstream f(work_ + "/spool/old/results.log", std::ios::app | std::ios::binary);
    f << EncodeDelimited(Step(9)).substr(0, 3);
  }
  {
    auto spool = RunSpool::Create(work_ + "/spool/done", Job("done", 0));
    ASSERT_TRUE(spool.ok());
    ASSERT_TRUE((*spool)->Append(Summary()).ok());
    v1::FinishRunRequest outcome;
    outcome.set_run_id("done");
    outcome.set_state(v1::RUN_SUCCEEDED);
    outcome.set_last_seq(1);
    ASSERT_TRUE((*spool)->WriteOutcome(outcome).ok());
    std::lock_guard<std::mutex> lock(state_.mu);
    auto chunk = (*spool)->ReadChunks(1, 1, 1 << 20);
    state_.chunks["done"][1] = (*chunk)[0];
    ASSERT_TRUE((*spool)->SetAcked(1).ok());
  }
  agent_ = MakeAgent(/*gpus=*/1);
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return Finished("old") && Finished("done"); }));
  const v1::FinishRunRequest old = FinishOf("old");
  EXPECT_EQ(v1::RunState_Name(old.state()), "RUN_INTERRUPTED");
  EXPECT_EQ(old.error(), "agent restarted while the run was in progress");
  EXPECT_EQ(old.last_seq(), 3u);
  EXPECT_EQ(old.stderr_tail(), "step 2 done\n");
  EXPECT_THAT(StoredSeqs("old"), ElementsAre(1, 2, 3));
  EXPECT_EQ(v1::RunState_Name(FinishOf("done").state()), "RUN_SUCCEEDED");
  ASSERT_TRUE(Eventually([&] { return SpoolEmpty(); }));
  EXPECT_TRUE(launcher_.specs().empty()) << "resumed runs start no worker";
}

TEST_F(AgentTest, HeartbeatsFollowTheServersIntervalFromTheFirstRegistration) {
  // The server's lease may be far shorter than the agent's default interval: the first
  // heartbeat must not wait for the default.
  default_heartbeat_ms_ = 60'000;
  launcher_.behavior = [](const LaunchSpec&) { return HeldJob(); };
  Queue(Job("h1"));
  agent_ = MakeAgent(/*gpus=*/1);
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually(
      [&] {
        std::lock_guard<std::mutex> lock(state_.mu);
        int with_run = 0;
        for (const auto& hb : state_.heartbeats)
          with_run += hb.running_run_ids_size() == 1 && hb.running_run_ids(0) == "h1";
        return with_run >= 3;
      },
      2s))
      << "heartbeats every 50 ms (the server's interval) carry the running run";
  ASSERT_TRUE(launcher_.Release("h1"));
  ASSERT_TRUE(Eventually([&] { return Finished("h1"); }));
}

TEST_F(AgentTest, HeartbeatsKeepRunningJobsLeasedWhileTheAgentRegistersAgain) {
  launcher_.behavior = [](const LaunchSpec&) { return HeldJob(); };
  Queue(Job("l1"));
  agent_ = MakeAgent(/*gpus=*/2);  // one GPU stays free, so the agent keeps acquiring
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return launcher_.specs().size() == 1; }));
  auto heartbeats_with_l1 = [&] {
    std::lock_guard<std::mutex> lock(state_.mu);
    int n = 0;
    for (const auto& hb : state_.heartbeats)
      n += hb.running_run_ids_size() == 1 && hb.running_run_ids(0) == "l1";
    return n;
  };
  {
    std::lock_guard<std::mutex> lock(state_.mu);
    state_.register_unavailable = true;  // acquiring fails, so does registering again
  }
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(state_.mu);
    return state_.registers.size() >= 3;  // the agent is retrying Register
  }));
  const int before = heartbeats_with_l1();
  std::this_thread::sleep_for(400ms);
  EXPECT_GE(heartbeats_with_l1() - before, 3)
      << "no heartbeats while registering again: the lease would lapse";
  {
    std::lock_guard<std::mutex> lock(state_.mu);
    state_.register_unavailable = false;
  }
  ASSERT_TRUE(Eventually([&] { return agent_->registrations() == 2; }));
  ASSERT_TRUE(launcher_.Release("l1"));
  ASSERT_TRUE(Eventually([&] { return Finished("l1"); }));
  EXPECT_EQ(v1::RunState_Name(FinishOf("l1").state()), "RUN_SUCCEEDED");
}

TEST_F(AgentTest, RegistersAgainWhenTheServerForgetsTheAgent) {
  agent_ = MakeAgent(/*gpus=*/1);
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return agent_->registrations() == 1; }));
  {
    std::lock_guard<std::mutex> lock(state_.mu);
    state_.known_agents.clear();  // e.g. a server with a new database
  }
  ASSERT_TRUE(Eventually([&] { return agent_->registrations() == 2; }));
  launcher_.behavior = [](const LaunchSpec&) {
    FakeBehavior b;
    b.records = {Started(), Summary()};
    return b;
  };
  Queue(Job("after"));
  ASSERT_TRUE(Eventually([&] { return Finished("after"); }));
  EXPECT_EQ(v1::RunState_Name(FinishOf("after").state()), "RUN_SUCCEEDED");
}

TEST_F(AgentTest, SurvivesAServerRestartMidRunWithoutLosingOrRepeatingResults) {
  launcher_.behavior = [](const LaunchSpec&) { return HeldJob(); };
  Queue(Job("s1"));
  agent_ = MakeAgent(/*gpus=*/1);
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return StoredSeqs("s1").size() == 3; }));
  const int port = server_->port();
  server_.reset();                       // the server goes away
  ASSERT_TRUE(launcher_.Release("s1"));  // the worker finishes while it is down
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(Finished("s1"));
  server_ = std::make_unique<TestServer>(&state_, port);  // back, same state
  ASSERT_EQ(server_->port(), port);
  ASSERT_TRUE(Eventually([&] { return Finished("s1"); }));
  EXPECT_EQ(v1::RunState_Name(FinishOf("s1").state()), "RUN_SUCCEEDED");
  EXPECT_EQ(FinishOf("s1").last_seq(), 4u);
  EXPECT_THAT(StoredSeqs("s1"), ElementsAre(1, 2, 3, 4));
  EXPECT_TRUE(Eventually([&] { return agent_->registrations() >= 2; }))
      << "the agent registers again after losing the server";
}

TEST_F(AgentTest, WaitsForAServerThatIsNotUpYet) {
  const int port = server_->port();
  server_.reset();
  agent_ = MakeAgent(/*gpus=*/1, 0, port);
  ASSERT_TRUE(agent_->Start().ok());
  std::this_thread::sleep_for(400ms);
  EXPECT_EQ(agent_->registrations(), 0);
  server_ = std::make_unique<TestServer>(&state_, port);
  ASSERT_TRUE(Eventually([&] { return agent_->registrations() == 1; }));
  std::lock_guard<std::mutex> lock(state_.mu);
  EXPECT_EQ(state_.registrations, 1);
}

TEST_F(AgentTest, AGapOnTheServerMakesTheAgentSendEverythingAgain) {
  launcher_.behavior = [](const LaunchSpec&) {
    FakeBehavior b;
    b.records = {Started(), Step(0), Step(1), Summary()};
    return b;
  };
  {
    std::lock_guard<std::mutex> lock(state_.mu);
    state_.lose_once = {4};  // the last chunk is acknowledged, then lost: FinishRun sees the gap
  }
  Queue(Job("g1"));
  agent_ = MakeAgent(/*gpus=*/1);
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return Finished("g1"); }));
  EXPECT_EQ(v1::RunState_Name(FinishOf("g1").state()), "RUN_SUCCEEDED");
  EXPECT_THAT(StoredSeqs("g1"), ElementsAre(1, 2, 3, 4));
  std::lock_guard<std::mutex> lock(state_.mu);
  EXPECT_EQ(state_.finish_refusals, 1);
}

TEST_F(AgentTest, AnAcknowledgementBelowWhatWasSentIsResentFromThere) {
  launcher_.behavior = [](const LaunchSpec&) {
    FakeBehavior b;
    b.records = {Started(), Step(0), Step(1), Step(2), Step(3), Summary()};
    return b;
  };
  {
    std::lock_guard<std::mutex> lock(state_.mu);
    state_.lose_once = {2};  // a hole in the middle: later acks stop below it
  }
  Queue(Job("g2"));
  agent_ = MakeAgent(/*gpus=*/1);
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return Finished("g2"); }));
  EXPECT_EQ(v1::RunState_Name(FinishOf("g2").state()), "RUN_SUCCEEDED");
  EXPECT_THAT(StoredSeqs("g2"), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST_F(AgentTest, ARunTheServerNoLongerTakesIsDroppedAndItsWorkerStopped) {
  launcher_.behavior = [](const LaunchSpec&) { return HeldJob(); };
  Queue(Job("x1"));
  agent_ = MakeAgent(/*gpus=*/1);
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return StoredSeqs("x1").size() == 3; }));
  {
    std::lock_guard<std::mutex> lock(state_.mu);
    state_.inactive.insert("x1");  // e.g. its lease expired and the job was requeued
  }
  ASSERT_TRUE(launcher_.Release("x1"));  // one more record to upload: refused
  ASSERT_TRUE(Eventually([&] { return SpoolEmpty(); }));
  EXPECT_FALSE(Finished("x1"));
  EXPECT_EQ(launcher_.live(), 0);
}

TEST_F(AgentTest, AnAssignmentForABusyOrUnknownDeviceFailsWithTheCause) {
  Queue(Job("bad", /*device=*/5));
  agent_ = MakeAgent(/*gpus=*/2);
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return Finished("bad"); }));
  const v1::FinishRunRequest f = FinishOf("bad");
  EXPECT_EQ(v1::RunState_Name(f.state()), "RUN_FAILED");
  EXPECT_EQ(f.error(), "the server assigned device 5, which is not a free device of this agent (free: 0,1)");
  EXPECT_EQ(f.last_seq(), 0u);
  EXPECT_TRUE(launcher_.specs().empty());
}

TEST_F(AgentTest, TlsWithTheServersCaRegistersAndRunsAJob) {
  server_ = std::make_unique<TestServer>(&state_, 0, ServerTls::kTls);
  launcher_.behavior = [](const LaunchSpec&) {
    FakeBehavior b;
    b.records = {Started(), Summary()};
    return b;
  };
  Queue(Job("t1"));
  agent_ = MakeAgent(/*gpus=*/1, 0, 0, [](UplinkOptions& o) {
    o.use_tls = true;
    o.tls_ca_pem = TlsFile("ca.crt");
  });
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return Finished("t1"); }));
  EXPECT_EQ(v1::RunState_Name(FinishOf("t1").state()), "RUN_SUCCEEDED");
}

TEST_F(AgentTest, TlsWithAnotherCaNeverReachesTheServer) {
  server_ = std::make_unique<TestServer>(&state_, 0, ServerTls::kTls);
  agent_ = MakeAgent(/*gpus=*/1, 0, 0, [](UplinkOptions& o) {
    o.use_tls = true;
    o.tls_ca_pem = TlsFile("other-ca.crt");
  });
  ASSERT_TRUE(agent_->Start().ok());
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(agent_->registrations(), 0);
  std::lock_guard<std::mutex> lock(state_.mu);
  EXPECT_TRUE(state_.registers.empty());
}

TEST_F(AgentTest, MutualTlsNeedsTheClientCertificate) {
  server_ = std::make_unique<TestServer>(&state_, 0, ServerTls::kMutual);
  agent_ = MakeAgent(/*gpus=*/1, 0, 0, [](UplinkOptions& o) {
    o.use_tls = true;
    o.tls_ca_pem = TlsFile("ca.crt");
  });
  ASSERT_TRUE(agent_->Start().ok());
  std::this_thread::sleep_for(600ms);
  EXPECT_EQ(agent_->registrations(), 0) << "registered without a client certificate";
  agent_->Drain("next agent");
  ASSERT_TRUE(agent_->Wait().ok());
  agent_.reset();
  agent_ = MakeAgent(/*gpus=*/1, 0, 0, [](UplinkOptions& o) {
    o.use_tls = true;
    o.tls_ca_pem = TlsFile("ca.crt");
    o.tls_cert_pem = TlsFile("client.crt");
    o.tls_key_pem = TlsFile("client.key");
  });
  ASSERT_TRUE(agent_->Start().ok());
  ASSERT_TRUE(Eventually([&] { return agent_->registrations() == 1; }));
}

TEST_F(AgentTest, ARefusedRegistrationIsFatal) {
  {
    std::lock_guard<std::mutex> lock(state_.mu);
    state_.refuse_register = true;
  }
  agent_ = MakeAgent(/*gpus=*/1);
  ASSERT_TRUE(agent_->Start().ok());
  const absl::Status s = agent_->Wait();
  EXPECT_THAT(
      s, medprof::testing::StatusIs(absl::StatusCode::kFailedPrecondition,
                                    HasSubstr("this server speaks protocol 2: run a newer medprof-agent")));
  agent_.reset();
}

}  // namespace
}  // namespace medprof::agent
