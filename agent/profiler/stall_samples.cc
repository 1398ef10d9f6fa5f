#include "agent/profiler/stall_samples.h"

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace medprof::profiler {

std::string NormalizeStallReason(const std::string& cupti_name) {
  absl::string_view n(cupti_name);
  if (!absl::ConsumePrefix(&n, "smsp__pcsamp_warps_issue_stalled_")) return "";
  absl::ConsumeSuffix(&n, "_not_issued");
  return std::string(n);
}

void StallSamples::Add(const std::string& kernel, const std::string& cupti_reason, uint64_t samples) {
  const std::string reason = NormalizeStallReason(cupti_reason);
  if (reason.empty() || samples == 0) return;
  Kernel& k = kernels_[kernel];
  k.total += samples;
  k.by_reason[reason] += samples;
  total_ += samples;
}

std::map<std::string, double> StallSamples::Shares(const std::string& kernel) const {
  std::map<std::string, double> out;
  auto it = kernels_.find(kernel);
  if (it == kernels_.end() || it->second.total == 0) return out;
  for (const auto& [reason, n] : it->second.by_reason) {
    out[reason] = static_cast<double>(n) / static_cast<double>(it->second.total);
  }
  return out;
}

}  // namespace medprof::profiler
