// Choosing the profiler backend and the device for a run.
//
// ChooseBackend is the rule, as a pure function of the request, the GPU probe and whether
// LibTorch was built with CUDA:
//   --device cpu                      -> CPU, backend "cpu", GPU layers "device cpu requested"
//   --device auto, usable GPU         -> CUDA, backend "cupti"
//   --device auto, no usable GPU      -> CPU, backend "cpu", GPU layers "no GPU: <cause>"
//                                        (e.g. cudaGetDeviceCount error 35, no driver)
//   --device cuda, no usable GPU      -> FAILED_PRECONDITION naming the cause
// CreateProfiler builds the chosen backend; when CUPTI tracing cannot start on a GPU (e.g.
// another profiler attached, or CUPTI_ERROR_UNKNOWN without a driver) it falls back to the CPU
// backend and records why — a run is never lost to the profiler.
//
// Thread-safe (CreateProfiler: one profiler per process, see the backends).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/profiler/gpu_probe.h"
#include "agent/profiler/metrics_request.h"
#include "agent/profiler/profiler.h"
#include "common/roofline.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::profiler {

struct BackendChoice {
  v1::DeviceKind device = v1::DEVICE_KIND_CPU;  // CPU or CUDA (never UNSPECIFIED)
  std::string backend = "cpu";                  // "cpu" | "cupti"
  std::string reason;                           // why not the GPU ("" when on the GPU)
};

// True when this build's LibTorch can run on CUDA (MEDPROF_TORCH_HAS_CUDA).
bool TorchHasCuda();

absl::StatusOr<BackendChoice> ChooseBackend(v1::DeviceKind requested, const GpuProbe& probe,
                                            bool torch_has_cuda);

// What the job asks of the profiler (WorkloadConfig's profiler fields).
struct ProfilerRequest {
  bool trace = true;        // false: no CUPTI at all (e.g. to run under Nsight Compute)
  bool sampling = true;     // PC + PM sampling where counters are permitted
  MetricsRequest metrics;   // the hardware-counter layer (metrics_request.h)
  int overhead_pairs = 3;   // trace on/off step pairs measuring the trace overhead
};

// The profiler fields of a validated, defaulted job configuration.
absl::StatusOr<ProfilerRequest> ProfilerRequestFor(const v1::WorkloadConfig& config);

struct CreatedProfiler {
  std::unique_ptr<Profiler> profiler;
  std::string fallback_reason;  // set when the CUPTI backend was chosen but could not start
};

absl::StatusOr<CreatedProfiler> CreateProfiler(const BackendChoice& choice, const GpuProbe& probe,
                                               const ProfilerRequest& request = {});

}  // namespace medprof::profiler
