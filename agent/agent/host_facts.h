// Facts about the node the agent runs on (host name, site, Slurm job, container image) and
// the labels the agent registers with. Captured once at start; plain values, thread-safe to
// share after construction.
#pragma once

#include <map>
#include <string>

#include "agent/agent/options.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::agent {

struct HostFacts {
  std::string host;             // gethostname()
  std::string site;             // --site / $MEDPROF_SITE ("" when unknown)
  std::string slurm_job_id;     // $SLURM_JOB_ID
  std::string slurm_partition;  // $SLURM_JOB_PARTITION
  std::string slurm_nodelist;   // $SLURM_JOB_NODELIST (Slurm's compressed form, e.g. c[001-004])
  // $SLURM_RESTART_COUNT under Slurm: "0" on a job's first run (Slurm leaves it unset then),
  // N after N requeues; "" outside Slurm (no $SLURM_JOB_ID).
  std::string slurm_restart_count;
  std::string container_image;  // $APPTAINER_CONTAINER, else $SINGULARITY_CONTAINER
};

// Reads the host name and the environment. `site` is the validated --site value.
HostFacts CaptureHostFacts(const EnvLookup& env, const std::string& site);

// host, site, partition, slurm_job_id, slurm_nodelist, slurm_restart_count, container — each
// only when known, each value cut to the server's 256 characters — then `extra` (the --label
// values), which override automatic ones.
std::map<std::string, std::string> MakeLabels(const HostFacts& facts,
                                              const std::map<std::string, std::string>& extra);

// The agent's part of a run's environment (FinishRunRequest.agent_environment).
v1::Environment AgentEnvironment(const HostFacts& facts, const std::string& cuda_visible_devices);

// "medprof-agent 0.1.0 (abc1234, protocol 1)"
std::string AgentVersionLine();

}  // namespace medprof::agent
