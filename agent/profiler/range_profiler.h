// RangeProfilerTarget: the device side of the CUPTI range profiler (cupti_range_profiler.h,
// CUDA >= 12.6, CC >= 7.5), one per CUDA context.
//
// Session life: Enable(ctx) -> Configure(config, range mode, replay mode, max ranges) ->
// { Start -> [PushRange/PopRange] work -> Stop } until Stop reports every pass submitted ->
// Decode() -> ranges with their metric values (evaluated by the config's host object).
// Kernel replay finishes in one Start/Stop; user replay needs one per pass (the caller re-runs
// the region). Configure may be called again for a new session (counter data is re-made).
//
// Also the per-device probes the metrics layer needs first: ChipName, CounterAvailability and
// DeviceSupported (vGPU, confidential compute, architecture...), which say why it cannot run.
//
// Not thread-safe: one controlling thread (Start/Stop may be called from CUPTI launch callbacks
// of that same thread). Only built with CUPTI.
#pragma once

#include <cuda.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/profiler/counter_session.h"
#include "agent/profiler/cupti_host.h"

namespace medprof::profiler {

// cuptiProfilerInitialize (once per process; idempotent here).
absl::Status InitializeCuptiProfiler();
absl::StatusOr<std::string> ChipName(int device_index);
absl::StatusOr<std::vector<uint8_t>> CounterAvailability(CUcontext ctx);
// OK when `api` is supported on the device; else a status naming each unsupported aspect.
absl::Status DeviceSupported(int device_index, CUpti_Profiler_API api);

class RangeProfilerTarget {
 public:
  static absl::StatusOr<std::unique_ptr<RangeProfilerTarget>> Enable(CUcontext ctx);
  ~RangeProfilerTarget();
  RangeProfilerTarget(const RangeProfilerTarget&) = delete;
  RangeProfilerTarget& operator=(const RangeProfilerTarget&) = delete;

  absl::Status Configure(CuptiHost::Config* config, CUpti_ProfilerRange range,
                         CUpti_ProfilerReplayMode replay, size_t max_ranges);
  absl::Status Start();
  // Returns whether every pass has been submitted.
  absl::StatusOr<bool> Stop();
  absl::Status PushRange(const char* name);
  absl::Status PopRange();
  // Decodes the counter data and evaluates every range. Sets *dropped to the ranges CUPTI could
  // not keep (more ranges than the image holds).
  absl::StatusOr<std::vector<RangeValues>> Decode(size_t* dropped);

 private:
  RangeProfilerTarget() = default;
  CUpti_RangeProfiler_Object* object_ = nullptr;
  CuptiHost::Config* config_ = nullptr;
  std::vector<uint8_t> counter_data_;
};

}  // namespace medprof::profiler
