// The deployment scripts run for real on the CPU, with only the container runtime and the GPU
// replaced:
//  - deploy/slurm/*.sbatch: run with bash as Slurm would, against a TLS medprof-server on
//    127.0.0.1, with tests/deploy/testdata/apptainer standing in for `apptainer run` (it execs
//    the real medprof-agent); SIGTERM to the batch shell alone (Slurm's --signal=B:TERM) must
//    reach the agent, which drains and exits 0, and so must the script.
//  - scripts/bundle.sh + scripts/gpu-node-run.sh: the bundle from this build, then the one
//    GPU-node script end to end with --tiny and this build's worker: every preset completes and
//    OUT_DIR holds only the files a device call returns.
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/harness.h"

namespace medprof::deploy {
namespace {

namespace fs = std::filesystem;
using ::medprof::itest::BinPath;
using ::medprof::itest::CommandResult;
using ::medprof::itest::Eventually;
using ::medprof::itest::MakeTempDir;
using ::medprof::itest::Process;
using ::medprof::itest::RunCommand;
using ::testing::HasSubstr;

std::string SourceDir() {
  const char* d = std::getenv("MEDPROF_SOURCE_DIR");
  return d == nullptr ? std::string(MEDPROF_SOURCE_DIR_DEFAULT) : std::string(d);
}
std::string TlsDir() { return SourceDir() + "/tests/unit/agent/testdata/tls"; }

std::string ReadText(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
void WriteText(const fs::path& p, const std::string& text, mode_t mode = 0644) {
  std::ofstream(p) << text;
  ::chmod(p.c_str(), mode);
}

class SlurmScriptTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(SlurmScriptTest, SigtermToTheBatchShellDrainsTheAgentAndExitsZero) {
  const auto& [script, site] = GetParam();
  const std::string dir = MakeTempDir("slurm-" + site);
  auto server = itest::ServerFixture::Start(
      dir + "/medprof.db", {"--tls-cert", TlsDir() + "/server.crt", "--tls-key", TlsDir() + "/server.key"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string address = absl::StrCat("localhost:", (*server)->port());  // the certificate's name

  // What a user keeps in $HOME/.medprof: the env file, the token (0600) and the CA; the image.
  const std::string home = dir + "/home";
  fs::create_directories(home + "/.medprof");
  // A token of the documented shape (the agent refuses any other before dialling).
  WriteText(home + "/.medprof/agent.token", "mpt_0123456789ab_7e57aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", 0600);
  fs::copy_file(TlsDir() + "/ca.crt", home + "/.medprof/ca.crt");
  WriteText(dir + "/medprof.sif", "not really an image\n");
  const std::string agent_name = "slurm-" + site;
  WriteText(
      home + "/.medprof/agent.env",
      absl::StrCat("MEDPROF_SERVER=\"", address, "\"\nMEDPROF_TLS_CA=\"$HOME/.medprof/ca.crt\"\n",
                   "MEDPROF_TOKEN_FILE=\"$HOME/.medprof/agent.token\"\nMEDPROF_IMAGE=\"", dir,
                   "/medprof.sif\"\nMEDPROF_AGENT_FLAGS=\"--log-level info --name ", agent_name, "\"\n"));

  const std::string fake_log = dir + "/apptainer.log";
  const char* path = std::getenv("PATH");
  auto batch = Process::Start(
      {"/bin/bash", SourceDir() + "/deploy/slurm/" + script},
      {{"HOME", home},
       {"PATH", absl::StrCat(SourceDir(), "/tests/deploy/testdata:", path ? path : "/usr/bin:/bin")},
       {"SLURM_JOB_ID", "4242"},
       {"MEDPROF_WORK_DIR", dir + "/node-local"},
       {"MEDPROF_LOG_DIR", dir + "/kept"},
       {"MEDPROF_FAKE_RUNSCRIPT", BinPath("medprof-agent")},
       {"MEDPROF_FAKE_LOG", fake_log},
       {"OMP_NUM_THREADS", "1"}},
      dir + "/batch.log");
  ASSERT_TRUE(batch.ok()) << batch.status();

  // The agent registers over TLS with the token from the file.
  const bool registered = Eventually(
      [&] {
        CommandResult r =
            itest::Cli(address, {"--tls-ca", TlsDir() + "/ca.crt", "agents"}, std::chrono::seconds(10));
        return r.exit_code == 0 && absl::StrContains(r.out, agent_name);
      },
      std::chrono::seconds(30));
  ASSERT_TRUE(registered) << (*batch)->AllOutput();

  // The container saw the site flag, the bound secrets and the node-local work dir.
  const std::string call = ReadText(fake_log);
  EXPECT_THAT(call, HasSubstr("--nv"));
  EXPECT_THAT(call, HasSubstr("--no-home"));
  EXPECT_THAT(call, HasSubstr(absl::StrCat("--site ", site)));
  EXPECT_THAT(call, HasSubstr(absl::StrCat("--token-file ", home, "/.medprof/agent.token")));
  EXPECT_THAT(call, HasSubstr(absl::StrCat("--work-dir ", dir, "/node-local/agent")));
  EXPECT_THAT(call, HasSubstr("--drain-timeout-s 90"));
  EXPECT_THAT(call, ::testing::Not(HasSubstr("mpt_0123456789ab")));  // the token never on a command line

  // Slurm's --signal=B:TERM: the batch shell alone gets it (not its process group).
  ASSERT_EQ(::kill((*batch)->pid(), SIGTERM), 0);
  const std::optional<int> code = (*batch)->Wait(std::chrono::seconds(60));
  ASSERT_TRUE(code.has_value()) << "the batch script did not end after SIGTERM:\n" << (*batch)->AllOutput();
  EXPECT_EQ(*code, 0) << (*batch)->AllOutput();
  const std::string out = (*batch)->AllOutput();
  EXPECT_THAT(out, HasSubstr("SIGTERM: stopping the agent (drain up to 90 s)"));
  EXPECT_THAT(out, HasSubstr("agent exited with status 0"));
  EXPECT_FALSE(fs::exists(dir + "/node-local")) << "the node-local work dir was left behind";
}

INSTANTIATE_TEST_SUITE_P(
    Sites, SlurmScriptTest,
    ::testing::Values(std::make_pair(std::string("stampede3-h100.sbatch"), std::string("stampede3")),
                      std::make_pair(std::string("expanse-gpu-shared.sbatch"), std::string("expanse"))),
    [](const auto& info) { return info.param.second; });

TEST(GpuNodeScriptTest, TinyRunOnTheCpuCompletesEveryPresetAndWritesOnlyTheReturnedFiles) {
  const std::string dir = MakeTempDir("gpu-node");
  const std::string build = fs::path(BinPath("medprof-server")).parent_path().parent_path().string();
  CommandResult bundle = RunCommand(
      {SourceDir() + "/scripts/bundle.sh", "--build-dir", build, "--out", dir + "/bundle", "--no-carry"});
  ASSERT_EQ(bundle.exit_code, 0) << bundle.out << bundle.err;
  EXPECT_THAT(bundle.out, ::testing::ContainsRegex("3 programs, [0-9]+ libraries"));
  // No glibc in the bundle; the gRPC and SQLite libraries the GPU machine lacks are in it.
  EXPECT_FALSE(fs::exists(dir + "/bundle/lib/libc.so.6"));
  EXPECT_TRUE(fs::exists(dir + "/bundle/lib/libsqlite3.so.0"));
  EXPECT_TRUE(fs::exists(dir + "/bundle/lib/libgrpc++.so.1.51"));

  const std::string out = dir + "/out";
  CommandResult run = RunCommand({SourceDir() + "/scripts/gpu-node-run.sh", "--tiny", "--worker",
                                  BinPath("medprof-worker"), "--bundle", dir + "/bundle", out},
                                 {{"OMP_NUM_THREADS", "1"}}, std::chrono::seconds(500));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err << ReadText(out + "/logs.txt");

  // Only flat names a device call returns, at most 8 of them.
  const std::set<std::string> allowed = {"command.txt", "run.log",     "compare.json",
                                         "runs.json",   "report.html", "medprof.db",
                                         "logs.txt",    "build.log",   "medprof.db.gz"};
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(out)) {
    EXPECT_TRUE(e.is_regular_file()) << e.path();
    files.insert(e.path().filename().string());
  }
  EXPECT_LE(files.size(), 8u);
  for (const std::string& f : files) EXPECT_TRUE(allowed.count(f)) << "unexpected file " << f;
  for (const char* f : {"command.txt", "run.log", "compare.json", "runs.json", "medprof.db", "logs.txt"}) {
    EXPECT_TRUE(files.count(f)) << "missing " << f;
  }

  EXPECT_THAT(ReadText(out + "/command.txt"), HasSubstr("--tiny"));
  EXPECT_THAT(ReadText(out + "/command.txt"),
              HasSubstr("presets: baseline,opt1,opt2,opt12,bf16; volume 16^3"));
  const std::string db = ReadText(out + "/medprof.db");
  EXPECT_EQ(db.substr(0, 16), std::string("SQLite format 3\0", 16));

  // Five runs, each completed with its profiler layers recorded.
  const nlohmann::json runs = nlohmann::json::parse(ReadText(out + "/runs.json"));
  ASSERT_TRUE(runs.is_array());
  EXPECT_EQ(runs.size(), 5u);
  const std::string log = ReadText(out + "/run.log");
  for (const char* preset : {"baseline", "opt1", "opt2", "opt12", "bf16"}) {
    const std::regex done(absl::StrCat("run [^ ]+: ", preset, " +succeeded"));  // the table's word since issue 19
    EXPECT_TRUE(std::regex_search(log, done)) << preset << " did not succeed; run.log:\n"
                                              << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
  }
  EXPECT_THAT(log, HasSubstr("check: opt1 faster than baseline"));
  EXPECT_THAT(log, HasSubstr("done: every run completed"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("FAILED:")));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("none recorded")));

  const nlohmann::json compare = nlohmann::json::parse(ReadText(out + "/compare.json"));
  const std::string compare_text = compare.dump();
  for (const char* preset : {"baseline", "opt1", "opt2", "opt12", "bf16"}) {
    EXPECT_THAT(compare_text, HasSubstr(absl::StrCat("\"", preset, "\""))) << compare_text.substr(0, 2000);
  }
}

TEST(GpuNodeScriptTest, ATopKWithoutTheMetricsLayerIsRefusedBeforeAnythingStarts) {
  const std::string out = MakeTempDir("gpu-node-topk") + "/out";
  CommandResult run =
      RunCommand({SourceDir() + "/scripts/gpu-node-run.sh", "--tiny", "--metrics-top-k", "5", "--worker",
                  BinPath("medprof-worker"), out});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("--metrics-top-k needs --metrics"));
  EXPECT_FALSE(fs::exists(out + "/run.log")) << "the study started";
}

}  // namespace
}  // namespace medprof::deploy
