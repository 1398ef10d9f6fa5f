// Agents, leases, heartbeats and finishing runs, on the real SqliteStore with a FakeClock.
#include <chrono>
#include <future>
#include <thread>

#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::testing {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using SchedulerTest = DomainTest;

TEST_F(SchedulerTest, SameNameIsTheSameAgent) {
  const std::string a = Register("node-a", {Gpu(0)});
  const std::string again = Register("node-a", {Gpu(0), Gpu(1)});
  const std::string b = Register("node-b", {Cpu()});
  EXPECT_EQ(a, again);
  EXPECT_NE(a, b);
  EXPECT_EQ(Count("agents"), 2);
  EXPECT_EQ(Count("agent_devices"), 3);
}

TEST_F(SchedulerTest, RefusesOtherProtocolVersions) {
  RegisterAgentRequest r;
  r.protocol_version = 2;
  r.agent_name = "node-a";
  r.devices = {Gpu(0)};
  EXPECT_THAT(domain_->agents().Register(ctx_, r),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the agent speaks protocol 2 but this server")));
  EXPECT_THAT(domain_->agents().Register(ctx_, r),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("whose --version says protocol 1")));
  EXPECT_EQ(Count("agents"), 0);
}

TEST_F(SchedulerTest, RegistrationIsValidated) {
  RegisterAgentRequest r;
  r.protocol_version = 1;
  r.agent_name = "node a";
  r.devices = {Gpu(0)};
  EXPECT_THAT(ValidateRegistration(r), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("agent_name")));
  r.agent_name = "node-a";
  r.devices = {};
  EXPECT_THAT(ValidateRegistration(r), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("devices: 0 devices")));
  r.devices = {Gpu(0), Gpu(0)};
  EXPECT_THAT(ValidateRegistration(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("devices[1].index: 0 is listed twice")));
  r.devices = {Gpu(0)};
  r.devices[0].kind = "tpu";
  EXPECT_THAT(ValidateRegistration(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("devices[0].kind: 'tpu'")));
  r.devices = {Cpu()};
  r.devices[0].index = 0;
  EXPECT_THAT(ValidateRegistration(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the cpu device has index -1")));
  r.devices = {Cpu()};
  r.labels = {{"bad key", "x"}};
  EXPECT_THAT(ValidateRegistration(r), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("labels: key")));
  r.labels = {};
  r.max_concurrent_jobs = 65;
  EXPECT_THAT(ValidateRegistration(r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_concurrent_jobs: 65 is out of range")));
}

TEST_F(SchedulerTest, LeasesTheOldestJobThatMatches) {
  const std::string gpu = Register("node-a", {Gpu(0)}, {{"site", "tacc"}});
  const SubmitStudyResult a100 = Submit({"baseline"}, {"gpu=a100"});
  const SubmitStudyResult any = Submit({"opt1", "opt2"});
  std::optional<Assignment> got = Acquire(gpu);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->job_id, any.jobs[0].record.job_id);  // the a100 job is older but does not match
  EXPECT_EQ(got->study_id, any.study_id);
  EXPECT_EQ(got->attempt, 1);
  EXPECT_EQ(got->device_index, 0);
  EXPECT_EQ(got->config.preset(), "opt1");
  EXPECT_EQ(got->config.volume(), 16);
  EXPECT_EQ(got->timeout_s, 3600);
  EXPECT_EQ(got->lease_ttl_ms, 30000);
  const RunRecord run = GetRun(got->run_id);
  EXPECT_EQ(run.state, RunState::kRunning);
  EXPECT_EQ(run.lease_expires_unix_ms, clock_.NowUnixMs() + 30000);
  const JobRecord job = GetJob(got->job_id);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempts, 1);
  EXPECT_EQ(job.current_run_id, got->run_id);
  EXPECT_EQ(GetJob(a100.jobs[0].record.job_id).state, JobState::kQueued);
  // One device, max_concurrent_jobs 1: nothing more until the run ends.
  EXPECT_FALSE(Acquire(gpu).has_value());
  EXPECT_THAT(Finish(gpu, got->run_id, RunState::kSucceeded, 0), IsOk());
  std::optional<Assignment> next = Acquire(gpu);
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->config.preset(), "opt2");
}

TEST_F(SchedulerTest, DeviceSelectorsPickTheDevice) {
  const std::string two = Register("node-a", {Gpu(0, "NVIDIA A100-SXM4-80GB", "8.0"), Gpu(1), Cpu()}, {}, 3);
  Submit({"baseline"}, {"arch=9.0", "device=cpu", "gpu=a100"});
  std::optional<Assignment> a = Acquire(two);
  std::optional<Assignment> b = Acquire(two);
  std::optional<Assignment> c = Acquire(two);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->device_index, 1);
  EXPECT_EQ(b->device_index, -1);
  EXPECT_EQ(c->device_index, 0);
  EXPECT_FALSE(Acquire(two).has_value());
}

TEST_F(SchedulerTest, FreeDeviceIndexesLimitTheChoice) {
  const std::string agent = Register("node-a", {Gpu(0), Gpu(1)}, {}, 2);
  Submit({"baseline"});
  AcquireJobRequest r;
  r.agent_id = agent;
  r.free_device_indexes = {1};
  auto got = domain_->scheduler().AcquireJob(ctx_, r);
  ASSERT_THAT(got, IsOk());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->device_index, 1);
}

TEST_F(SchedulerTest, AcquireValidatesItsRequest) {
  AcquireJobRequest r;
  EXPECT_THAT(domain_->scheduler().AcquireJob(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, "agent_id: required"));
  r.agent_id = "agent-nope";
  r.wait_ms = 30001;
  EXPECT_THAT(domain_->scheduler().AcquireJob(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, "wait_ms: 30001 is out of range (allowed 0..30000)"));
  r.wait_ms = 0;
  EXPECT_THAT(domain_->scheduler().AcquireJob(ctx_, r),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("agent_id: no agent 'agent-nope'")));
}

TEST_F(SchedulerTest, ExpiredLeasesRequeueUntilAttemptsRunOut) {
  const std::string agent = Register("node-a", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline"}, {}, 1, /*max_attempts=*/3);
  const std::string job_id = s.jobs[0].record.job_id;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    std::optional<Assignment> a = Acquire(agent);
    ASSERT_TRUE(a.has_value()) << attempt;
    EXPECT_EQ(a->attempt, attempt);
    clock_.AdvanceMs(29999);
    EXPECT_EQ(domain_->scheduler().ExpireLeases().value_or(-1), 0);
    clock_.AdvanceMs(1);
    auto expired = domain_->scheduler().ExpireLeases();
    ASSERT_THAT(expired, IsOk());
    EXPECT_EQ(*expired, 1);
    const RunRecord run = GetRun(a->run_id);
    EXPECT_EQ(run.state, RunState::kLost);
    EXPECT_EQ(run.error, "lease expired: agent node-a stopped heartbeating");
    const JobRecord job = GetJob(job_id);
    EXPECT_EQ(job.attempts, attempt);
    EXPECT_EQ(job.state, attempt < 3 ? JobState::kQueued : JobState::kFailed);
  }
  EXPECT_EQ(GetJob(job_id).error, "lease expired on attempt 3 of 3: agent node-a stopped heartbeating");
  EXPECT_FALSE(Acquire(agent).has_value());
  EXPECT_EQ(Count("runs"), 3);
  const std::vector<EventRecord> events = Events(s.study_id);
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.back().study_finished);
  EXPECT_EQ(events.back().message, "study finished: 0 succeeded, 1 failed, 0 cancelled");
}

TEST_F(SchedulerTest, HeartbeatsKeepLeasesAlive) {
  const std::string agent = Register("node-a", {Gpu(0)});
  Submit({"baseline"});
  std::optional<Assignment> a = Acquire(agent);
  ASSERT_TRUE(a.has_value());
  HeartbeatRequest hb;
  hb.agent_id = agent;
  hb.running_run_ids = {a->run_id, "run-unknown"};
  clock_.AdvanceMs(20000);
  auto result = domain_->scheduler().Heartbeat(ctx_, hb);
  ASSERT_THAT(result, IsOk());
  EXPECT_THAT(result->unknown_run_ids, ElementsAre("run-unknown"));
  EXPECT_THAT(result->cancel_run_ids, IsEmpty());
  clock_.AdvanceMs(20000);  // 40 s after the lease began, 20 s after the heartbeat
  EXPECT_EQ(domain_->scheduler().ExpireLeases().value_or(-1), 0);
  clock_.AdvanceMs(10000);
  EXPECT_EQ(domain_->scheduler().ExpireLeases().value_or(-1), 1);
  // The server now counts the run as lost: the agent hears so.
  result = domain_->scheduler().Heartbeat(ctx_, hb);
  ASSERT_THAT(result, IsOk());
  EXPECT_THAT(result->unknown_run_ids, ElementsAre(a->run_id, "run-unknown"));
  EXPECT_THAT(Finish(agent, a->run_id, RunState::kSucceeded, 0),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is lost")));
}

TEST_F(SchedulerTest, HeartbeatOfUnknownAgentIsNotFound) {
  HeartbeatRequest hb;
  hb.agent_id = "agent-000000000000";
  EXPECT_THAT(domain_->scheduler().Heartbeat(ctx_, hb),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("register again")));
}

TEST_F(SchedulerTest, HeartbeatProgressBecomesAnEvent) {
  const std::string agent = Register("node-a", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline"});
  std::optional<Assignment> a = Acquire(agent);
  ASSERT_TRUE(a.has_value());
  HeartbeatRequest hb;
  hb.agent_id = agent;
  hb.running_run_ids = {a->run_id};
  v1::Progress p;
  p.set_stage("measure");
  p.set_step(2);
  p.set_total(3);
  hb.progress = {{a->run_id, p}};
  const size_t before = Events(s.study_id).size();
  ASSERT_THAT(domain_->scheduler().Heartbeat(ctx_, hb), IsOk());
  ASSERT_THAT(domain_->scheduler().Heartbeat(ctx_, hb), IsOk());  // same report: no second event
  const std::vector<EventRecord> events = Events(s.study_id);
  ASSERT_EQ(events.size(), before + 1);
  EXPECT_THAT(events.back().progress_json, HasSubstr(R"("stage":"measure","step":2,"total":3)"));
  EXPECT_EQ(events.back().job_state, JobState::kRunning);
  EXPECT_FALSE(GetJob(a->job_id).progress_json.empty());
}

TEST_F(SchedulerTest, SucceededFinishIsIdempotent) {
  const std::string agent = Register("node-a", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline"});
  std::optional<Assignment> a = Acquire(agent);
  ASSERT_TRUE(a.has_value());
  ASSERT_THAT(Upload(agent, a->run_id, {{1, Started("NVIDIA H200", "cupti")}, {2, Step(0, 1000)}}), IsOk());
  auto state = Finish(agent, a->run_id, RunState::kSucceeded, 2);
  ASSERT_THAT(state, IsOk());
  EXPECT_EQ(*state, JobState::kSucceeded);
  const size_t events = Events(s.study_id).size();
  state = Finish(agent, a->run_id, RunState::kSucceeded, 2);
  ASSERT_THAT(state, IsOk());
  EXPECT_EQ(*state, JobState::kSucceeded);
  EXPECT_EQ(Events(s.study_id).size(), events);
  EXPECT_THAT(Finish(agent, a->run_id, RunState::kFailed, 2),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("already finished as succeeded")));
  EXPECT_EQ(GetRun(a->run_id).state, RunState::kSucceeded);
  EXPECT_TRUE(Events(s.study_id).back().study_finished);
}

TEST_F(SchedulerTest, FinishIsRefusedWhileChunksAreMissing) {
  const std::string agent = Register("node-a", {Gpu(0)});
  Submit({"baseline"});
  std::optional<Assignment> a = Acquire(agent);
  ASSERT_TRUE(a.has_value());
  ASSERT_THAT(Upload(agent, a->run_id, {{1, Started("NVIDIA H200", "cupti")}, {2, Step(0, 1)}, {3, Step(1, 1)},
                                        {4, Step(2, 1)}}),
              IsOk());
  EXPECT_THAT(Finish(agent, a->run_id, RunState::kSucceeded, 7),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("run ", a->run_id, ": seq 5..7 missing, resend")));
  ASSERT_THAT(Upload(agent, a->run_id, {{6, Step(4, 1)}}), IsOk());
  EXPECT_THAT(Finish(agent, a->run_id, RunState::kSucceeded, 7),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       absl::StrCat("run ", a->run_id, ": seq 5, 7 missing, resend")));
  EXPECT_EQ(GetRun(a->run_id).state, RunState::kRunning);
  ASSERT_THAT(Upload(agent, a->run_id, {{5, Step(3, 1)}, {7, Step(5, 1)}}), IsOk());
  EXPECT_THAT(Finish(agent, a->run_id, RunState::kSucceeded, 7), IsOk());
}

TEST(DescribeGaps, ListsRanges) {
  EXPECT_EQ(DescribeGaps(4, {}, 7), "seq 5..7 missing");
  EXPECT_EQ(DescribeGaps(0, {2, 3, 6}, 6), "seq 1, 4..5 missing");
  EXPECT_EQ(DescribeGaps(3, {}, 3), "");
  EXPECT_EQ(DescribeGaps(0, {2, 4, 6, 8, 10, 12}, 13), "seq 1, 3, 5, 7, 9 and 2 more range(s) missing");
}

TEST_F(SchedulerTest, WorkloadFailureFailsTheJobAtOnce) {
  const std::string agent = Register("node-a", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline"}, {}, 1, 3);
  std::optional<Assignment> a = Acquire(agent);
  ASSERT_TRUE(a.has_value());
  v1::WorkerMessage err;
  err.mutable_error()->set_kind("oom");
  err.mutable_error()->set_message("CUDA out of memory. Tried to allocate 2.00 GiB");
  ASSERT_THAT(Upload(agent, a->run_id, {{1, err}}), IsOk());
  auto state = Finish(agent, a->run_id, RunState::kFailed, 1, "", "line 1\nRuntimeError: CUDA out of memory\n");
  ASSERT_THAT(state, IsOk());
  EXPECT_EQ(*state, JobState::kFailed);
  const JobRecord job = GetJob(a->job_id);
  EXPECT_EQ(job.attempts, 1);
  EXPECT_EQ(job.error,
            "failed on attempt 1 of 3: oom: CUDA out of memory. Tried to allocate 2.00 GiB\n"
            "--- worker stderr (last lines) ---\nline 1\nRuntimeError: CUDA out of memory\n");
  const RunRecord run = GetRun(a->run_id);
  EXPECT_EQ(run.state, RunState::kFailed);
  EXPECT_EQ(run.error_kind, "oom");
  EXPECT_EQ(run.stderr_tail, "line 1\nRuntimeError: CUDA out of memory\n");
  EXPECT_FALSE(Acquire(agent).has_value());
}

TEST_F(SchedulerTest, LongFailureReportsAreKeptInPart) {
  const std::string agent = Register("node-a", {Gpu(0)});
  Submit({"baseline"});
  std::optional<Assignment> a = Acquire(agent);
  ASSERT_TRUE(a.has_value());
  const std::string error = "E" + std::string(100 * 1024, 'e');
  std::string stderr_text;
  for (int i = 0; i < 20000; ++i) stderr_text += absl::StrCat("line ", i, "\n");
  ASSERT_THAT(Finish(agent, a->run_id, RunState::kFailed, 0, error, stderr_text), IsOk());
  const RunRecord run = GetRun(a->run_id);
  EXPECT_EQ(run.error, error.substr(0, 64 * 1024) + " ... (truncated)");
  EXPECT_LE(run.stderr_tail.size(), 64u * 1024);
  EXPECT_EQ(run.stderr_tail.rfind("line 19999\n"), run.stderr_tail.size() - 11);
  EXPECT_EQ(run.stderr_tail.substr(0, 5), "line ");  // cut at a line start
}

TEST_F(SchedulerTest, InterruptedRunsAreRequeuedWithinAttempts) {
  const std::string agent = Register("node-a", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline"}, {}, 1, 2);
  std::optional<Assignment> a = Acquire(agent);
  ASSERT_TRUE(a.has_value());
  auto state = Finish(agent, a->run_id, RunState::kInterrupted, 0, "SIGTERM (walltime)");
  ASSERT_THAT(state, IsOk());
  EXPECT_EQ(*state, JobState::kQueued);
  std::optional<Assignment> b = Acquire(agent);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->attempt, 2);
  state = Finish(agent, b->run_id, RunState::kInterrupted, 0, "SIGTERM (walltime)");
  ASSERT_THAT(state, IsOk());
  EXPECT_EQ(*state, JobState::kFailed);
  EXPECT_EQ(GetJob(a->job_id).error, "interrupted (SIGTERM (walltime)) on attempt 2 of 2; no attempts left");
}

TEST_F(SchedulerTest, OnlyTheRunsAgentMayFinishIt) {
  const std::string agent = Register("node-a", {Gpu(0)});
  const std::string other = Register("node-b", {Gpu(0)});
  Submit({"baseline"});
  std::optional<Assignment> a = Acquire(agent);
  ASSERT_TRUE(a.has_value());
  EXPECT_THAT(Finish(other, a->run_id, RunState::kSucceeded, 0),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("may not finish it")));
  EXPECT_THAT(Finish(agent, "run-nope", RunState::kSucceeded, 0),
              StatusIs(absl::StatusCode::kNotFound, "run_id: no run 'run-nope'"));
  EXPECT_THAT(Finish(agent, a->run_id, RunState::kLost, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("state: 'lost' is not a state an agent reports")));
  EXPECT_EQ(GetRun(a->run_id).state, RunState::kRunning);
}

TEST_F(SchedulerTest, DrainingAgentsGetNoJobs) {
  const std::string agent = Register("node-a", {Gpu(0)});
  Submit({"baseline"});
  HeartbeatRequest hb;
  hb.agent_id = agent;
  hb.draining = true;
  ASSERT_THAT(domain_->scheduler().Heartbeat(ctx_, hb), IsOk());
  EXPECT_FALSE(Acquire(agent).has_value());
  hb.draining = false;
  ASSERT_THAT(domain_->scheduler().Heartbeat(ctx_, hb), IsOk());
  EXPECT_TRUE(Acquire(agent).has_value());
}

TEST_F(SchedulerTest, LongPollWakesOnSubmit) {
  const std::string agent = Register("node-a", {Gpu(0)});
  const auto start = std::chrono::steady_clock::now();
  auto waiter = std::async(std::launch::async, [&] { return Acquire(agent, 10000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Submit({"baseline"});
  std::optional<Assignment> got = waiter.get();
  const auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(got.has_value());
  EXPECT_LT(waited, std::chrono::seconds(3));
}

TEST_F(SchedulerTest, LongPollReturnsEmptyAfterWaitOrShutdown) {
  const std::string agent = Register("node-a", {Gpu(0)});
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(Acquire(agent, 300).has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(300));
  start = std::chrono::steady_clock::now();
  auto waiter = std::async(std::launch::async, [&] { return Acquire(agent, 20000); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  domain_->Shutdown();
  EXPECT_FALSE(waiter.get().has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST_F(SchedulerTest, ListAgentsReportsOnlineAndRunningJobs) {
  const std::string a = Register("node-a", {Gpu(0)});
  Register("node-b", {Cpu()});
  Submit({"baseline"}, {"gpu=h200"});
  ASSERT_TRUE(Acquire(a).has_value());
  clock_.AdvanceMs(15000);  // exactly three heartbeat intervals: still online
  auto agents = domain_->agents().ListAgents(ctx_);
  ASSERT_THAT(agents, IsOk());
  ASSERT_EQ(agents->size(), 2u);
  EXPECT_EQ((*agents)[0].record.name, "node-a");
  EXPECT_EQ((*agents)[0].running_jobs, 1);
  EXPECT_TRUE((*agents)[0].online);
  clock_.AdvanceMs(1);
  agents = domain_->agents().ListAgents(ctx_);
  ASSERT_THAT(agents, IsOk());
  EXPECT_FALSE((*agents)[0].online);
  EXPECT_EQ((*agents)[1].running_jobs, 0);
}

}  // namespace
}  // namespace medprof::server::testing
