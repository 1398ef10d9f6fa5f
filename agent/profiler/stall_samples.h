// StallSamples: PC-sampling counts per kernel and stall reason, and their shares.
//
// Input: (function name, CUPTI stall-reason name, samples) triples as PC sampling reports them
// (reason names like "smsp__pcsamp_warps_issue_stalled_long_scoreboard" and its
// "_not_issued" twin; "smsp__pcsamp_sample_count"-style totals are ignored). Issued and
// not-issued samples of one reason are pooled (spec/cupti.md §4.1). Output: per kernel, the
// share of its samples per reason (0..1) — the metric rows `pcsamp.<reason>` of docs/metrics.md.
//
// Pure; not thread-safe (one owner).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace medprof::profiler {

// "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued" -> "long_scoreboard";
// "" for names that are not stall reasons.
std::string NormalizeStallReason(const std::string& cupti_name);

class StallSamples {
 public:
  void Add(const std::string& kernel, const std::string& cupti_reason, uint64_t samples);
  void AddDropped(uint64_t samples) { dropped_ += samples; }

  struct Kernel {
    uint64_t total = 0;
    std::map<std::string, uint64_t> by_reason;
  };
  const std::map<std::string, Kernel>& kernels() const { return kernels_; }
  uint64_t total() const { return total_; }
  uint64_t dropped() const { return dropped_; }
  // reason -> share of the kernel's samples; empty when the kernel has none.
  std::map<std::string, double> Shares(const std::string& kernel) const;

 private:
  std::map<std::string, Kernel> kernels_;
  uint64_t total_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace medprof::profiler
