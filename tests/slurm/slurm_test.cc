// The site batch scripts (deploy/slurm) under a real Slurm (tests/slurm/cluster.sh): submitted
// with sbatch as a user would, with only the site parts overridden (env file: server, CA,
// token, bare agent binary, state dir; sbatch options: account, sizes, time, signal). Each
// guarantee is checked on the server's state and its SQLite rows (slurm_site.h's invariants:
// integrity_check, nothing left running, every chunk and step stored once, step rows equal to
// what the workers wrote), never on log lines.
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/slurm/slurm_site.h"

namespace medprof::slurmtest {
namespace {

namespace fs = std::filesystem;
using ::testing::UnorderedElementsAre;

constexpr auto kLong = std::chrono::seconds(240);
constexpr int kGpus = 4;  // the node's fake GPUs

std::string Stampede() { return "stampede3-h100.sbatch"; }
std::string Expanse() { return "expanse-gpu-shared.sbatch"; }
// What a user changes on the sbatch line for this machine: the account Expanse insists on,
// and sizes this 2-core node can give (Expanse's script asks for 10 CPUs and 92 GB).
std::vector<std::string> ExpanseSizes() { return {"--account=medprof-ci", "--cpus-per-task=1", "--mem=500M"}; }

// Seconds since the epoch of Slurm's "2026-12-04T14:01:02" (the client runs with TZ=UTC) or of
// the scripts' "2026-12-04T14:01:02Z".
int64_t UtcSeconds(const std::string& text) {
  tm t{};
  if (strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &t) == nullptr) return -1;
  return static_cast<int64_t>(timegm(&t));
}

class SlurmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto c = SlurmCluster::Start(itest::MakeTempDir("cluster") + "/slurm", kGpus);
    if (c.ok()) {
      cluster_ = c->release();
    } else {
      start_error_ = new absl::Status(c.status());
    }
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
    delete start_error_;
    start_error_ = nullptr;
  }
  void SetUp() override {
    if (start_error_ != nullptr && absl::IsUnavailable(*start_error_)) {
      GTEST_SKIP() << "no Slurm on this machine: " << start_error_->message();
    }
    ASSERT_NE(cluster_, nullptr) << *start_error_;
    auto site = SlurmSite::Start(cluster_, lease_ttl_ms_);
    ASSERT_TRUE(site.ok()) << site.status();
    site_ = *std::move(site);
  }
  void TearDown() override {
    if (site_ == nullptr) return;
    // Leave the cluster empty for the next test: every job of this one ends.
    for (const std::string& id : jobs_) site_->Slurm({"scancel", id});
    EXPECT_TRUE(itest::Eventually([&] { return site_->Slurm({"squeue", "-h"}).out.empty(); },
                                  std::chrono::seconds(90), std::chrono::milliseconds(250)))
        << site_->Slurm({"squeue"}).out;
  }

  std::string Submit(const std::string& script, const std::string& env_file, const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env = {}) {
    std::string id = site_->Sbatch(script, env_file, args, env);
    if (!id.empty()) jobs_.push_back(id);
    return id;
  }
  std::string AgentId(const std::string& name) {
    auto rows = site_->Rows(absl::StrCat("SELECT agent_id FROM agents WHERE name = '", name, "'"));
    return rows.empty() ? "" : rows[0][0];
  }
  std::map<std::string, std::string> Labels(const std::string& name) {
    std::map<std::string, std::string> out;
    for (const auto& r : site_->Rows(absl::StrCat("SELECT l.key, l.value FROM agent_labels l JOIN agents a USING "
                                                  "(agent_id) WHERE a.name = '", name, "'"))) {
      out[r[0]] = r[1];
    }
    return out;
  }
  bool WaitRegistered(const std::string& name, const std::string& slurm_job) {
    return itest::Eventually([&] { return Labels(name)["slurm_job_id"] == slurm_job; }, std::chrono::seconds(60),
                             std::chrono::milliseconds(100));
  }
  // Waits for a running run of `study` on agent `name` with at least `steps` stored steps.
  bool WaitRunningSteps(const std::string& study, const std::string& name, int steps) {
    return site_->WaitCount(
        absl::StrCat("SELECT COUNT(*) FROM run_steps s JOIN runs r USING (run_id) JOIN agents a USING (agent_id) "
                     "WHERE r.study_id = '", study, "' AND r.state = 'running' AND a.name = '", name, "'"),
        steps, kLong);
  }
  bool WaitStudyDone(const std::string& study) {
    return itest::Eventually(
        [&] {
          return site_->Count(absl::StrCat("SELECT COUNT(*) FROM jobs WHERE study_id = '", study,
                                           "' AND state IN ('queued', 'running')")) == 0;
        },
        kLong, std::chrono::milliseconds(250));
  }
  // (attempt, agent name, state) of each run of the study's only job, in attempt order.
  std::vector<std::vector<std::string>> Attempts(const std::string& study) {
    return site_->Rows(absl::StrCat("SELECT r.attempt, a.name, r.state FROM runs r JOIN agents a USING (agent_id) "
                                    "WHERE r.study_id = '", study, "' ORDER BY r.attempt"));
  }
  std::string Host() {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    return std::string(name).substr(0, std::string(name).find('.'));
  }

  static SlurmCluster* cluster_;
  static absl::Status* start_error_;
  int64_t lease_ttl_ms_ = 5000;
  std::unique_ptr<SlurmSite> site_;
  std::vector<std::string> jobs_;
};

SlurmCluster* SlurmTest::cluster_ = nullptr;
absl::Status* SlurmTest::start_error_ = nullptr;

TEST_F(SlurmTest, ExpanseScriptRegistersWithSlurmLabelsRunsAStudyAndDrainsOnScancelBatch) {
  const std::string env = site_->WriteEnvFile("agent.env", "expanse-1");
  const std::string study = site_->SubmitStudy(1, 3);
  const std::string job = Submit(Expanse(), env, ExpanseSizes());
  ASSERT_FALSE(job.empty());
  ASSERT_TRUE(WaitRegistered("expanse-1", job)) << site_->JobOutput(job);
  EXPECT_THAT(Labels("expanse-1"),
              ::testing::IsSupersetOf({std::make_pair(std::string("slurm_job_id"), job),
                                       std::make_pair(std::string("partition"), std::string("gpu-shared")),
                                       std::make_pair(std::string("slurm_nodelist"), Host()),
                                       std::make_pair(std::string("slurm_restart_count"), std::string("0")),
                                       std::make_pair(std::string("site"), std::string("expanse"))}));
  ASSERT_TRUE(WaitStudyDone(study)) << site_->JobOutput(job);
  EXPECT_THAT(Attempts(study), ::testing::ElementsAre(std::vector<std::string>{"1", "expanse-1", "succeeded"}));

  // SIGTERM to the batch shell only: the agent drains and the job ends COMPLETED, exit 0,
  // leaving no work dir behind (nothing was left unsent).
  ASSERT_EQ(site_->Slurm({"scancel", "--signal=TERM", "--batch", job}).exit_code, 0);
  ASSERT_TRUE(site_->WaitJobState(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, std::chrono::seconds(60)));
  const SlurmJob done = site_->Job(job);
  EXPECT_EQ(done.state(), "COMPLETED") << site_->JobOutput(job);
  EXPECT_EQ(done.fields.at("ExitCode"), "0:0");
  EXPECT_EQ(site_->Count("SELECT draining FROM agents WHERE name = 'expanse-1'"), 1);
  EXPECT_FALSE(fs::exists(site_->state_dir() + "/" + job)) << "the work dir was kept with nothing in it";
  site_->CheckStudyInvariants(study);
}

TEST_F(SlurmTest, WalltimeWarningInterruptsTheRunWhichCompletesOnASecondSlurmJob) {
  const std::string env_a = site_->WriteEnvFile("a.env", "stampede3-1");
  const std::string env_b = site_->WriteEnvFile("b.env", "stampede3-2");
  // Long enough to be running when the warning comes (at most 40 s after the start, below).
  const std::string study = site_->SubmitStudy(1, 900);
  // --time=1 --signal=B:TERM@20: Slurm sends the warning at its first periodic check (every
  // 30 s) once now + 30 s >= end - 20 s, i.e. 10..40 s after the start; the limit itself is
  // enforced at a later check, so the drain gets at least 20 s.
  const std::string a = Submit(Stampede(), env_a, {"--time=1", "--signal=B:TERM@20"});
  ASSERT_FALSE(a.empty());
  ASSERT_TRUE(WaitRunningSteps(study, "stampede3-1", 1)) << site_->JobOutput(a);
  const std::string b = Submit(Stampede(), env_b, {"--time=5"});
  ASSERT_TRUE(WaitRegistered("stampede3-2", b)) << site_->JobOutput(b);

  ASSERT_TRUE(site_->WaitJobState(a, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, std::chrono::seconds(150)));
  const SlurmJob first = site_->Job(a);
  EXPECT_EQ(first.state(), "COMPLETED") << "the agent did not drain before the limit:\n" << site_->JobOutput(a);
  // The timing Slurm gave: from the job's start and end (scontrol) and the script's own stamp
  // of the SIGTERM it got.
  const std::string out = site_->JobOutput(a);
  const size_t stamp = out.find(" SIGTERM: stopping the agent");
  ASSERT_NE(stamp, std::string::npos) << "the batch shell never got the warning:\n" << out;
  const int64_t start = UtcSeconds(first.fields.at("StartTime"));
  const int64_t end = UtcSeconds(first.fields.at("EndTime"));
  const int64_t warned = UtcSeconds(out.substr(out.rfind("medprof: ", stamp) + 9, 20));
  std::printf(
      "walltime: SIGTERM to the batch shell %lld s after the start = %lld s before the time limit (+60 s); "
      "the agent drained and the job was %s at +%lld s\n",
      static_cast<long long>(warned - start), static_cast<long long>(start + 60 - warned), first.state().c_str(),
      static_cast<long long>(end - start));
  EXPECT_GE(warned - start, 0);
  EXPECT_LT(warned - start, 60);

  ASSERT_TRUE(WaitStudyDone(study)) << site_->JobOutput(b);
  EXPECT_THAT(Attempts(study), ::testing::ElementsAre(std::vector<std::string>{"1", "stampede3-1", "interrupted"},
                                                      std::vector<std::string>{"2", "stampede3-2", "succeeded"}));
  EXPECT_EQ(site_->Count(absl::StrCat("SELECT attempts FROM jobs WHERE study_id = '", study, "'")), 2);
  site_->CheckStudyInvariants(study);
}

TEST_F(SlurmTest, ScancelBatchAndPlainScancelInterruptTheRunWhichCompletesOnAThirdSlurmJob) {
  // 24^3: the worker ends only after its current step (about 250 ms), so the drain is still on
  // when the second SIGTERM of a plain scancel (the script's forward) reaches the agent.
  const std::string study = site_->SubmitStudy(1, 40, true, 24);
  // SIGTERM to the batch shell only, which forwards it.
  const std::string a = Submit(Stampede(), site_->WriteEnvFile("a.env", "cancel-1"), {});
  ASSERT_TRUE(WaitRunningSteps(study, "cancel-1", 1)) << site_->JobOutput(a);
  ASSERT_EQ(site_->Slurm({"scancel", "--signal=TERM", "--batch", a}).exit_code, 0);
  ASSERT_TRUE(site_->WaitJobState(a, {"COMPLETED", "FAILED", "CANCELLED"}, std::chrono::seconds(60)));
  EXPECT_EQ(site_->Job(a).state(), "COMPLETED") << site_->JobOutput(a);
  // Plain scancel: SIGTERM to every process of the job — the agent gets it from Slurm and again
  // from the script, and must still finish its drain.
  const std::string b = Submit(Stampede(), site_->WriteEnvFile("b.env", "cancel-2"), {});
  ASSERT_TRUE(WaitRunningSteps(study, "cancel-2", 1)) << site_->JobOutput(b);
  ASSERT_EQ(site_->Slurm({"scancel", b}).exit_code, 0);
  ASSERT_TRUE(site_->WaitJobState(b, {"COMPLETED", "FAILED", "CANCELLED"}, std::chrono::seconds(60)));
  EXPECT_TRUE(site_->WaitCount(
      absl::StrCat("SELECT COUNT(*) FROM runs WHERE study_id = '", study, "' AND attempt = 2 AND state != 'running'"),
      1, std::chrono::seconds(30)));

  const std::string c = Submit(Stampede(), site_->WriteEnvFile("c.env", "cancel-3"), {});
  ASSERT_TRUE(WaitStudyDone(study)) << site_->JobOutput(c);
  EXPECT_THAT(Attempts(study), ::testing::ElementsAre(std::vector<std::string>{"1", "cancel-1", "interrupted"},
                                                      std::vector<std::string>{"2", "cancel-2", "interrupted"},
                                                      std::vector<std::string>{"3", "cancel-3", "succeeded"}))
      << site_->JobOutput(b);
  EXPECT_EQ(site_->Count(absl::StrCat("SELECT attempts FROM jobs WHERE study_id = '", study, "'")), 3);
  site_->CheckStudyInvariants(study);
}

class SlurmRequeueTest : public SlurmTest {
 protected:
  // The run must still be leased when the agent comes back after the server's outage, so that
  // what its spool resends is taken, not refused.
  SlurmRequeueTest() { lease_ttl_ms_ = 120'000; }
};

TEST_F(SlurmRequeueTest, ScontrolRequeueRerunsAsTheSameAgentAndResendsItsSpool) {
  const std::string env = site_->WriteEnvFile("agent.env", "requeue-1", {"MEDPROF_DRAIN_TIMEOUT_S=5"});
  const std::string study = site_->SubmitStudy(1, 200);
  const std::string job = Submit(Stampede(), env, {});  // Expanse's script says --no-requeue
  ASSERT_TRUE(WaitRunningSteps(study, "requeue-1", 2)) << site_->JobOutput(job);
  const std::string agent_id = AgentId("requeue-1");

  // The server goes away; then Slurm requeues the job: the agent drains without reaching it,
  // so the interrupted run's last results and outcome stay in the spool.
  site_->KillServer();
  ASSERT_EQ(site_->Slurm({"scontrol", "requeue", job}).exit_code, 0);
  ASSERT_TRUE(site_->WaitJobState(job, {"PENDING"}, std::chrono::seconds(60))) << site_->JobOutput(job);
  const std::string spool = absl::StrCat(site_->state_dir(), "/", job, "/agent/spool");
  ASSERT_TRUE(fs::exists(spool) && !fs::is_empty(spool)) << "the spool did not survive:\n" << site_->JobOutput(job);

  ASSERT_TRUE(site_->RestartServer().ok());
  ASSERT_EQ(site_->Slurm({"scontrol", "update", absl::StrCat("JobId=", job), "StartTime=now"}).exit_code, 0);
  ASSERT_TRUE(WaitStudyDone(study)) << site_->JobOutput(job);

  EXPECT_EQ(site_->Job(job).fields.at("Restarts"), "1");
  EXPECT_EQ(AgentId("requeue-1"), agent_id) << "the rerun registered as another agent";
  EXPECT_EQ(site_->Count("SELECT COUNT(*) FROM agents"), 1);
  EXPECT_EQ(Labels("requeue-1")["slurm_restart_count"], "1");
  EXPECT_EQ(Labels("requeue-1")["slurm_job_id"], job);
  EXPECT_THAT(Attempts(study), ::testing::ElementsAre(std::vector<std::string>{"1", "requeue-1", "interrupted"},
                                                      std::vector<std::string>{"2", "requeue-1", "succeeded"}));
  // Step rows of the interrupted run equal what its worker wrote, including what was only in
  // the spool when the server went away.
  site_->CheckStudyInvariants(study);
}

TEST_F(SlurmTest, TwoGpuJobsGetTheirOwnDevicesAndRunOneWorkerPerDevice) {
  const std::map<std::string, std::string> fake_gpus = {{"LD_LIBRARY_PATH", MEDPROF_FAKE_NVML_DIR},
                                                        {"MEDPROF_FAKE_NVML_GPUS", absl::StrCat(kGpus)}};
  const std::string a = Submit(Stampede(), site_->WriteEnvFile("a.env", "gpu-a"), {"--gres=gpu:2"}, fake_gpus);
  std::vector<std::string> b_args = ExpanseSizes();
  b_args.push_back("--gpus=2");
  const std::string b = Submit(Expanse(), site_->WriteEnvFile("b.env", "gpu-b"), b_args, fake_gpus);
  ASSERT_TRUE(WaitRegistered("gpu-a", a)) << site_->JobOutput(a);
  ASSERT_TRUE(WaitRegistered("gpu-b", b)) << site_->JobOutput(b);
  // Each agent offers the two devices Slurm gave its job (NVML lists all four of the node).
  auto uuids = [&](const std::string& name) {
    std::vector<std::string> out;
    for (const auto& r : site_->Rows(absl::StrCat("SELECT d.device_index, substr(d.uuid, -1) FROM agent_devices d "
                                                  "JOIN agents a USING (agent_id) WHERE a.name = '", name,
                                                  "' AND d.kind = 'cuda'"))) {
      out.push_back(absl::StrCat(r[0], ":gpu", r[1]));
    }
    return out;
  };
  EXPECT_THAT(uuids("gpu-a"), UnorderedElementsAre("0:gpu0", "1:gpu1"));
  EXPECT_THAT(uuids("gpu-b"), UnorderedElementsAre("0:gpu2", "1:gpu3"));

  const std::string study = site_->SubmitStudy(4, 100, /*cpu=*/false);
  ASSERT_TRUE(WaitStudyDone(study));
  EXPECT_EQ(site_->Count(absl::StrCat("SELECT COUNT(*) FROM jobs WHERE study_id = '", study, "' AND state = "
                                      "'succeeded'")),
            4);
  const auto runs = site_->Rows(absl::StrCat(
      "SELECT r.run_id, a.name, r.device_index, r.started_unix_ms, r.finished_unix_ms FROM runs r JOIN agents a "
      "USING (agent_id) WHERE r.study_id = '", study, "'"));
  ASSERT_EQ(runs.size(), 4u);
  std::map<std::string, int> overlapping;  // agent -> pairs of its runs that ran at once
  for (size_t i = 0; i < runs.size(); ++i) {
    // The worker was pinned with the token of its device: Slurm's own GPU number.
    const int ordinal = std::stoi(runs[i][2]);
    const int slurm_gpu = (runs[i][1] == "gpu-a" ? 0 : 2) + ordinal;
    EXPECT_EQ(site_->TappedVisibleDevices(runs[i][0]), absl::StrCat(slurm_gpu)) << runs[i][0];
    for (size_t j = i + 1; j < runs.size(); ++j) {
      if (runs[i][1] != runs[j][1]) continue;
      const bool at_once = std::stoll(runs[i][3]) < std::stoll(runs[j][4]) &&
                           std::stoll(runs[j][3]) < std::stoll(runs[i][4]);
      if (!at_once) continue;
      ++overlapping[runs[i][1]];
      EXPECT_NE(runs[i][2], runs[j][2]) << "two jobs at once on one device of " << runs[i][1];
    }
  }
  EXPECT_GE(overlapping["gpu-a"] + overlapping["gpu-b"], 1) << "no agent ran two workers at once";
  site_->CheckStudyInvariants(study);
}

TEST_F(SlurmTest, FleetStartsTwoAgentsAsAJobArrayOnTheOneNode) {
  site_->WriteEnvFile("agent-1.env", "fleet-1");
  site_->WriteEnvFile("agent-2.env", "fleet-2");
  const std::string fleet = SourceDir() + "/deploy/slurm/fleet.sh";
  const std::map<std::string, std::string> user = {{"HOME", fs::path(site_->dir()) / "home"},
                                                    {"SLURM_CONF", cluster_->conf()}};
  // One env file per agent, checked before anything is queued.
  itest::CommandResult refused = itest::RunCommand({fleet, "3", SourceDir() + "/deploy/slurm/" + Stampede()}, user);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, ::testing::HasSubstr("agent 3 of 3: " + site_->dir() + "/home/.medprof/agent-3.env is missing"));

  itest::CommandResult r = itest::RunCommand(
      {fleet, "2", SourceDir() + "/deploy/slurm/" + Stampede(), "--output=" + site_->dir() + "/job-%A_%a.out"}, user);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string array = std::string(absl::StripAsciiWhitespace(r.out));
  jobs_.push_back(array);
  ASSERT_TRUE(itest::Eventually([&] { return !Labels("fleet-1").empty() && !Labels("fleet-2").empty(); },
                                std::chrono::seconds(60)));
  EXPECT_NE(Labels("fleet-1")["slurm_job_id"], Labels("fleet-2")["slurm_job_id"]);
  for (const char* task : {"_1", "_2"}) {
    EXPECT_TRUE(fs::exists(absl::StrCat(site_->state_dir(), "/", array, task, "/agent")))
        << "no work dir for array task " << task;
  }
  const std::string study = site_->SubmitStudy(2, 3);
  ASSERT_TRUE(WaitStudyDone(study));
  EXPECT_EQ(site_->Count(absl::StrCat("SELECT COUNT(*) FROM jobs WHERE study_id = '", study, "' AND state = "
                                      "'succeeded'")),
            2);
  // Stopping the fleet: both agents drain (the server sees them draining) and the array ends.
  ASSERT_EQ(site_->Slurm({"scancel", array}).exit_code, 0);
  EXPECT_TRUE(itest::Eventually([&] { return site_->Slurm({"squeue", "-h", "-j", array}).out.empty(); },
                                std::chrono::seconds(60)));
  EXPECT_EQ(site_->Count("SELECT COUNT(*) FROM agents WHERE draining = 1"), 2);
  site_->CheckStudyInvariants(study);
}

}  // namespace
}  // namespace medprof::slurmtest
