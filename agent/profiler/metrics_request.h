// MetricsRequest: what a job asks of the metrics layer (WorkloadConfig's metrics fields, checked by
// common/workload_config.cc before they get here). No CUPTI types: the CPU backend and the worker's
// argument mapping use it too.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/request_limits.h"

namespace medprof::profiler {

// Which CUPTI counter API the metrics layer drives: by compute capability (the range profiler from
// CC 7.5, the legacy Profiling API below, i.e. V100), or the one named.
enum class CounterApiChoice { kAuto, kRange, kLegacy };

// "auto" | "range" | "legacy"; INVALID_ARGUMENT naming the allowed values otherwise.
absl::StatusOr<CounterApiChoice> ParseCounterApiChoice(std::string_view text);
std::string_view CounterApiChoiceName(CounterApiChoice c);

struct MetricsRequest {
  bool enabled = false;
  int top_k = 20;          // kernels profiled, largest trace time first
  int launches = 3;        // steps in which each chosen signature's first launch is profiled (medians kept)
  int coverage_pct = limits::kDefaultMetricsCoveragePct;      // signatures chosen per kernel until they cover
  int max_signatures = limits::kDefaultMetricsMaxSignatures;  // this share of its time, or this many
  CounterApiChoice counter_api = CounterApiChoice::kAuto;
};

}  // namespace medprof::profiler
