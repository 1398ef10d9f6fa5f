// CounterSession: one hardware-counter collection session on a CUDA context, behind which sit
// the two CUPTI profiling APIs (spec/cupti.md §0, §1):
//   kRangeProfiler  cupti_range_profiler.h + the profiler host API (CUDA >= 12.6, CC >= 7.5)
//   kLegacy         the Profiling API (cupti_profiler_target.h BeginSession/SetConfig/BeginPass)
//                   + Perfworks host (nvperf_host.h NVPW_*): the only path on V100 (CC 7.0, with a
//                   CUDA 12.x toolkit); deprecated in CUDA 13 but still served for Volta..Hopper.
// Both take the same Perfworks metric names and return the same RangeValues, so the metrics layer
// does not know which one it drives. DefaultCounterApi picks by compute capability; the worker's
// --profiler-api overrides it (to check one against the other on a GPU both serve).
//
// Session life: NewCounterSession(...) configures -> { Start -> [PushRange/PopRange] work ->
// Stop } until Stop reports every pass submitted (kernel replay: once) -> Decode.
// Not thread-safe; Start/Stop may run inside CUPTI launch callbacks of the controlling thread.
#pragma once

#include <cuda.h>
#include <cupti_profiler_target.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace medprof::profiler {

enum class CounterApi { kRangeProfiler, kLegacy };
const char* CounterApiName(CounterApi api);  // "range profiler" | "legacy profiling API"
// Range profiler from CC 7.5 (Turing) on; the legacy API below (Volta).
CounterApi DefaultCounterApi(int cc_major, int cc_minor);
// Whether this build has the legacy backend (the toolkit's nvperf_host.h and the legacy target
// API); without it, kLegacy sessions are UNIMPLEMENTED with the reason.
bool LegacyCounterApiCompiled();

struct RangeValues {
  std::string name;            // auto range: "0", "1", ... in launch order; user range: pushed name
  std::vector<double> values;  // one per metric, in the order given
};

struct CounterSessionOptions {
  CUcontext ctx = nullptr;
  std::string chip;                   // "GH100", "GV100", ...
  std::vector<uint8_t> availability;  // counter-availability image of ctx
  std::vector<std::string> metrics;   // Perfworks names, valid on the chip
  CUpti_ProfilerRange range = CUPTI_AutoRange;
  CUpti_ProfilerReplayMode replay = CUPTI_KernelReplay;
  size_t max_ranges = 32;
};

class CounterSession {
 public:
  virtual ~CounterSession() = default;
  virtual CounterApi api() const = 0;
  virtual size_t passes() const = 0;  // passes the configuration needs (0 when unknown)
  virtual absl::Status Start() = 0;
  // Whether every pass has been submitted.
  virtual absl::StatusOr<bool> Stop() = 0;
  virtual absl::Status PushRange(const char* name) = 0;
  virtual absl::Status PopRange() = 0;
  // Every range with its values; *dropped = ranges the counter data could not hold.
  virtual absl::StatusOr<std::vector<RangeValues>> Decode(size_t* dropped) = 0;
};

absl::StatusOr<std::unique_ptr<CounterSession>> NewCounterSession(CounterApi api,
                                                                  const CounterSessionOptions& options);

// The legacy backend's host half alone (Perfworks; no GPU needed): builds the configuration
// image and counter-data prefix for `metrics` on `chip` and returns the passes it needs.
absl::StatusOr<size_t> LegacyConfigPasses(const std::string& chip, const std::vector<std::string>& metrics);

// The raw hardware counters a Perfworks metric is computed from on `chip` (Perfworks' metrics
// evaluator; no GPU needed), as Perfworks names them. How the tests check that a metric medprof
// derives from parts (metric_catalog.h DeriveFromParts) reads the same counters as the original.
absl::StatusOr<std::vector<std::string>> MetricRawCounters(const std::string& chip, const std::string& metric);

}  // namespace medprof::profiler
