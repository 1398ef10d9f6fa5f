#include "agent/worker/gpu_clocks.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace medprof::worker {
namespace {

// nvmlClocksEventReasons bits (nvml.h, nvmlClocksEventReason*), in bit order.
constexpr std::array<std::pair<uint64_t, const char*>, 9> kReasons = {{
    {0x1, "gpu_idle"},
    {0x2, "applications_clocks"},
    {0x4, "sw_power_cap"},
    {0x8, "hw_slowdown"},
    {0x10, "sync_boost"},
    {0x20, "sw_thermal_slowdown"},
    {0x40, "hw_thermal_slowdown"},
    {0x80, "hw_power_brake_slowdown"},
    {0x100, "display_clock"},
}};

uint32_t MilliwattsToWatts(unsigned mw) { return static_cast<uint32_t>((mw + 500u) / 1000u); }

absl::StatusOr<GpuClocks> ReadDevice(const nvml::Api& api, const std::string& uuid) {
  nvml::Device dev = nullptr;
  if (!uuid.empty() && api.GetHandleByUuid != nullptr) {
    MEDPROF_NVML_CALL(api, GetHandleByUuid(uuid.c_str(), &dev));
  } else if (uuid.empty() && api.GetHandleByIndex != nullptr) {
    MEDPROF_NVML_CALL(api, GetHandleByIndex(0, &dev));
  } else {
    return absl::UnavailableError(
        absl::StrCat("NVML library lacks nvmlDeviceGetHandleBy", uuid.empty() ? "Index_v2" : "UUID"));
  }
  GpuClocks c;
  unsigned v = 0;
  MEDPROF_NVML_CALL(api, GetClockInfo(dev, nvml::kClockSm, &v));
  c.sm_clock_mhz = v;
  MEDPROF_NVML_CALL(api, GetClockInfo(dev, nvml::kClockMem, &v));
  c.mem_clock_mhz = v;
  // The rest is optional: a vGPU or an old driver answers NOT_SUPPORTED for some of it.
  if (api.GetMaxClockInfo != nullptr && api.GetMaxClockInfo(dev, nvml::kClockSm, &v) == nvml::kSuccess)
    c.sm_clock_max_mhz = v;
  if (api.GetMaxClockInfo != nullptr && api.GetMaxClockInfo(dev, nvml::kClockMem, &v) == nvml::kSuccess)
    c.mem_clock_max_mhz = v;
  if (api.GetEnforcedPowerLimit != nullptr && api.GetEnforcedPowerLimit(dev, &v) == nvml::kSuccess)
    c.power_limit_w = MilliwattsToWatts(v);
  if (api.GetPowerUsage != nullptr && api.GetPowerUsage(dev, &v) == nvml::kSuccess)
    c.power_draw_w = MilliwattsToWatts(v);
  if (api.GetTemperature != nullptr && api.GetTemperature(dev, nvml::kTemperatureGpu, &v) == nvml::kSuccess)
    c.temperature_c = v;
  char driver[nvml::kDriverBuffer] = {};
  if (api.GetDriverVersion != nullptr && api.GetDriverVersion(driver, sizeof driver) == nvml::kSuccess)
    c.driver_version = driver;
  unsigned long long reasons = 0;
  if (api.GetEventReasons != nullptr && api.GetEventReasons(dev, &reasons) == nvml::kSuccess) {
    c.reasons_known = true;
    c.throttle_reasons = reasons;
  }
  return c;
}

}  // namespace

absl::StatusOr<GpuClocks> ReadGpuClocks(const nvml::Api& api, const std::string& uuid) {
  if (absl::Status s = nvml::RequireEntryPoints(api, nvml::kClocks); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<nvml::Session>> session = nvml::Session::Start(api);
  if (!session.ok()) return session.status();
  return ReadDevice(api, uuid);
}

absl::StatusOr<GpuClocks> SampleGpuClocks(const std::string& uuid, const std::string& library) {
  absl::StatusOr<std::unique_ptr<nvml::Library>> lib = nvml::Library::Load(nvml::kClocks, library);
  if (!lib.ok()) return lib.status();
  return ReadGpuClocks((*lib)->api(), uuid);
}

std::string ThrottleReasonNames(uint64_t mask) {
  if (mask == 0) return "none";
  std::string out;
  uint64_t known = 0;
  for (const auto& [bit, name] : kReasons) {
    known |= bit;
    if ((mask & bit) != 0) absl::StrAppend(&out, out.empty() ? "" : ",", name);
  }
  if (const uint64_t rest = mask & ~known; rest != 0) {
    absl::StrAppend(&out, out.empty() ? "" : ",", absl::StrFormat("0x%x", rest));
  }
  return out;
}

void FillGpuClockEnvironment(const absl::StatusOr<GpuClocks>& clocks, const std::string& when,
                             v1::Environment* env) {
  auto& extra = *env->mutable_extra();
  if (!clocks.ok()) {
    extra["gpu_clocks_unavailable"] = std::string(clocks.status().message());
    return;
  }
  const GpuClocks& c = *clocks;
  env->set_sm_clock_mhz(c.sm_clock_mhz);
  env->set_mem_clock_mhz(c.mem_clock_mhz);
  env->set_power_limit_w(c.power_limit_w);
  if (c.reasons_known) env->set_throttle_reasons(ThrottleReasonNames(c.throttle_reasons));
  if (c.sm_clock_max_mhz > 0) extra["sm_clock_max_mhz"] = absl::StrCat(c.sm_clock_max_mhz);
  if (c.mem_clock_max_mhz > 0) extra["mem_clock_max_mhz"] = absl::StrCat(c.mem_clock_max_mhz);
  if (c.power_draw_w > 0) extra["power_draw_w"] = absl::StrCat(c.power_draw_w);
  if (c.temperature_c > 0) extra["gpu_temperature_c"] = absl::StrCat(c.temperature_c);
  if (!c.driver_version.empty()) env->set_driver_version(c.driver_version);
  extra["gpu_clocks_at"] = when;
}

}  // namespace medprof::worker
