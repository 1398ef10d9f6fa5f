#include "tests/slurm/slurm_site.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace medprof::slurmtest {
namespace fs = std::filesystem;
using itest::CommandResult;
using itest::RunCommand;

std::string SourceDir() {
  const char* d = std::getenv("MEDPROF_SOURCE_DIR");
  return d == nullptr ? std::string(MEDPROF_SOURCE_DIR_DEFAULT) : std::string(d);
}

namespace {

std::string TlsDir() { return SourceDir() + "/tests/unit/agent/testdata/tls"; }
std::string ClusterScript() { return SourceDir() + "/tests/slurm/cluster.sh"; }

void WriteText(const fs::path& p, const std::string& text, mode_t mode) {
  std::ofstream(p) << text;
  ::chmod(p.c_str(), mode);
}

std::string Quote(const std::string& s) { return absl::StrCat("'", s, "'"); }

}  // namespace

absl::StatusOr<std::unique_ptr<SlurmCluster>> SlurmCluster::Start(const std::string& dir, int gpus) {
  auto c = std::unique_ptr<SlurmCluster>(new SlurmCluster());
  c->dir_ = dir;
  c->gpus_ = gpus;
  CommandResult r = RunCommand({"/bin/bash", ClusterScript(), "start", dir, absl::StrCat(gpus)}, {},
                               std::chrono::seconds(60));
  if (r.exit_code == 77) return absl::UnavailableError(absl::StripAsciiWhitespace(r.err));
  if (r.exit_code != 0) {
    c->Stop();
    return absl::InternalError(absl::StrCat("cluster.sh start failed (", r.exit_code, "): ", r.out, r.err));
  }
  c->conf_ = dir + "/etc/slurm.conf";
  return c;
}

void SlurmCluster::Stop() {
  if (dir_.empty()) return;
  CommandResult r = RunCommand({"/bin/bash", ClusterScript(), "stop", dir_}, {}, std::chrono::seconds(90));
  if (r.exit_code != 0) ADD_FAILURE() << "cluster.sh stop: " << r.out << r.err;
  dir_.clear();
}

SlurmCluster::~SlurmCluster() { Stop(); }

std::string SlurmJob::state() const {
  auto it = fields.find("JobState");
  return it == fields.end() ? "" : it->second;
}

std::vector<std::string> SlurmSite::ServerArgs() const {
  return {"--tls-cert", TlsDir() + "/server.crt", "--tls-key", TlsDir() + "/server.key", "--lease-ttl-ms",
          absl::StrCat(lease_ttl_ms_), "--heartbeat-interval-ms", absl::StrCat(lease_ttl_ms_ / 5)};
}

absl::StatusOr<std::unique_ptr<SlurmSite>> SlurmSite::Start(SlurmCluster* cluster, int64_t lease_ttl_ms) {
  auto s = std::unique_ptr<SlurmSite>(new SlurmSite());
  s->cluster_ = cluster;
  s->lease_ttl_ms_ = lease_ttl_ms;
  s->dir_ = itest::MakeTempDir("site");
  s->home_ = s->dir_ + "/home";
  s->state_dir_ = s->dir_ + "/state";
  fs::create_directories(s->home_ + "/.medprof");
  fs::permissions(s->home_ + "/.medprof", fs::perms::owner_all);
  fs::copy_file(TlsDir() + "/ca.crt", s->home_ + "/.medprof/ca.crt");
  s->tap_worker_ = itest::WriteTapWorker(s->dir_);
  auto server = itest::ServerFixture::Start(s->dir_ + "/medprof.db", s->ServerArgs());
  if (!server.ok()) return server.status();
  s->server_ = *std::move(server);
  s->address_ = absl::StrCat("localhost:", s->server_->port());  // the certificate's name
  return s;
}

std::string SlurmSite::WriteEnvFile(const std::string& file, const std::string& agent,
                                    const std::vector<std::string>& extra) {
  const std::string token = absl::StrCat(home_, "/.medprof/", agent, ".token");
  // The documented token shape (every client checks it before dialling); the test server takes any.
  const uint64_t id = std::hash<std::string>{}(agent) & 0xffffffffffffULL;
  WriteText(token, absl::StrCat("mpt_", absl::Hex(id, absl::kZeroPad12), "_", std::string(64, 'a'), "\n"), 0600);
  std::string text = absl::StrCat(
      "MEDPROF_SERVER=", Quote(address_), "\nMEDPROF_TLS_CA=\"$HOME/.medprof/ca.crt\"\n",
      "MEDPROF_TOKEN_FILE=", Quote(token), "\nMEDPROF_AGENT_BIN=", Quote(itest::BinPath("medprof-agent")),
      "\nMEDPROF_STATE_DIR=", Quote(state_dir_), "\nMEDPROF_MODULES=\"\"\n",
      "MEDPROF_AGENT_FLAGS=", Quote(absl::StrCat("--name ", agent, " --log-level info --worker ", tap_worker_)),
      "\n");
  for (const std::string& line : extra) absl::StrAppend(&text, line, "\n");
  const std::string path = absl::StrCat(home_, "/.medprof/", file);
  WriteText(path, text, 0600);
  return path;
}

CommandResult SlurmSite::Slurm(const std::vector<std::string>& argv) {
  std::vector<std::string> full = {"/usr/bin/env"};  // RunCommand execs a path; env finds the program
  full.insert(full.end(), argv.begin(), argv.end());
  return RunCommand(full, {{"SLURM_CONF", cluster_->conf()}, {"TZ", "UTC"}}, std::chrono::seconds(60));
}

std::string SlurmSite::Sbatch(const std::string& script, const std::string& env_file,
                              const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  std::vector<std::string> argv = {"/usr/bin/sbatch", "--parsable", absl::StrCat("--output=", dir_, "/job-%j.out"),
                                   "--open-mode=append"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(SourceDir() + "/deploy/slurm/" + script);
  std::map<std::string, std::string> all = {{"HOME", home_},
                                            {"SLURM_CONF", cluster_->conf()},
                                            {"MEDPROF_ENV_FILE", env_file},
                                            {"OMP_NUM_THREADS", "1"}};
  for (const auto& [k, v] : env) all[k] = v;
  CommandResult r = RunCommand(argv, all, std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 0) << "sbatch " << script << ": " << r.out << r.err;
  if (r.exit_code != 0) return "";
  return std::string(absl::StripAsciiWhitespace(r.out));
}

SlurmJob SlurmSite::Job(const std::string& id) {
  SlurmJob job;
  CommandResult r = Slurm({"scontrol", "show", "job", "-o", id});
  for (absl::string_view word : absl::StrSplit(r.out, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    const size_t eq = word.find('=');
    if (eq == absl::string_view::npos) continue;
    job.fields.emplace(std::string(word.substr(0, eq)), std::string(word.substr(eq + 1)));
  }
  return job;
}

bool SlurmSite::WaitJobState(const std::string& id, const std::vector<std::string>& states,
                             std::chrono::seconds timeout) {
  return itest::Eventually(
      [&] {
        const std::string s = Job(id).state();
        for (const std::string& want : states) {
          if (s == want) return true;
        }
        return false;
      },
      timeout, std::chrono::milliseconds(250));
}

std::string SlurmSite::JobOutput(const std::string& id) const {
  std::ifstream in(absl::StrCat(dir_, "/job-", id, ".out"));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

CommandResult SlurmSite::Cli(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"--tls-ca", TlsDir() + "/ca.crt"};
  all.insert(all.end(), args.begin(), args.end());
  return itest::Cli(address_, all);
}

std::string SlurmSite::SubmitStudy(int jobs, int steps, bool cpu, int volume) {
  std::vector<std::string> args = {"submit", "--presets", "baseline", "--repeats", absl::StrCat(jobs),
                                   "--steps", absl::StrCat(steps), "--warmup", "0", "--grad-accum", "1",
                                   "--max-attempts", "4", "--format", "json"};
  const std::vector<std::string> tiny = itest::TinyModelFlags();
  for (size_t i = 0; i < tiny.size(); ++i) {
    if (!cpu && tiny[i] == "--device") {
      ++i;  // device auto: a fake GPU's job (the worker falls back to the CPU)
      continue;
    }
    if (tiny[i] == "--volume") {
      args.insert(args.end(), {"--volume", absl::StrCat(volume)});
      ++i;
      continue;
    }
    args.push_back(tiny[i]);
  }
  CommandResult r = Cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  if (r.exit_code != 0) return "";
  return nlohmann::json::parse(r.out).at("study_id").get<std::string>();
}

int64_t SlurmSite::Count(const std::string& sql) {
  auto db = itest::DbProbe::Open(server_->db_path());
  if (!db.ok()) return -1;
  return (*db)->Int(sql).value_or(-1);
}

std::vector<std::vector<std::string>> SlurmSite::Rows(const std::string& sql) {
  auto db = itest::DbProbe::Open(server_->db_path());
  if (!db.ok()) return {};
  auto rows = (*db)->Rows(sql);
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.value_or(std::vector<std::vector<std::string>>{});
}

bool SlurmSite::WaitCount(const std::string& sql, int64_t n, std::chrono::seconds timeout) {
  return itest::Eventually([&] { return Count(sql) >= n; }, timeout, std::chrono::milliseconds(100));
}

void SlurmSite::KillServer() {
  server_->process().Signal(SIGKILL);
  (void)server_->process().Wait(std::chrono::seconds(10));
}

absl::Status SlurmSite::RestartServer() {
  const std::string db = server_->db_path();
  const int port = server_->port();
  server_.reset();
  auto server = itest::ServerFixture::Start(db, ServerArgs(), port);
  if (!server.ok()) return server.status();
  server_ = *std::move(server);
  return absl::OkStatus();
}

int SlurmSite::TappedSteps(const std::string& run_id) {
  const std::string path = absl::StrCat(dir_, "/tap/", run_id, ".pb");
  if (!fs::exists(path)) return -1;
  int steps = 0;
  for (const auto& m : itest::ReadTap(path)) steps += m.has_step();
  return steps;
}

std::string SlurmSite::TappedVisibleDevices(const std::string& run_id) {
  for (const auto& m : itest::ReadTap(absl::StrCat(dir_, "/tap/", run_id, ".pb"))) {
    if (m.has_started()) return m.started().environment().cuda_visible_devices();
  }
  return "<no RunStarted>";
}

void SlurmSite::CheckStudyInvariants(const std::string& study) {
  const auto integrity = Rows("PRAGMA integrity_check");
  ASSERT_FALSE(integrity.empty());
  EXPECT_EQ(integrity[0][0], "ok");
  EXPECT_EQ(Count(absl::StrCat("SELECT COUNT(*) FROM jobs WHERE study_id = '", study,
                               "' AND state IN ('queued', 'running')")),
            0)
      << "a job is still queued or running";
  EXPECT_EQ(Count(absl::StrCat("SELECT COUNT(*) FROM runs WHERE study_id = '", study, "' AND state = 'running'")), 0)
      << "a run is still running";
  for (const auto& row : Rows(absl::StrCat("SELECT run_id, state FROM runs WHERE study_id = '", study, "'"))) {
    const std::string& run = row[0];
    SCOPED_TRACE(absl::StrCat("run ", run, " (", row[1], ")"));
    const std::string where = absl::StrCat(" WHERE run_id = '", run, "'");
    const int64_t chunks = Count("SELECT COUNT(*) FROM run_chunks" + where);
    EXPECT_EQ(chunks, Count("SELECT COUNT(DISTINCT seq) FROM run_chunks" + where)) << "a chunk stored twice";
    EXPECT_EQ(chunks, Count("SELECT COALESCE(MAX(seq), 0) FROM run_chunks" + where)) << "a gap in the chunks";
    const int64_t steps = Count("SELECT COUNT(*) FROM run_steps" + where);
    EXPECT_EQ(steps, Count("SELECT COUNT(DISTINCT step) FROM run_steps" + where)) << "a step stored twice";
    const int tapped = TappedSteps(run);
    // A run that never reached a worker (refused while draining) has no tap and no rows.
    EXPECT_EQ(steps, tapped < 0 ? 0 : tapped) << "stored step rows differ from what the worker wrote";
  }
}

}  // namespace medprof::slurmtest
