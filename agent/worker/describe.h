// `medprof-worker --describe`: what a configuration is, before a step runs.
//
// DescribeJson(effective) returns a JSON object:
//   workload                      meddpm | torchscript (workload_factory.h)
//   parameters                    model parameter count (Med-DDPM: meddpm::CountParameters,
//                                 40226433 for the published 128^3 model; a user model: counted)
//   config                        the effective WorkloadConfig (proto JSON, every field printed)
//   flags                         {tf32, channels_last, bf16, fused}: the preset after overrides
//   estimated_peak_memory_bytes   Med-DDPM: meddpm::EstimatePeakMemoryBytes; a user model:
//   estimated_peak_memory_gib     torchscript::Description's estimate (state + measured activations)
//   volume                        [d, h, w]
//   phase                         forward | train | sample
//   build                         {worker_version, torch_version, torch_cuda, cuda_compiled,
//                                  cupti_compiled}
// Med-DDPM only (pure: nothing is built):
//   fused_kernels                 {requested, compiled, unavailable_reason, kernels: [{name, role}]}
// A user model only (effective.model set: the file is loaded and dry-run, on the configured device):
//   model                         {file_name, sha256, size_bytes, signature, conditional}
//   dry_run                       {device, x, t, cond, output (shapes at batch 1), output_dtype,
//                                  output_channels_last, t_dependence_checked}
//   applied                       the flags read back and the note on what each preset did
//   memory                        {state_bytes, activation_bytes, activation_method}
// A bad user model is an error naming the cause (torchscript::Describe). Call from one thread.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::worker {

absl::StatusOr<std::string> DescribeJson(const v1::WorkloadConfig& effective);

// The LibTorch version this worker was compiled against ("1.13.0").
std::string TorchBuildVersion();

}  // namespace medprof::worker
