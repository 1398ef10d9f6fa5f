#include "agent/worker/host_info.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "common/version.h"

namespace medprof::worker {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t start = line.find_first_not_of(' ', colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
      }
    }
  }
  return "";
}

}  // namespace

int TorchThreads() { return at::get_num_threads(); }

void FillHostEnvironment(v1::Environment* env) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) env->set_host(host);
  env->set_worker_version(kVersionLine);
  env->set_cpu_model(CpuModel());
  env->set_cpu_threads(TorchThreads());
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  env->set_cuda_visible_devices(visible == nullptr ? "" : visible);
  if (visible == nullptr) (*env->mutable_extra())["cuda_visible_devices_set"] = "false";
  env->set_slurm_job_id(Env("SLURM_JOB_ID"));
  env->set_slurm_partition(Env("SLURM_JOB_PARTITION"));
}

}  // namespace medprof::worker
