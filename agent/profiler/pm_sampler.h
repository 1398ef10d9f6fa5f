// PmSampler: CUPTI PM sampling (cupti_pmsampling.h, CUDA >= 12.6; A100/H100 and newer — V100
// has none): device-wide counters read every interval into a hardware buffer, decoded into
// samples of the single-pass set in metric_catalog.h (PmSamplingCatalog), for a utilization
// timeline per run (spec/cupti.md §4.2).
//
// Life: Enable(device, chip, metrics, interval, max samples) -> Start -> work -> Stop ->
// Decode. GA100 and Turing have no GPU-time trigger: there the interval is converted to SM
// clock cycles. Not thread-safe. Only built with CUPTI.
#pragma once

#include <cupti_pmsampling.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/profiler/cupti_host.h"

namespace medprof::profiler {

struct PmSample {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::vector<double> values;  // one per metric
};

class PmSampler {
 public:
  static absl::StatusOr<std::unique_ptr<PmSampler>> Enable(int device_index, const std::string& chip,
                                                           const std::vector<std::string>& metrics,
                                                           uint64_t interval_ns, uint32_t max_samples);
  ~PmSampler();
  PmSampler(const PmSampler&) = delete;
  PmSampler& operator=(const PmSampler&) = delete;

  absl::Status Start();
  absl::Status Stop();
  // Decodes everything collected; *overflow tells whether the hardware buffer overflowed.
  absl::StatusOr<std::vector<PmSample>> Decode(bool* overflow);

 private:
  PmSampler() = default;
  CUpti_PmSampling_Object* object_ = nullptr;
  std::unique_ptr<CuptiHost> host_;
  std::unique_ptr<CuptiHost::Config> config_;
  std::vector<uint8_t> counter_data_;
  bool started_ = false;
};

}  // namespace medprof::profiler
