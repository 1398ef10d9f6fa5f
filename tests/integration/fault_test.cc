// Failure paths on real parts: cancel, agent SIGKILL, agent SIGTERM, server restart mid-upload.
#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/result_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"

namespace medprof::itest {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr auto kLong = std::chrono::minutes(4);

// Server flags that make lease expiry quick enough for a test.
std::vector<std::string> FastLeases() {
  return {"--lease-ttl-ms", "2500", "--heartbeat-interval-ms", "400"};
}

std::string Submit(const std::string& address, int steps, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"submit", "--presets", "baseline", "--steps", std::to_string(steps),
                                   "--warmup", "0", "--grad-accum", "1", "--max-attempts", "3",
                                   "--format", "json"};
  for (const auto& f : TinyModelFlags()) args.push_back(f);
  args.insert(args.end(), extra.begin(), extra.end());
  CommandResult r = Cli(address, args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (r.exit_code != 0) return "";
  return json::parse(r.out).at("study_id").get<std::string>();
}

int64_t Count(const std::string& db_path, const std::string& sql) {
  auto db = DbProbe::Open(db_path);
  if (!db.ok()) return -1;
  return (*db)->Int(sql).value_or(-1);
}

std::string One(const std::string& db_path, const std::string& sql) {
  auto db = DbProbe::Open(db_path);
  if (!db.ok()) return "";
  auto rows = (*db)->Rows(sql);
  if (!rows.ok() || rows->empty()) return "";
  return rows->front().front();
}

// Waits until the study's single job has a running run with at least `min_steps` stored steps.
bool WaitRunningWithSteps(const std::string& db, const std::string& study, int min_steps) {
  return Eventually(
      [&] {
        return Count(db, absl::StrCat("SELECT COUNT(*) FROM run_steps s JOIN runs r ON s.run_id = r.run_id "
                                      "WHERE r.study_id = '", study, "' AND r.state = 'running'")) >= min_steps;
      },
      kLong);
}

bool StudyDone(const std::string& db, const std::string& study) {
  return Count(db, absl::StrCat("SELECT COUNT(*) FROM jobs WHERE study_id = '", study,
                                "' AND state IN ('queued', 'running')")) == 0;
}

// medprof-worker processes (argv[0] ends in medprof-worker) whose command line mentions `needle` (e.g. an agent's work dir).
int WorkersMentioning(const std::string& needle) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const std::string argv0 = cmd.substr(0, cmd.find('\0'));
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    const bool is_worker = argv0.size() >= 14 && argv0.compare(argv0.size() - 14, 14, "medprof-worker") == 0;
    if (is_worker && cmd.find(needle) != std::string::npos) ++n;
  }
  return n;
}

TEST(FaultTest, CancelStopsTheRunningWorkerAndMarksJobsCancelled) {
  const std::string dir = MakeTempDir("cancel");
  auto server = ServerFixture::Start(dir + "/medprof.db", FastLeases());
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string work = dir + "/agent";
  auto agent = StartAgent((*server)->address(), work, "agent-c");
  ASSERT_TRUE(agent.ok());
  const std::string db = (*server)->db_path();
  const std::string study = Submit((*server)->address(), 5000);
  ASSERT_FALSE(study.empty());
  ASSERT_TRUE(WaitRunningWithSteps(db, study, 1)) << (*agent)->AllOutput();
  ASSERT_EQ(WorkersMentioning(work), 1);

  CommandResult c = Cli((*server)->address(), {"cancel", study, "--reason", "test"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  ASSERT_TRUE(Eventually([&] { return WorkersMentioning(work) == 0; }, std::chrono::seconds(30)))
      << "the worker is still running";
  EXPECT_EQ(One(db, absl::StrCat("SELECT state FROM jobs WHERE study_id = '", study, "'")), "cancelled");
  ASSERT_TRUE(Eventually(
      [&] { return One(db, absl::StrCat("SELECT state FROM runs WHERE study_id = '", study, "'")) == "cancelled"; },
      std::chrono::seconds(30)));
  EXPECT_TRUE((*agent)->Running()) << "cancelling a job must not stop the agent";
}

TEST(FaultTest, AgentKilledMidJobIsRequeuedAndCompletesOnAnotherAgent) {
  const std::string dir = MakeTempDir("kill");
  auto server = ServerFixture::Start(dir + "/medprof.db", FastLeases());
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string db = (*server)->db_path();
  auto a = StartAgent((*server)->address(), dir + "/a", "agent-a");
  ASSERT_TRUE(a.ok());
  constexpr int kSteps = 60;
  const std::string study = Submit((*server)->address(), kSteps);
  ASSERT_TRUE(WaitRunningWithSteps(db, study, 2)) << (*a)->AllOutput();

  (*a)->Signal(SIGKILL);
  ASSERT_TRUE((*a)->Wait(std::chrono::seconds(10)).has_value());
  ASSERT_TRUE(Eventually([&] { return WorkersMentioning(dir + "/a") == 0; }, std::chrono::seconds(10)))
      << "the worker must die with its agent";

  auto b = StartAgent((*server)->address(), dir + "/b", "agent-b");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(Eventually([&] { return StudyDone(db, study); }, kLong)) << (*b)->AllOutput();

  EXPECT_EQ(One(db, absl::StrCat("SELECT state FROM jobs WHERE study_id = '", study, "'")), "succeeded");
  EXPECT_EQ(Count(db, absl::StrCat("SELECT attempts FROM jobs WHERE study_id = '", study, "'")), 2);
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) FROM runs WHERE study_id = '", study, "' AND state = 'lost'")), 1);
  const std::string ok_run =
      One(db, absl::StrCat("SELECT run_id FROM runs WHERE study_id = '", study, "' AND state = 'succeeded'"));
  ASSERT_FALSE(ok_run.empty());
  EXPECT_EQ(One(db, absl::StrCat("SELECT a.name FROM runs r JOIN agents a ON r.agent_id = a.agent_id WHERE r.run_id = '",
                                 ok_run, "'")),
            "agent-b");
  // Exactly one row per measured step for the completed run: no duplicates.
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) FROM run_steps WHERE run_id = '", ok_run, "'")), kSteps);
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(DISTINCT step) FROM run_steps WHERE run_id = '", ok_run, "'")),
            kSteps);
}

TEST(FaultTest, AgentSigtermInterruptsTheRunWhichCompletesElsewhere) {
  const std::string dir = MakeTempDir("term");
  auto server = ServerFixture::Start(dir + "/medprof.db", FastLeases());
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string db = (*server)->db_path();
  auto a = StartAgent((*server)->address(), dir + "/a", "agent-a");
  ASSERT_TRUE(a.ok());
  const std::string study = Submit((*server)->address(), 40);
  ASSERT_TRUE(WaitRunningWithSteps(db, study, 1));

  (*a)->Signal(SIGTERM);
  auto code = (*a)->Wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value()) << "agent did not stop on SIGTERM";
  EXPECT_EQ(*code, 0);
  // Nothing stays running on the server: the run is interrupted and the job is queued again.
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) FROM runs WHERE study_id = '", study, "' AND state = 'running'")), 0);
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) FROM runs WHERE study_id = '", study,
                                   "' AND state = 'interrupted'")),
            1);
  EXPECT_EQ(One(db, absl::StrCat("SELECT state FROM jobs WHERE study_id = '", study, "'")), "queued");

  auto b = StartAgent((*server)->address(), dir + "/b", "agent-b");
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(Eventually([&] { return StudyDone(db, study); }, kLong)) << (*b)->AllOutput();
  EXPECT_EQ(One(db, absl::StrCat("SELECT state FROM jobs WHERE study_id = '", study, "'")), "succeeded");
}

TEST(FaultTest, ServerRestartDuringUploadLosesNothingAcknowledged) {
  const std::string dir = MakeTempDir("restart");
  const std::string db = dir + "/medprof.db";
  auto server = ServerFixture::Start(db);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  const std::string address = (*server)->address();
  auto agent = StartAgent(address, dir + "/agent", "agent-r", {"--worker", WriteTapWorker(dir)});
  ASSERT_TRUE(agent.ok());
  constexpr int kSteps = 40;
  const std::string study = Submit(address, kSteps);
  ASSERT_TRUE(WaitRunningWithSteps(db, study, 2));

  // Kill the server hard while the agent is uploading, keep it down for a while, restart it on
  // the same port and DB file.
  (*server)->process().Signal(SIGKILL);
  ASSERT_TRUE((*server)->process().Wait(std::chrono::seconds(10)).has_value());
  const int64_t steps_before = Count(db, "SELECT COUNT(*) FROM run_steps");
  EXPECT_GE(steps_before, 2);
  std::this_thread::sleep_for(std::chrono::seconds(2));
  server = ServerFixture::Start(db, {}, port);
  ASSERT_TRUE(server.ok()) << server.status();

  ASSERT_TRUE(Eventually([&] { return StudyDone(db, study); }, kLong)) << (*agent)->AllOutput();
  EXPECT_EQ(One(db, absl::StrCat("SELECT state FROM jobs WHERE study_id = '", study, "'")), "succeeded");
  const std::string run = One(db, absl::StrCat("SELECT run_id FROM runs WHERE study_id = '", study, "'"));
  // One run, every measured step exactly once, every chunk exactly once.
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) FROM runs WHERE study_id = '", study, "'")), 1);
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) FROM run_steps WHERE run_id = '", run, "'")), kSteps);
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(DISTINCT step) FROM run_steps WHERE run_id = '", run, "'")), kSteps);
  const int64_t chunks = Count(db, absl::StrCat("SELECT COUNT(*) FROM run_chunks WHERE run_id = '", run, "'"));
  EXPECT_EQ(Count(db, absl::StrCat("SELECT MAX(seq) FROM run_chunks WHERE run_id = '", run, "'")), chunks)
      << "no gaps in the stored sequence";
  // Stored row counts equal what the worker produced (read from the tap of its result channel).
  int records = 0, steps = 0, ops = 0;
  for (const auto& m : ReadTap(dir + "/tap/" + run + ".pb")) {
    ++records;
    steps += m.has_step();
    if (m.has_ops()) ops += m.ops().ops_size();
  }
  EXPECT_EQ(steps, kSteps);
  EXPECT_EQ(chunks, records);
  EXPECT_GT(ops, 0);
  EXPECT_EQ(Count(db, absl::StrCat("SELECT COUNT(*) FROM run_ops WHERE run_id = '", run, "'")), ops);
}

}  // namespace
}  // namespace medprof::itest
