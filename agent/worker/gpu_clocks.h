// The GPU's operating state for a run's environment: SM and memory clocks (current and
// maximum), the enforced power cap, power draw, temperature and the clock-event ("throttle")
// reasons, read through NVML loaded at run time (agent/nvml; the worker links no NVML and
// starts without a driver). The worker reads it when the run starts, after the
// model is on the GPU, and stores it in RunStarted.environment (sm_clock_mhz, mem_clock_mhz,
// power_limit_w, throttle_reasons; the rest in environment.extra). A power cap below the
// GPU's default, a locked clock or an active thermal/power reason explains a slow run.
//
// nvml::Api is the seam: nvml::Library fills it from the real library, tests fill it with
// fakes. When NVML is missing or the device has no clock data (MIG, some vGPUs) the fields
// stay empty and environment.extra["gpu_clocks_unavailable"] says why. Pure functions apart
// from SampleGpuClocks (which loads and unloads the library); thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "agent/nvml/nvml.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::worker {

struct GpuClocks {
  uint32_t sm_clock_mhz = 0;       // current SM clock
  uint32_t mem_clock_mhz = 0;      // current memory clock
  uint32_t sm_clock_max_mhz = 0;   // the SM clock's maximum (0 = unknown)
  uint32_t mem_clock_max_mhz = 0;  // the memory clock's maximum (0 = unknown)
  uint32_t power_limit_w = 0;      // enforced power limit in W, rounded (0 = unknown)
  uint32_t power_draw_w = 0;       // power draw now in W, rounded (0 = unknown)
  uint32_t temperature_c = 0;      // GPU core temperature (0 = unknown)
  bool reasons_known = false;      // whether throttle_reasons was read
  uint64_t throttle_reasons = 0;   // nvmlClocksEventReasons bit mask
  std::string driver_version;      // the driver's own version, e.g. "580.95.05" ("" = unknown)
};

// Reads the GPU whose NVML UUID is `uuid` ("GPU-xxxxxxxx-...", as the CUDA runtime reports
// it; CUDA_VISIBLE_DEVICES renumbers devices, UUIDs stay). An empty `uuid` reads device 0.
// Entry points: those nvml::kClocks requires, and one of GetHandleByUuid / GetHandleByIndex;
// the others may be null (older drivers, vGPUs). Calls Init and Shutdown. Errors: UNAVAILABLE
// naming the missing entry point or the NVML call that failed.
absl::StatusOr<GpuClocks> ReadGpuClocks(const nvml::Api& api, const std::string& uuid);

// nvml::Library::Load(nvml::kClocks, library) + ReadGpuClocks; the library is closed again.
// NOT_FOUND when the library cannot be loaded, UNAVAILABLE when an entry point is missing.
absl::StatusOr<GpuClocks> SampleGpuClocks(const std::string& uuid,
                                          const std::string& library = nvml::kLibrary);

// The reason bits as names, comma-separated, in bit order: "gpu_idle", "applications_clocks",
// "sw_power_cap", "hw_slowdown", "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
// "hw_power_brake_slowdown", "display_clock"; unknown bits as one "0x..." entry; 0 -> "none".
std::string ThrottleReasonNames(uint64_t mask);

// Stores a reading in `env`: sm_clock_mhz, mem_clock_mhz, power_limit_w, throttle_reasons,
// driver_version, and extra["sm_clock_max_mhz"], ["mem_clock_max_mhz"], ["power_draw_w"],
// ["gpu_temperature_c"] (known values only), ["gpu_clocks_at"] = `when`. An error leaves those
// fields empty and sets extra["gpu_clocks_unavailable"] to its message.
void FillGpuClockEnvironment(const absl::StatusOr<GpuClocks>& clocks, const std::string& when,
                             v1::Environment* env);

}  // namespace medprof::worker
