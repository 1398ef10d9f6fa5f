// The worker's choice of workload implementation for a job: the one place that knows which
// implementations exist (everything after creation sees only workloads/workload.h).
//
// A job asks for a workload kind (WorkloadKindOf): a job whose WorkloadConfig names a user model
// (`model`, a ModelRef whose local_path the agent or --model filled) runs that TorchScript file
// (workloads/torchscript); every other job is Med-DDPM (workloads/meddpm). Adding an
// implementation:
//   1. add its kind to WorkloadKind and its name to WorkloadKindName;
//   2. in WorkloadKindOf, map what the job asks for (a WorkloadConfig field) to that kind;
//   3. in CreateWorkload and LogWorkloadCounters, add its case (the compiler flags a missing one).
// Pure apart from the workload it creates; call from the thread that will run the workload.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "medprof/v1/workload.pb.h"
#include "workloads/workload.h"

namespace medprof::worker {

enum class WorkloadKind {
  kMedDdpm,       // workloads/meddpm: the Med-DDPM 3D U-Net on synthetic inputs
  kTorchScript,   // workloads/torchscript: a user's TorchScript denoiser in the same DDPM loop
};

// "meddpm" | "torchscript" (for logs and errors).
std::string_view WorkloadKindName(WorkloadKind kind);

// The implementation `effective` asks for.
WorkloadKind WorkloadKindOf(const v1::WorkloadConfig& effective);

// Creates the implementation `effective` asks for, configured by it, on `device`
// (DEVICE_KIND_CPU or DEVICE_KIND_CUDA, as the backend choice settled). The caller owns the
// result. Errors are the implementation's creation errors (workloads/workload.h lists the codes).
absl::StatusOr<std::unique_ptr<workload::Workload>> CreateWorkload(const v1::WorkloadConfig& effective,
                                                                   v1::DeviceKind device);

// After a run, logs what the job's implementation counted that the records do not carry
// (Med-DDPM with fused kernels in use: calls through medprof's kernels and fallbacks to
// LibTorch's ops, as warnings when any fell back). Call from the workload's thread.
void LogWorkloadCounters(const v1::WorkloadConfig& effective, const workload::EffectiveFlags& flags);

}  // namespace medprof::worker
