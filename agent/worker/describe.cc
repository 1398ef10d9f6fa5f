#include "agent/worker/describe.h"

#include <torch/version.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "agent/profiler/backend.h"
#include "agent/profiler/gpu_probe.h"
#include "agent/worker/config_mapping.h"
#include "common/proto_json.h"
#include "common/status.h"
#include "common/version.h"
#include "common/workload_config.h"
#include "workloads/meddpm/fused_info.h"
#include "workloads/meddpm/workload.h"

namespace medprof::worker {

std::string TorchBuildVersion() { return TORCH_VERSION; }

absl::StatusOr<std::string> DescribeJson(const v1::WorkloadConfig& effective) {
  MEDPROF_ASSIGN_OR_RETURN(std::string config_json,
                           MessageToJson(effective, {.pretty = false, .print_defaults = true}));
  const meddpm::WorkloadOptions options = ToWorkloadOptions(effective, effective.device());
  const uint64_t peak = meddpm::EstimatePeakMemoryBytes(options);
  const config::PresetFlags flags = config::EffectiveFlags(effective);
  const config::Dims dims = config::VolumeDims(effective);

  nlohmann::ordered_json j;
  j["parameters"] = meddpm::CountParameters(options.model);
  j["config"] = nlohmann::ordered_json::parse(config_json);
  j["flags"] = {{"tf32", flags.tf32},
                {"channels_last", flags.channels_last},
                {"bf16", flags.bf16},
                {"fused", flags.fused}};
  {
    // Listed on every build; `runnable` says whether this binary can run them at all (a CPU
    // run with fused on still runs LibTorch's ops: the run's workload_note says so).
    nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
    for (const meddpm::fused::KernelInfo& k : meddpm::fused::Kernels()) {
      kernels.push_back({{"name", k.name}, {"role", k.role}});
    }
    j["fused_kernels"] = {{"requested", flags.fused},
                          {"compiled", meddpm::fused::Compiled()},
                          {"unavailable_reason", meddpm::fused::NotCompiledReason()},
                          {"kernels", kernels}};
  }
  j["estimated_peak_memory_bytes"] = peak;
  j["estimated_peak_memory_gib"] = static_cast<double>(peak) / (1024.0 * 1024.0 * 1024.0);
  j["volume"] = {dims.d, dims.h, dims.w};
  j["phase"] = config::PhaseName(effective.phase());
  j["build"] = {{"worker_version", kVersionLine},
                {"torch_version", TorchBuildVersion()},
                {"torch_cuda", profiler::TorchHasCuda()},
                {"cuda_compiled", profiler::DescribeCudaLibraries().cuda_compiled},
                {"cupti_compiled", profiler::DescribeCudaLibraries().cuda_compiled}};
  return j.dump(2);
}

}  // namespace medprof::worker
