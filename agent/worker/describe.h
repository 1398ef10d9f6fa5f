// `medprof-worker --describe`: what a configuration is, without running it.
//
// DescribeJson(effective) returns a JSON object:
//   parameters                    model parameter count (meddpm::CountParameters; 40226433
//                                 for the published 128^3 model)
//   config                        the effective WorkloadConfig (proto JSON, field names as in
//                                 workload.proto, every field printed)
//   flags                         {tf32, channels_last, bf16, fused}: the preset after overrides
//   fused_group_norm              {requested, compiled, unavailable_reason, kernels: [{name,
//                                  role}]}: medprof's fused GroupNorm kernels, listed on every
//                                 build; compiled false (with the reason) where this binary
//                                 cannot run them
//   estimated_peak_memory_bytes   meddpm::EstimatePeakMemoryBytes
//   estimated_peak_memory_gib
//   volume                        [d, h, w]
//   phase                         forward | train | sample
//   build                         {worker_version, torch_version, torch_cuda, cuda_compiled,
//                                  cupti_compiled}
// Pure; thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::worker {

absl::StatusOr<std::string> DescribeJson(const v1::WorkloadConfig& effective);

// The LibTorch version this worker was compiled against ("1.13.0").
std::string TorchBuildVersion();

}  // namespace medprof::worker
