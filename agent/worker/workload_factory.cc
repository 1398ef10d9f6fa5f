#include "agent/worker/workload_factory.h"

#include <utility>

#include "agent/worker/config_mapping.h"
#include "common/logging.h"
#include "workloads/meddpm/fused_info.h"
#include "workloads/meddpm/workload.h"
#include "workloads/torchscript/workload.h"

namespace medprof::worker {
namespace {

const Logger kLog("worker");

void LogFusedCounts() {
  for (const meddpm::fused::Op op :
       {meddpm::fused::Op::kGroupNorm, meddpm::fused::Op::kUpsample, meddpm::fused::Op::kSmallConv}) {
    const meddpm::fused::CallCounts n = meddpm::fused::Counts(op);
    if (n.fallback > 0) {
      kLog.Warn("fused {}: {} calls through medprof's kernels, {} through LibTorch's ops (last reason: {})",
                meddpm::fused::OpName(op), n.fused, n.fallback, n.last_fallback_reason);
    } else {
      kLog.Info("fused {}: {} calls through medprof's kernels", meddpm::fused::OpName(op), n.fused);
    }
  }
}

}  // namespace

std::string_view WorkloadKindName(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kMedDdpm: return "meddpm";
    case WorkloadKind::kTorchScript: return "torchscript";
  }
  return "unknown";
}

WorkloadKind WorkloadKindOf(const v1::WorkloadConfig& effective) {
  return effective.has_model() ? WorkloadKind::kTorchScript : WorkloadKind::kMedDdpm;
}

absl::StatusOr<std::unique_ptr<workload::Workload>> CreateWorkload(const v1::WorkloadConfig& effective,
                                                                   v1::DeviceKind device) {
  switch (WorkloadKindOf(effective)) {
    case WorkloadKind::kMedDdpm: {
      auto created = meddpm::Workload::Create(ToWorkloadOptions(effective, device));
      if (!created.ok()) return created.status();
      return std::unique_ptr<workload::Workload>(*std::move(created));
    }
    case WorkloadKind::kTorchScript: {
      auto created = torchscript::Workload::Create(ToTorchScriptOptions(effective, device));
      if (!created.ok()) return created.status();
      return std::unique_ptr<workload::Workload>(*std::move(created));
    }
  }
  return absl::InternalError("no workload implementation for this job");
}

void LogWorkloadCounters(const v1::WorkloadConfig& effective, const workload::EffectiveFlags& flags) {
  switch (WorkloadKindOf(effective)) {
    case WorkloadKind::kMedDdpm:
      if (flags.fused) LogFusedCounts();  // requested and runnable (else the workload note says why not)
      return;
    case WorkloadKind::kTorchScript:
      return;  // its note (what each preset did to the module) is in the run's environment
  }
}

}  // namespace medprof::worker
