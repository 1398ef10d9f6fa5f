// SIGKILL at random points of a study: of the agent, of the worker, of the server — 20 trials
// each (MEDPROF_FAULT_TRIALS), seeded and reproducible (MEDPROF_FAULT_SEED, printed by every
// trial). Each trial submits one job of the tiny model, waits a random time after its run
// started (or kills before it starts), kills, brings the victim back (a restarted agent with
// the same name and work dir, a restarted server on the same port and file; a killed worker
// stays dead), waits for the study to end and checks the invariants of fault_common.h.
//
// Expected outcomes: after an agent or server kill the job succeeds (requeued within its
// attempts; the killed run is lost or finishes after the restart); after a worker kill it
// fails at once with the crash as its cause (a crash is the workload's own failure, never
// retried), or succeeds when the kill came after the worker had exited.
#include <signal.h>

#include <cstdlib>
#include <random>

#include "tests/integration/fault_common.h"

namespace medprof::itest::fault {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr int kSteps = 4;

int Trials() {
  const char* v = std::getenv("MEDPROF_FAULT_TRIALS");
  return v != nullptr ? std::max(1, std::atoi(v)) : 20;
}

uint64_t Seed(const char* victim) {
  const char* v = std::getenv("MEDPROF_FAULT_SEED");
  const uint64_t base = v != nullptr ? std::strtoull(v, nullptr, 10) : 20261202;
  return base ^ std::hash<std::string>()(victim);
}

// Milliseconds to wait before the kill: 1 in 5 trials kills right after submission (before
// or while the job is leased); the others after the run started, up to 2.5 s into it (the
// tiny model's run is about that long on CI's cores).
struct KillPoint {
  bool before_run;
  int delay_ms;
};
KillPoint Draw(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> coin(0, 4), delay(0, 2500);
  KillPoint k{coin(rng) == 0, delay(rng)};
  if (k.before_run) k.delay_ms /= 10;
  return k;
}

class KillTrials : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("kill");
    db_ = dir_ + "/medprof.db";
    auto server = ServerFixture::Start(db_, FastLeases());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    port_ = server_->port();
    StartTheAgent();
  }
  void StartTheAgent() {
    auto agent = StartAgent(server_->address(), dir_ + "/agent", "agent-k");
    ASSERT_TRUE(agent.ok()) << agent.status();
    agent_ = std::move(*agent);
  }
  void RestartServer() {
    auto server = ServerFixture::Start(db_, FastLeases(), port_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  // Waits for the kill point of `k` in `study`.
  void WaitKillPoint(const std::string& study, const KillPoint& k) {
    if (!k.before_run) {
      ASSERT_TRUE(Eventually([&] { return HasRunningRun(db_, study) || StudyDone(db_, study); }, kLong));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(k.delay_ms));
  }
  void Finish(const std::string& study, const std::string& why) {
    ASSERT_TRUE(Eventually([&] { return StudyDone(db_, study); }, kLong))
        << why << "\nagent:\n" << agent_->AllOutput().substr(0, 20000);
  }

  std::string dir_, db_;
  int port_ = 0;
  std::unique_ptr<ServerFixture> server_;
  std::unique_ptr<Process> agent_;
};

TEST_F(KillTrials, AgentKilledAtRandomPoints) {
  std::mt19937_64 rng(Seed("agent"));
  int succeeded = 0;
  for (int trial = 0; trial < Trials(); ++trial) {
    const KillPoint k = Draw(rng);
    const std::string why = absl::StrCat("agent trial ", trial, " (seed ", Seed("agent"), "): kill ",
                                         k.before_run ? "before the run, " : "into the run, ", k.delay_ms, " ms");
    SCOPED_TRACE(why);
    const std::string study = Submit(server_->address(), kSteps);
    ASSERT_FALSE(study.empty());
    WaitKillPoint(study, k);
    agent_->Signal(SIGKILL);
    ASSERT_TRUE(agent_->Wait(std::chrono::seconds(10)).has_value());
    // The orphaned worker notices its agent is gone (its result channel breaks) or is left to
    // finish; either way the run's lease lapses unless the restarted agent picks it up.
    StartTheAgent();
    Finish(study, why);
    const std::string state = CheckInvariants(db_, study, kSteps);
    EXPECT_EQ(state, "succeeded") << why;
    succeeded += state == "succeeded";
  }
  std::printf("agent kills: %d trials, %d studies succeeded\n", Trials(), succeeded);
}

// How long a worker of this agent lives, from its process appearing to its exit: one study
// run to the end without a kill. The worker trials draw their kill points inside this window
// (scaled down by a margin), so the draw follows the machine's speed instead of assuming one.
std::chrono::milliseconds WorkerLifetime(const std::string& address, const std::string& db,
                                         const std::string& agent_dir) {
  const std::string study = Submit(address, kSteps);
  EXPECT_FALSE(study.empty());
  using Clock = std::chrono::steady_clock;
  Eventually([&] { return !WorkersMentioning(agent_dir).empty() || StudyDone(db, study); }, kLong);
  const auto born = Clock::now();
  Eventually([&] { return WorkersMentioning(agent_dir).empty(); }, kLong, std::chrono::milliseconds(5));
  const auto lifetime = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - born);
  Eventually([&] { return StudyDone(db, study); }, kLong);
  EXPECT_EQ(CheckInvariants(db, study, kSteps), "succeeded") << "the calibration run is not killed";
  return lifetime;
}

TEST_F(KillTrials, WorkerKilledAtRandomPoints) {
  const auto lifetime = WorkerLifetime(server_->address(), db_, dir_ + "/agent");
  // Kill points fall in the first 70 % of a worker's life: late enough to hit the steps and
  // the upload, early enough that a slower trial than the calibration still finds it alive.
  const int window_ms = std::max<int>(1, static_cast<int>(lifetime.count() * 7 / 10));
  std::printf("worker lifetime %lld ms; kill window 0-%d ms after the worker starts\n",
              static_cast<long long>(lifetime.count()), window_ms);
  std::mt19937_64 rng(Seed("worker"));
  std::uniform_int_distribution<int> delay(0, window_ms);
  int failed = 0, succeeded = 0, missed = 0;
  for (int trial = 0; trial < Trials(); ++trial) {
    const int delay_ms = delay(rng);
    const std::string why = absl::StrCat("worker trial ", trial, " (seed ", Seed("worker"), "): kill ", delay_ms,
                                         " ms after the worker started");
    SCOPED_TRACE(why);
    const std::string study = Submit(server_->address(), kSteps);
    ASSERT_FALSE(study.empty());
    // The worker of this agent (its work dir is on the command line).
    std::vector<pid_t> workers;
    Eventually(
        [&] {
          workers = WorkersMentioning(dir_ + "/agent");
          return !workers.empty() || StudyDone(db_, study);
        },
        kLong, std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    for (pid_t pid : workers) kill(pid, SIGKILL);
    missed += workers.empty();
    Finish(study, why);
    const std::string state = CheckInvariants(db_, study, kSteps);
    EXPECT_THAT(state, AnyOf("failed", "succeeded")) << why;
    if (state == "failed") {
      ++failed;
      const auto error = Rows(db_, absl::StrCat("SELECT error FROM jobs WHERE study_id = '", study, "'"));
      ASSERT_FALSE(error.empty());
      EXPECT_THAT(error[0][0], HasSubstr("signal 9")) << why;
      EXPECT_EQ(Count(db_, absl::StrCat("SELECT COUNT(*) FROM runs WHERE study_id = '", study, "'")), 1)
          << "a crash is not retried";
    } else {
      ++succeeded;
    }
  }
  std::printf("worker kills: %d trials, %d failed with the crash, %d succeeded (worker gone before the kill: %d)\n",
              Trials(), failed, succeeded, missed);
  // A kill that reached a live worker must fail the job; only a worker that had already exited
  // (a trial slower to start than to finish, or one past the calibrated window) may succeed.
  EXPECT_GE(failed, Trials() / 2) << "most kills should land on a live worker (lifetime " << lifetime.count()
                                  << " ms)";
}

TEST_F(KillTrials, ServerKilledAtRandomPoints) {
  std::mt19937_64 rng(Seed("server"));
  std::uniform_int_distribution<int> down_ms(0, 1000);
  int succeeded = 0;
  for (int trial = 0; trial < Trials(); ++trial) {
    const KillPoint k = Draw(rng);
    const int down = down_ms(rng);
    const std::string why =
        absl::StrCat("server trial ", trial, " (seed ", Seed("server"), "): kill ",
                     k.before_run ? "before the run, " : "into the run, ", k.delay_ms, " ms, down ", down, " ms");
    SCOPED_TRACE(why);
    const std::string study = Submit(server_->address(), kSteps);
    ASSERT_FALSE(study.empty());
    WaitKillPoint(study, k);
    server_->process().Signal(SIGKILL);
    ASSERT_TRUE(server_->process().Wait(std::chrono::seconds(10)).has_value());
    std::this_thread::sleep_for(std::chrono::milliseconds(down));
    RestartServer();
    Finish(study, why);
    const std::string state = CheckInvariants(db_, study, kSteps);
    EXPECT_EQ(state, "succeeded") << why;
    succeeded += state == "succeeded";
  }
  std::printf("server kills: %d trials, %d studies succeeded\n", Trials(), succeeded);
}

}  // namespace
}  // namespace medprof::itest::fault
