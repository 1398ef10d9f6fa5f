// PcSampler: CUPTI PC sampling in continuous mode on one context (spec/cupti.md §4.1, §4.3).
//
// Enable() must run when the context is created (the CONTEXT_CREATED callback), before any
// module loads — enabled later it collects nothing on the H200 probe. Continuous mode does not
// serialize kernels; samples carry no kernel id, so they are attributed by function name.
// Drain(keep) empties CUPTI's buffers (GetData until nothing remains) into `samples` when keep
// is true, else discards them (warm-up); Disable() drains and turns sampling off (the range
// profiler and PM sampling must not run at the same time).
//
// Not thread-safe: Enable from the callback thread, the rest from the workload thread, never
// concurrently (the worker's step hooks come after context creation). Only built with CUPTI.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/profiler/stall_samples.h"

namespace medprof::profiler {

struct PcSamplerOptions {
  uint32_t period_exponent = 17;      // sample every 2^N cycles per SM (spec: 2^14..2^18)
  size_t max_pcs = 10000;             // PCs per GetData call
  size_t scratch_bytes = 8 << 20;     // CUPTI's decode buffer
  size_t hardware_bytes = 128 << 20;  // device-side buffer (CUPTI default 512 MB)
};

class PcSampler {
 public:
  static absl::StatusOr<std::unique_ptr<PcSampler>> Enable(CUcontext ctx, const PcSamplerOptions& options);
  ~PcSampler();
  PcSampler(const PcSampler&) = delete;
  PcSampler& operator=(const PcSampler&) = delete;

  absl::Status Drain(bool keep, StallSamples* samples);
  absl::Status Disable(StallSamples* samples, bool keep);
  bool enabled() const { return enabled_; }
  bool hardware_buffer_full() const { return hardware_buffer_full_; }

 private:
  PcSampler() = default;
  CUcontext ctx_ = nullptr;
  bool enabled_ = false;
  bool hardware_buffer_full_ = false;
  std::vector<std::string> reason_names_;  // by position in the stall-reason table
  std::vector<uint32_t> reason_indices_;
  std::vector<std::vector<char>> reason_storage_;
  std::vector<std::vector<uint8_t>> pc_storage_;  // per PC: its stall-reason array
  std::vector<uint8_t> pc_data_;                  // CUpti_PCSamplingPCData[max_pcs]
  std::vector<uint8_t> data_;                     // CUpti_PCSamplingData
  size_t max_pcs_ = 0;
};

}  // namespace medprof::profiler
