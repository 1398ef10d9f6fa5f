// The NVML declarations medprof uses and its one checked-call macro. Header-only, no link
// dependency: NVML is always loaded at run time with dlopen("libnvidia-ml.so.1"), so the agent
// (nvml_probe.cc) and the worker (agent/worker/gpu_clocks.cc) start on machines without an
// NVIDIA driver. The declarations copy the ABI-stable C API of nvml.h (nvml.h itself is not
// needed to build). Thread-safe (declarations and a macro only).
//
//   MEDPROF_NVML_CALL(api, GetCount(&count));
//
// calls `api.GetCount(&count)` once and, unless it returns NVML_SUCCESS, returns from the
// enclosing function an UNAVAILABLE status naming the call and NVML's own error text:
//   "NVML GetCount(&count) failed: Driver Not Loaded (9)".
// `api` is any struct with the member function pointers the call uses and `ErrorString`.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace medprof::nvml {

using Return = int;                       // nvmlReturn_t
using Device = struct nvmlDevice_st*;     // nvmlDevice_t
constexpr Return kSuccess = 0;            // NVML_SUCCESS
constexpr Return kErrorNotSupported = 3;  // NVML_ERROR_NOT_SUPPORTED
constexpr unsigned kClockGraphics = 0;    // NVML_CLOCK_GRAPHICS
constexpr unsigned kClockSm = 1;          // NVML_CLOCK_SM
constexpr unsigned kClockMem = 2;         // NVML_CLOCK_MEM
constexpr unsigned kTemperatureGpu = 0;   // NVML_TEMPERATURE_GPU
constexpr const char* kLibrary = "libnvidia-ml.so.1";

}  // namespace medprof::nvml

#define MEDPROF_NVML_CALL(api, call)                                                                         \
  do {                                                                                                       \
    const ::medprof::nvml::Return medprof_nvml_rc_ = (api).call;                                             \
    if (medprof_nvml_rc_ != ::medprof::nvml::kSuccess) {                                                     \
      return ::absl::UnavailableError(::absl::StrCat(                                                        \
          "NVML ", #call,                                                                                    \
          " failed: ", (api).ErrorString != nullptr ? (api).ErrorString(medprof_nvml_rc_) : "unknown error", \
          " (", medprof_nvml_rc_, ")"));                                                                     \
    }                                                                                                        \
  } while (false)
