// JobRunner with real worker processes: /bin/sh scripts that write prepared records to fd 3
// and end in the ways a medprof-worker can end.
#include "agent/agent/job_runner.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include "common/file_util.h"
#include "common/result_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/unit/agent/test_files.h"

namespace medprof::agent {
namespace {

using ::medprof::agent::testing::FreshDir;
using ::medprof::agent::testing::TempRoot;
using ::medprof::agent::testing::WriteTemp;

using ::testing::HasSubstr;
using ::testing::Not;

v1::WorkerMessage Started() {
  v1::WorkerMessage m;
  m.mutable_started()->set_backend("cpu");
  m.mutable_started()->set_parameters(1234);
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
  m.mutable_step()->set_wall_ns(5'000'000 + step);
  return m;
}
v1::WorkerMessage Summary() {
  v1::WorkerMessage m;
  m.mutable_summary()->set_measured_steps(2);
  return m;
}
v1::WorkerMessage Error(const std::string& kind, const std::string& message) {
  v1::WorkerMessage m;
  m.mutable_error()->set_kind(kind);
  m.mutable_error()->set_message(message);
  return m;
}

class JobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = FreshDir("runner"); }

  // Writes the records the script will copy to fd 3 (plus `tail_bytes` of garbage-free cut
  // record when > 0) and the script itself.
  std::string Script(const std::vector<v1::WorkerMessage>& records, const std::string& after,
                     size_t cut_record_bytes = 0) {
    std::string bytes;
    for (const auto& r : records) bytes += EncodeDelimited(r);
    if (cut_record_bytes > 0) bytes += EncodeDelimited(Step(99)).substr(0, cut_record_bytes);
    std::ofstream(root_ + "/records.bin", std::ios::binary) << bytes;
    const std::string path = root_ + "/worker.sh";
    std::ofstream(path) << "#!/bin/sh\necho 'worker says hello' >&2\ncat '" << root_ << "/records.bin' >&3\n"
                        << after;
    ::chmod(path.c_str(), 0755);
    return path;
  }

  // Runs one assignment to its end; returns the recorded outcome.
  v1::FinishRunRequest Run(const std::string& script, int timeout_s = 0,
                           const std::function<void(JobRunner&)>& while_running = nullptr) {
    v1::Assignment a;
    a.set_run_id("run-1");
    a.set_device_index(-1);
    a.set_timeout_s(timeout_s);
    a.mutable_config()->set_preset("baseline");
    auto created = RunSpool::Create(root_ + "/run-1", a);
    EXPECT_TRUE(created.ok()) << created.status();
    spool_ = *std::move(created);
    OfferedDevice cpu;
    cpu.device.set_index(-1);
    cpu.device.set_kind("cpu");
    LaunchSpec spec = MakeWorkerLaunchSpec(script, spool_->dir(), "run-1", cpu, "");
    v1::Environment env;
    env.set_host("test-host");
    RunnerOptions options;
    options.kill_grace_ms = 300;
    options.poll_ms = 10;
    std::atomic<bool> finished{false};
    RunnerCallbacks callbacks;
    callbacks.on_chunk = [this] { ++chunks_notified_; };
    callbacks.prepare = prepare_;
    callbacks.on_finished = [&](const std::string& id) {
      EXPECT_EQ(id, "run-1");
      finished = true;
    };
    runner_ = std::make_unique<JobRunner>(spool_, a, spec, env, launcher_.get(), options, callbacks);
    runner_->Start();
    if (while_running) while_running(*runner_);
    runner_->Join();
    EXPECT_TRUE(finished);
    EXPECT_TRUE(runner_->finished());
    EXPECT_TRUE(spool_->outcome().has_value());
    // What is on disk matches what the runner kept in memory.
    auto reopened = RunSpool::Open(spool_->dir());
    EXPECT_TRUE(reopened.ok());
    EXPECT_TRUE((*reopened)->outcome().has_value());
    EXPECT_EQ((*reopened)->outcome()->SerializeAsString(), spool_->outcome()->SerializeAsString());
    return *spool_->outcome();
  }

  std::string root_;
  std::unique_ptr<WorkerLauncher> launcher_ = MakeProcessLauncher();
  std::shared_ptr<RunSpool> spool_;
  std::unique_ptr<JobRunner> runner_;
  std::atomic<int> chunks_notified_{0};
  std::function<absl::StatusOr<std::vector<std::string>>()> prepare_;
};

TEST_F(JobRunnerTest, ACompleteRunSucceedsWithEveryRecordSpooledInOrder) {
  const v1::FinishRunRequest out =
      Run(Script({Started(), Progress(1), Step(0), Step(1), Progress(2), Summary()}, "exit 0\n"));
  EXPECT_EQ(v1::RunState_Name(out.state()), "RUN_SUCCEEDED");
  EXPECT_EQ(out.error(), "");
  EXPECT_EQ(out.run_id(), "run-1");
  EXPECT_EQ(out.last_seq(), 6u);
  EXPECT_EQ(out.exit_code(), 0);
  EXPECT_EQ(out.stderr_tail(), "worker says hello\n");
  EXPECT_EQ(out.agent_environment().host(), "test-host");
  EXPECT_EQ(chunks_notified_.load(), 6);
  auto chunks = spool_->ReadChunks(1, 100, 1 << 20);
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 6u);
  EXPECT_TRUE((*chunks)[0].message().has_started());
  EXPECT_EQ((*chunks)[3].message().step().step(), 1);
  EXPECT_TRUE((*chunks)[5].message().has_summary());
  for (size_t i = 0; i < chunks->size(); ++i) EXPECT_EQ((*chunks)[i].seq(), i + 1);
  ASSERT_TRUE(runner_->progress().has_value());
  EXPECT_EQ(runner_->progress()->step(), 2);
}

TEST_F(JobRunnerTest, AWorkerErrorFailsTheRunWithItsKindAndMessage) {
  const v1::FinishRunRequest out =
      Run(Script({Started(), Error("oom", "CUDA out of memory. Tried to allocate 18.00 GiB")}, "exit 1\n"));
  EXPECT_EQ(v1::RunState_Name(out.state()), "RUN_FAILED");
  EXPECT_EQ(out.error(), "oom: CUDA out of memory. Tried to allocate 18.00 GiB");
  EXPECT_EQ(out.exit_code(), 1);
  EXPECT_EQ(out.last_seq(), 2u);
}

TEST_F(JobRunnerTest, AnInterruptedWorkerErrorMeansInterrupted) {
  const v1::FinishRunRequest out =
      Run(Script({Started(), Error("interrupted", "received SIGTERM")}, "exit 0\n"));
  EXPECT_EQ(v1::RunState_Name(out.state()), "RUN_INTERRUPTED");
  EXPECT_EQ(out.error(), "interrupted: received SIGTERM");
}

TEST_F(JobRunnerTest, ACrashIsReportedWithTheSignal) {
  const v1::FinishRunRequest out = Run(Script({Started(), Step(0)}, "kill -SEGV $$\n"));
  EXPECT_EQ(v1::RunState_Name(out.state()), "RUN_FAILED");
  EXPECT_EQ(out.error(), "worker crashed: signal 11 (SIGSEGV)");
  EXPECT_EQ(out.exit_code(), -11);
  EXPECT_EQ(out.last_seq(), 2u);
}

TEST_F(JobRunnerTest, ANonZeroExitWithoutAnErrorRecord) {
  const v1::FinishRunRequest out = Run(Script({Started()}, "echo 'Traceback: boom' >&2\nexit 7\n"));
  EXPECT_EQ(v1::RunState_Name(out.state()), "RUN_FAILED");
  EXPECT_EQ(out.error(), "worker exited with code 7");
  EXPECT_EQ(out.exit_code(), 7);
  EXPECT_EQ(out.stderr_tail(), "worker says hello\nTraceback: boom\n");
}

TEST_F(JobRunnerTest, ATruncatedLastRecordKeepsTheCompleteOnes) {
  const v1::FinishRunRequest out = Run(Script({Started(), Step(0), Step(1)}, "kill -KILL $$\n", 5));
  EXPECT_EQ(v1::RunState_Name(out.state()), "RUN_FAILED");
  EXPECT_THAT(out.error(),
              HasSubstr("worker crashed: signal 9 (SIGKILL); the last result record was cut short"));
  EXPECT_EQ(out.last_seq(), 3u);
  EXPECT_EQ(spool_->last_seq(), 3u);
}

TEST_F(JobRunnerTest, ATimeoutStopsTheWorkerEvenIfItIgnoresSigterm) {
  const auto start = std::chrono::steady_clock::now();
  const v1::FinishRunRequest out =
      Run(Script({Started()}, "trap '' TERM\nwhile :; do sleep 0.05; done\n"), 1);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(v1::RunState_Name(out.state()), "RUN_FAILED");
  EXPECT_EQ(out.error(), "timeout after 1 s");
  EXPECT_EQ(out.exit_code(), -SIGKILL);
  EXPECT_EQ(out.last_seq(), 1u);
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_GE(took, std::chrono::milliseconds(1000));
}

TEST_F(JobRunnerTest, ACancelEndsTheRunCancelled) {
  const v1::FinishRunRequest out = Run(Script({Started()}, "exec sleep 60\n"), 0, [](JobRunner& r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    r.Stop(StopReason::kCancelled, 5000);
  });
  EXPECT_EQ(v1::RunState_Name(out.state()), "RUN_CANCELLED");
  EXPECT_EQ(out.error(), "cancelled by the server");
  EXPECT_EQ(out.exit_code(), -SIGTERM);
}

TEST_F(JobRunnerTest, AnAgentDrainInterruptsTheRun) {
  // The worker reacts to SIGTERM the way medprof-worker does: an "interrupted" error record.
  const std::string trap =
      absl::StrCat("trap 'cat \"", root_, "/term.bin\" >&3; exit 0' TERM\nwhile :; do sleep 0.05; done\n");
  std::ofstream(root_ + "/term.bin", std::ios::binary)
      << EncodeDelimited(Error("interrupted", "received SIGTERM"));
  const v1::FinishRunRequest out = Run(Script({Started()}, trap), 0, [](JobRunner& r) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    r.Stop(StopReason::kInterrupted, 5000);
  });
  EXPECT_EQ(v1::RunState_Name(out.state()), "RUN_INTERRUPTED");
  EXPECT_EQ(out.error(), "agent received SIGTERM");
  EXPECT_EQ(out.exit_code(), 0);
  EXPECT_EQ(out.last_seq(), 2u) << "the worker's last record is kept";
}

// The prepare step (the agent fetching a user model) adds worker arguments, or fails the run
// with its cause before any worker starts.
TEST_F(JobRunnerTest, PrepareAddsWorkerArgumentsBeforeTheLaunch) {
  prepare_ = [] { return std::vector<std::string>{"--model", "/cache/denoiser.pt"}; };
  const v1::FinishRunRequest out =
      Run(Script({Started(), Step(0), Summary()}, "echo \"$@\" > '" + root_ + "/args'\nexit 0\n"));
  EXPECT_EQ(v1::RunState_Name(out.state()), "RUN_SUCCEEDED");
  std::ifstream args(root_ + "/args");
  std::string line;
  std::getline(args, line);
  EXPECT_THAT(line, HasSubstr("--result-fd 3 --model /cache/denoiser.pt"));
}

TEST_F(JobRunnerTest, APrepareFailureFailsTheRunWithoutStartingTheWorker) {
  prepare_ = []() -> absl::StatusOr<std::vector<std::string>> {
    return absl::NotFoundError("model d.pt (abc): FetchModel: sha256: project 'lab-a' holds no model abc");
  };
  const v1::FinishRunRequest out = Run(Script({Started()}, "exit 0\n"));
  EXPECT_EQ(v1::RunState_Name(out.state()), "RUN_FAILED");
  EXPECT_EQ(out.error(), "model d.pt (abc): FetchModel: sha256: project 'lab-a' holds no model abc");
  EXPECT_THAT(out.stderr_tail(), Not(HasSubstr("worker says hello")));
  EXPECT_EQ(out.last_seq(), 0u);
}

TEST_F(JobRunnerTest, AMissingWorkerEndsTheRunInterrupted) {
  const v1::FinishRunRequest out = Run(root_ + "/no-such-worker");
  EXPECT_EQ(v1::RunState_Name(out.state()), "RUN_INTERRUPTED");
  EXPECT_THAT(out.error(), HasSubstr("could not start the worker: starting worker " + root_ +
                                     "/no-such-worker: No such file or directory"));
  EXPECT_EQ(out.last_seq(), 0u);
}

TEST_F(JobRunnerTest, ASpoolWriteErrorFailsTheRunWithTheCauseAndStopsTheWorker) {
  // Two records fit under the file size limit; the third does not (EFBIG, like a full disk).
  // The worker would run for a minute; the runner must stop it.
  const std::string script =
      Script({Started(), Step(0)}, "sleep 0.3\ncat '" + root_ + "/more.bin' >&3\nexec sleep 60\n");
  v1::WorkerMessage big;
  big.mutable_progress()->set_message(std::string(4096, 'x'));
  std::ofstream(root_ + "/more.bin", std::ios::binary) << EncodeDelimited(big);
  struct rlimit old;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto previous = std::signal(SIGXFSZ, SIG_IGN);
  v1::FinishRunRequest out;
  const auto start = std::chrono::steady_clock::now();
  out = Run(script, 0, [&](JobRunner&) {
    // Let the spool directory and the first records be written, then cap file sizes.
    for (int i = 0; i < 200 && spool_->last_seq() < 2; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    struct rlimit small = old;
    small.rlim_cur = 2048;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(v1::RunState_Name(out.state()), "RUN_FAILED");
  EXPECT_THAT(out.error(), HasSubstr("spool write failed: appending result 3 to " + root_ +
                                     "/run-1/results.log: File too large"));
  EXPECT_EQ(out.last_seq(), 2u);
}

}  // namespace
}  // namespace medprof::agent
