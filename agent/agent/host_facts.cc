#include "agent/agent/host_facts.h"

#include <unistd.h>

#include <climits>

#include "absl/strings/str_cat.h"
#include "common/version.h"

namespace medprof::agent {
namespace {

// The server refuses longer label values (a long job's node list can exceed it).
constexpr size_t kMaxLabelValue = 256;

}  // namespace

HostFacts CaptureHostFacts(const EnvLookup& env, const std::string& site) {
  HostFacts f;
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) == 0) f.host = name;
  if (f.host.empty()) f.host = "unknown-host";
  f.site = site;
  f.slurm_job_id = env("SLURM_JOB_ID").value_or("");
  f.slurm_partition = env("SLURM_JOB_PARTITION").value_or("");
  f.slurm_nodelist = env("SLURM_JOB_NODELIST").value_or("");
  if (!f.slurm_job_id.empty()) f.slurm_restart_count = env("SLURM_RESTART_COUNT").value_or("0");
  f.container_image = env("APPTAINER_CONTAINER").value_or("");
  if (f.container_image.empty()) f.container_image = env("SINGULARITY_CONTAINER").value_or("");
  return f;
}

std::map<std::string, std::string> MakeLabels(const HostFacts& facts,
                                              const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> labels;
  auto put = [&](const char* key, const std::string& value) {
    if (!value.empty()) labels[key] = value.substr(0, kMaxLabelValue);
  };
  put("host", facts.host);
  put("site", facts.site);
  put("partition", facts.slurm_partition);
  put("slurm_job_id", facts.slurm_job_id);
  put("slurm_nodelist", facts.slurm_nodelist);
  put("slurm_restart_count", facts.slurm_restart_count);
  put("container", facts.container_image);
  for (const auto& [k, v] : extra) labels[k] = v;
  return labels;
}

v1::Environment AgentEnvironment(const HostFacts& facts, const std::string& cuda_visible_devices) {
  v1::Environment env;
  env.set_host(facts.host);
  env.set_site(facts.site);
  env.set_slurm_job_id(facts.slurm_job_id);
  env.set_slurm_partition(facts.slurm_partition);
  env.set_container_image(facts.container_image);
  env.set_agent_version(kVersion);
  env.set_cuda_visible_devices(cuda_visible_devices);
  return env;
}

std::string AgentVersionLine() { return absl::StrCat("medprof-agent ", kVersionLine); }

}  // namespace medprof::agent
