// A test site under a real Slurm: the single-node cluster of tests/slurm/cluster.sh, a real
// medprof-server on 127.0.0.1 with TLS and its SQLite file, and what a user keeps in
// $HOME/.medprof (CA, one 0600 token file and one env file per agent). Jobs are submitted with
// the real sbatch, the site scripts of deploy/slurm unmodified; the env files name the bare
// medprof-agent (MEDPROF_AGENT_BIN) and, as its --worker, the harness's tap wrapper of the real
// medprof-worker, so a test can compare the stored rows with what each worker wrote.
//
// SlurmCluster is started once per test binary (StartCluster); a site (server, home, state dir)
// once per test. Not thread-safe; one test drives one site.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/integration/harness.h"

namespace medprof::slurmtest {

// The cluster of cluster.sh under `dir`. Stop() (also the destructor) ends its jobs and daemons.
class SlurmCluster {
 public:
  // UNAVAILABLE with cluster.sh's message when Slurm cannot start here (not root, no munge):
  // the caller skips with it. Other errors: the cluster failed to start.
  static absl::StatusOr<std::unique_ptr<SlurmCluster>> Start(const std::string& dir, int gpus);
  ~SlurmCluster();
  void Stop();
  const std::string& conf() const { return conf_; }
  int gpus() const { return gpus_; }

 private:
  SlurmCluster() = default;
  std::string dir_;
  std::string conf_;
  int gpus_ = 0;
};

// One Slurm job as `scontrol show job -o` reports it (fields as Slurm names them).
struct SlurmJob {
  std::map<std::string, std::string> fields;  // JobState, RestartCnt, StartTime, ExitCode, ...
  std::string state() const;
};

class SlurmSite {
 public:
  // Starts the server (TLS, leases of `lease_ttl_ms`) and prepares the home and state dirs.
  static absl::StatusOr<std::unique_ptr<SlurmSite>> Start(SlurmCluster* cluster, int64_t lease_ttl_ms = 5000);

  // Writes $HOME/.medprof/<file> for an agent named `agent` (with its token file) and returns its
  // path. `extra` lines are appended (KEY="value").
  std::string WriteEnvFile(const std::string& file, const std::string& agent,
                           const std::vector<std::string>& extra = {});
  // sbatch [args...] deploy/slurm/<script> with the user's environment (HOME, SLURM_CONF,
  // MEDPROF_ENV_FILE=env_file) plus `env`; the job's output goes to <dir>/job-%j.out. Returns
  // the job id ("" and a test failure when sbatch refused it).
  std::string Sbatch(const std::string& script, const std::string& env_file, const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env = {});
  // Runs a Slurm client command (scancel, scontrol, ...) with this cluster's SLURM_CONF.
  itest::CommandResult Slurm(const std::vector<std::string>& argv);
  SlurmJob Job(const std::string& id);
  // Polls until the job's state is one of `states` (e.g. {"COMPLETED"}); false on timeout.
  bool WaitJobState(const std::string& id, const std::vector<std::string>& states, std::chrono::seconds timeout);
  // The job's output file (the batch script's stdout and stderr).
  std::string JobOutput(const std::string& id) const;

  // `medprof submit` of `jobs` baseline jobs of the tiny model with `steps` measured steps;
  // `cpu` keeps --device cpu (else auto: the fake GPUs' jobs); `volume` replaces the tiny 16^3
  // (24^3: a step of about 250 ms instead of 50). Returns the study id.
  std::string SubmitStudy(int jobs, int steps, bool cpu = true, int volume = 16);
  // The medprof CLI over TLS.
  itest::CommandResult Cli(const std::vector<std::string>& args);

  // SQL probes of the server's database.
  int64_t Count(const std::string& sql);
  std::vector<std::vector<std::string>> Rows(const std::string& sql);
  // Polls until `sql` (a COUNT) returns at least `n`.
  bool WaitCount(const std::string& sql, int64_t n, std::chrono::seconds timeout);

  // Kills the server (SIGKILL) / starts it again on the same port and database.
  void KillServer();
  absl::Status RestartServer();

  // Measured steps the worker of `run_id` wrote (from the tap), -1 when it wrote nothing.
  int TappedSteps(const std::string& run_id);
  // CUDA_VISIBLE_DEVICES as the worker of `run_id` saw it (RunStarted.environment).
  std::string TappedVisibleDevices(const std::string& run_id);

  // The invariants every scenario ends with, for one study: integrity_check ok; no job or run
  // left queued/running; per run, chunks 1..max stored once, no step stored twice, and exactly
  // the steps its worker wrote; returns nothing (failures are test failures).
  void CheckStudyInvariants(const std::string& study);

  const std::string& dir() const { return dir_; }
  const std::string& state_dir() const { return state_dir_; }
  const std::string& db() const { return server_->db_path(); }

 private:
  SlurmSite() = default;
  std::vector<std::string> ServerArgs() const;
  SlurmCluster* cluster_ = nullptr;
  std::unique_ptr<itest::ServerFixture> server_;
  std::string dir_, home_, state_dir_, tap_worker_, address_;
  int64_t lease_ttl_ms_ = 5000;
};

// The source tree (MEDPROF_SOURCE_DIR).
std::string SourceDir();

}  // namespace medprof::slurmtest
