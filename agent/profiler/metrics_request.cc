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

}  // namespace medprof::profiler
