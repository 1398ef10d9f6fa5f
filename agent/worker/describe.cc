#include "agent/worker/describe.h"

#include <torch/version.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "agent/profiler/backend.h"
#include "agent/profiler/gpu_probe.h"
#include "agent/worker/config_mapping.h"
#include "agent/worker/workload_factory.h"
#include "common/proto_json.h"
#include "common/status.h"
#include "common/version.h"
#include "common/workload_config.h"
#include "workloads/meddpm/fused_info.h"
#include "workloads/meddpm/workload.h"

namespace medprof::worker {

std::string TorchBuildVersion() { return TORCH_VERSION; }

namespace {

nlohmann::ordered_json Shape(const std::vector<int64_t>& v) { return nlohmann::ordered_json(v); }

// Med-DDPM: the parameter count and memory estimate come from the plan (nothing runs).
void DescribeMedDdpm(const v1::WorkloadConfig& effective, nlohmann::ordered_json* j) {
  const meddpm::WorkloadOptions options = ToWorkloadOptions(effective, effective.device());
  const uint64_t peak = meddpm::EstimatePeakMemoryBytes(options);
  (*j)["parameters"] = meddpm::CountParameters(options.model);
  // Listed on every build; `compiled` says whether this binary can run them at all (a CPU run
  // with fused on still runs LibTorch's ops: the run's workload_note says so).
  nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
  for (const meddpm::fused::KernelInfo& k : meddpm::fused::Kernels()) {
    kernels.push_back({{"name", k.name}, {"role", k.role}});
  }
  (*j)["fused_kernels"] = {{"requested", config::EffectiveFlags(effective).fused},
                           {"compiled", meddpm::fused::Compiled()},
                           {"unavailable_reason", meddpm::fused::NotCompiledReason()},
                           {"kernels", kernels}};
  (*j)["estimated_peak_memory_bytes"] = peak;
  (*j)["estimated_peak_memory_gib"] = static_cast<double>(peak) / (1024.0 * 1024.0 * 1024.0);
}

// A user model: loaded, checked and dry-run on the configured device (a bad model is an error).
absl::Status DescribeUserModel(const v1::WorkloadConfig& effective, nlohmann::ordered_json* j) {
  MEDPROF_ASSIGN_OR_RETURN(const torchscript::Description d,
                           torchscript::Describe(ToTorchScriptOptions(effective, effective.device())));
  const v1::ModelRef& m = effective.model();
  (*j)["parameters"] = d.parameters;
  (*j)["model"] = {{"file_name", m.file_name()},
                   {"sha256", m.sha256()},
                   {"size_bytes", m.size_bytes()},
                   {"signature", d.signature},
                   {"conditional", d.conditional}};
  (*j)["dry_run"] = {{"device", d.device},
                     {"x", Shape(d.x_shape)},
                     {"t", Shape(d.t_shape)},
                     {"cond", Shape(d.cond_shape)},
                     {"output", Shape(d.output_shape)},
                     {"output_dtype", d.output_dtype},
                     {"output_channels_last", d.output_channels_last},
                     {"t_dependence_checked", d.t_dependence_checked}};
  (*j)["applied"] = {{"tf32_cudnn", d.flags.tf32_cudnn}, {"tf32_matmul", d.flags.tf32_matmul},
                     {"channels_last", d.flags.channels_last}, {"bf16", d.flags.bf16},
                     {"fused", d.flags.fused}, {"note", d.flags.note}};
  (*j)["memory"] = {{"state_bytes", d.state_bytes},
                    {"activation_bytes", d.activation_bytes},
                    {"activation_method", d.memory_method}};
  (*j)["estimated_peak_memory_bytes"] = d.estimated_peak_bytes;
  (*j)["estimated_peak_memory_gib"] = static_cast<double>(d.estimated_peak_bytes) / (1024.0 * 1024.0 * 1024.0);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> DescribeJson(const v1::WorkloadConfig& effective) {
  MEDPROF_ASSIGN_OR_RETURN(std::string config_json,
                           MessageToJson(effective, {.pretty = false, .print_defaults = true}));
  const config::PresetFlags flags = config::EffectiveFlags(effective);
  const config::Dims dims = config::VolumeDims(effective);

  nlohmann::ordered_json j;
  j["workload"] = std::string(WorkloadKindName(WorkloadKindOf(effective)));
  j["parameters"] = 0;  // filled below, first in the object
  if (WorkloadKindOf(effective) == WorkloadKind::kTorchScript) {
    MEDPROF_RETURN_IF_ERROR(DescribeUserModel(effective, &j));
  } else {
    DescribeMedDdpm(effective, &j);
  }
  j["config"] = nlohmann::ordered_json::parse(config_json);
  j["flags"] = {{"tf32", flags.tf32},
                {"channels_last", flags.channels_last},
                {"bf16", flags.bf16},
                {"fused", flags.fused}};
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
