// CuptiHost: RAII wrapper of the CUPTI profiler host API (cupti_profiler_host.h): metric
// validity per chip, configuration images, pass counts and evaluation of counter data.
//
// The host API needs no GPU (spec/cupti.md: host-side probe for GV100/TU102/GA100/GH100), so
// everything here also runs on the CI machine: unit tests resolve the catalog for real chips.
// One object per (profiler type, chip, counter-availability image). Not thread-safe; use from
// one thread. Only built with CUPTI (MEDPROF_HAVE_CUDA).
#pragma once

#include <cupti_profiler_host.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace medprof::profiler {

// Pointers to the names, for the CUPTI calls that take `const char**` (valid while `names` lives).
std::vector<const char*> CStrings(const std::vector<std::string>& names);

class CuptiHost {
 public:
  // `availability` may be empty (host-only use: validity and pass counts without a device).
  static absl::StatusOr<std::unique_ptr<CuptiHost>> Create(CUpti_ProfilerType type, const std::string& chip,
                                                           const std::vector<uint8_t>& availability);
  ~CuptiHost();
  CuptiHost(const CuptiHost&) = delete;
  CuptiHost& operator=(const CuptiHost&) = delete;

  // "" when `metric` (with rollup/submetric) is valid on this chip, else the CUPTI error.
  std::string Validity(const std::string& metric);
  // One configuration: its own host object (CUPTI accumulates added metrics there), the
  // configuration image and the metrics, which Evaluate() reads back from counter data.
  class Config {
   public:
    ~Config();
    Config(const Config&) = delete;
    Config& operator=(const Config&) = delete;
    std::vector<uint8_t>& image() { return image_; }
    const std::vector<std::string>& metrics() const { return metrics_; }
    size_t passes() const { return passes_; }
    // Values of metrics() for one range (or sample) of decoded counter data.
    absl::StatusOr<std::vector<double>> Evaluate(const std::vector<uint8_t>& counter_data,
                                                 size_t index) const;

   private:
    friend class CuptiHost;
    Config() = default;
    CUpti_Profiler_Host_Object* object_ = nullptr;
    std::vector<uint8_t> image_;
    std::vector<std::string> metrics_;
    size_t passes_ = 0;
  };
  // A configuration for `metrics` (each must be valid on the chip).
  absl::StatusOr<std::unique_ptr<Config>> NewConfig(const std::vector<std::string>& metrics);
  const std::string& chip() const { return chip_; }

 private:
  CuptiHost(CUpti_ProfilerType type, std::string chip, std::vector<uint8_t> availability)
      : type_(type), chip_(std::move(chip)), availability_(std::move(availability)) {}
  absl::StatusOr<CUpti_Profiler_Host_Object*> NewObject();

  CUpti_ProfilerType type_;
  std::string chip_;
  std::vector<uint8_t> availability_;
  CUpti_Profiler_Host_Object* object_ = nullptr;  // for validity and evaluation
};

}  // namespace medprof::profiler
