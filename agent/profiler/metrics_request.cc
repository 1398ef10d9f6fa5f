#include "agent/profiler/metrics_request.h"

#include "absl/strings/str_cat.h"

namespace medprof::profiler {

absl::StatusOr<CounterApiChoice> ParseCounterApiChoice(std::string_view text) {
  if (text == "auto") return CounterApiChoice::kAuto;
  if (text == "range") return CounterApiChoice::kRange;
  if (text == "legacy") return CounterApiChoice::kLegacy;
  return absl::InvalidArgumentError(
      absl::StrCat("counter_api: '", std::string(text), "' is not a counter API (allowed: auto|range|legacy)"));
}

std::string_view CounterApiChoiceName(CounterApiChoice c) {
  switch (c) {
    case CounterApiChoice::kRange: return "range";
    case CounterApiChoice::kLegacy: return "legacy";
    case CounterApiChoice::kAuto: break;
  }
  return "auto";
}

absl::Status CheckLegacyApiStep(CounterApiChoice choice, bool legacy_api, bool train_step) {
  if (!legacy_api || !train_step || choice == CounterApiChoice::kLegacy) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "metrics layer skipped: this GPU needs the legacy Profiling API (compute capability below 7.5), "
      "which stops inside a train step's first kernel session (seen on Hopper; the cause is not found "
      "yet). Trace, op, sampling and PM layers are unaffected; hardware metrics work on --phase forward, "
      "or force --counter-api legacy to try the train step anyway");
}

}  // namespace medprof::profiler
