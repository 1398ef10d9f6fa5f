// From the job's typed configuration to the workload's options, and the effective config.
//
// Effective(config) = ApplyDefaults + Validate (common/workload_config.h): INVALID_ARGUMENT
// naming the field and its range for anything out of bounds. ToWorkloadOptions maps a valid
// effective config (preset flags with overrides applied) onto meddpm::WorkloadOptions (or, for a
// user model, torchscript::Options) for the device the backend choice settled on. Pure; thread-safe.
#pragma once

#include "absl/status/statusor.h"
#include "medprof/v1/workload.pb.h"
#include "workloads/meddpm/workload.h"
#include "workloads/torchscript/workload.h"

namespace medprof::worker {

absl::StatusOr<v1::WorkloadConfig> Effective(v1::WorkloadConfig config);

// `device` is DEVICE_KIND_CPU or DEVICE_KIND_CUDA (UNSPECIFIED maps to meddpm's auto).
meddpm::WorkloadOptions ToWorkloadOptions(const v1::WorkloadConfig& effective, v1::DeviceKind device);

// The same job as a TorchScript user model's options (effective.model set): the file at
// model.local_path, the DDPM knobs and flags as for Med-DDPM, image channels = out_channels,
// conditioning channels = in_channels - out_channels.
torchscript::Options ToTorchScriptOptions(const v1::WorkloadConfig& effective, v1::DeviceKind device);

}  // namespace medprof::worker
