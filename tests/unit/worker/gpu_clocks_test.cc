// agent/worker/gpu_clocks: the reader over a fake NVML function table, the reason names, the
// environment fields, the real loader where the library is absent or is not NVML, and the
// fake NVML library.
#include "agent/worker/gpu_clocks.h"

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::worker {
namespace {

using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

// One fake GPU. NVML entry points are plain function pointers, so the fake's state is global;
// every test starts with Reset().
struct FakeGpu {
  std::string uuid = "GPU-11111111-2222-3333-4444-555555555555";
  nvml::Return init_rc = nvml::kSuccess;
  nvml::Return power_rc = nvml::kSuccess;
  unsigned sm = 1980, mem = 3201, sm_max = 1980, mem_max = 3201;
  unsigned power_limit_mw = 699'600, power_draw_mw = 81'400, temperature = 37;
  unsigned long long reasons = 0x1 | 0x4;
  int inits = 0, shutdowns = 0;
  std::string asked_uuid;
} g;
nvml::Device const kDev = reinterpret_cast<nvml::Device>(0x1234);

void Reset() { g = FakeGpu{}; }
nvml::Return FakeInit() {
  ++g.inits;
  return g.init_rc;
}
nvml::Return FakeShutdown() {
  ++g.shutdowns;
  return nvml::kSuccess;
}
const char* FakeErrorString(nvml::Return rc) {
  return rc == 9 ? "Driver Not Loaded" : rc == 13 ? "Not Found" : rc == 3 ? "Not Supported" : "Unknown Error";
}
nvml::Return FakeByUuid(const char* uuid, nvml::Device* dev) {
  g.asked_uuid = uuid;
  if (g.uuid != uuid) return 13;
  *dev = kDev;
  return nvml::kSuccess;
}
nvml::Return FakeByIndex(unsigned index, nvml::Device* dev) {
  if (index != 0) return 13;
  *dev = kDev;
  return nvml::kSuccess;
}
nvml::Return FakeClock(nvml::Device dev, unsigned type, unsigned* v) {
  if (dev != kDev) return 13;
  if (type == nvml::kClockSm)
    *v = g.sm;
  else if (type == nvml::kClockMem)
    *v = g.mem;
  else
    return nvml::kErrorNotSupported;
  return nvml::kSuccess;
}
nvml::Return FakeMaxClock(nvml::Device, unsigned type, unsigned* v) {
  *v = type == nvml::kClockSm ? g.sm_max : g.mem_max;
  return nvml::kSuccess;
}
nvml::Return FakePowerLimit(nvml::Device, unsigned* mw) {
  if (g.power_rc != nvml::kSuccess) return g.power_rc;
  *mw = g.power_limit_mw;
  return nvml::kSuccess;
}
nvml::Return FakePowerUsage(nvml::Device, unsigned* mw) {
  *mw = g.power_draw_mw;
  return nvml::kSuccess;
}
nvml::Return FakeTemperature(nvml::Device, unsigned sensor, unsigned* c) {
  if (sensor != nvml::kTemperatureGpu) return nvml::kErrorNotSupported;
  *c = g.temperature;
  return nvml::kSuccess;
}
nvml::Return FakeDriverVersion(char* out, unsigned size) {
  std::snprintf(out, size, "%s", "580.95.05");
  return nvml::kSuccess;
}
nvml::Return FakeReasons(nvml::Device, unsigned long long* r) {
  *r = g.reasons;
  return nvml::kSuccess;
}

nvml::Api FullApi() {
  nvml::Api a;
  a.Init = FakeInit;
  a.Shutdown = FakeShutdown;
  a.ErrorString = FakeErrorString;
  a.GetHandleByUuid = FakeByUuid;
  a.GetHandleByIndex = FakeByIndex;
  a.GetClockInfo = FakeClock;
  a.GetMaxClockInfo = FakeMaxClock;
  a.GetEnforcedPowerLimit = FakePowerLimit;
  a.GetPowerUsage = FakePowerUsage;
  a.GetTemperature = FakeTemperature;
  a.GetEventReasons = FakeReasons;
  a.GetDriverVersion = FakeDriverVersion;
  return a;
}

TEST(GpuClocksTest, ReadsEveryFieldOfTheGpuNamedByUuid) {
  Reset();
  auto c = ReadGpuClocks(FullApi(), g.uuid);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(g.asked_uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(c->sm_clock_mhz, 1980u);
  EXPECT_EQ(c->mem_clock_mhz, 3201u);
  EXPECT_EQ(c->sm_clock_max_mhz, 1980u);
  EXPECT_EQ(c->mem_clock_max_mhz, 3201u);
  EXPECT_EQ(c->power_limit_w, 700u);  // 699.6 W rounds to 700
  EXPECT_EQ(c->power_draw_w, 81u);
  EXPECT_EQ(c->temperature_c, 37u);
  EXPECT_TRUE(c->reasons_known);
  EXPECT_EQ(c->throttle_reasons, 0x5u);
  EXPECT_EQ(c->driver_version, "580.95.05");  // the ceilings cache keys on it
  EXPECT_EQ(g.inits, 1);
  EXPECT_EQ(g.shutdowns, 1);
}

TEST(GpuClocksTest, EmptyUuidReadsDeviceZero) {
  Reset();
  auto c = ReadGpuClocks(FullApi(), "");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sm_clock_mhz, 1980u);
  EXPECT_EQ(g.asked_uuid, "");
}

TEST(GpuClocksTest, UnknownUuidNamesTheCallAndNvmlsError) {
  Reset();
  auto c = ReadGpuClocks(FullApi(), "GPU-ffffffff-0000-0000-0000-000000000000");
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("GetHandleByUuid")));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("Not Found (13)")));
  EXPECT_EQ(g.shutdowns, 1);  // initialised, so shut down again
}

TEST(GpuClocksTest, InitFailureIsReportedAndNothingIsShutDown) {
  Reset();
  g.init_rc = 9;
  auto c = ReadGpuClocks(FullApi(), g.uuid);
  EXPECT_THAT(
      c, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("NVML Init() failed: Driver Not Loaded (9)")));
  EXPECT_EQ(g.shutdowns, 0);
}

TEST(GpuClocksTest, OptionalCallsMissingOrNotSupportedLeaveZeros) {
  Reset();
  g.power_rc = nvml::kErrorNotSupported;  // a vGPU without power data
  nvml::Api a = FullApi();
  a.GetMaxClockInfo = nullptr;
  a.GetPowerUsage = nullptr;
  a.GetTemperature = nullptr;
  a.GetEventReasons = nullptr;
  auto c = ReadGpuClocks(a, g.uuid);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sm_clock_mhz, 1980u);
  EXPECT_EQ(c->sm_clock_max_mhz, 0u);
  EXPECT_EQ(c->power_limit_w, 0u);
  EXPECT_EQ(c->power_draw_w, 0u);
  EXPECT_FALSE(c->reasons_known);
}

TEST(GpuClocksTest, MissingRequiredEntryPointIsUnavailable) {
  Reset();
  nvml::Api a = FullApi();
  a.GetClockInfo = nullptr;
  EXPECT_THAT(ReadGpuClocks(a, g.uuid),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("nvmlDeviceGetClockInfo")));
  EXPECT_EQ(g.inits, 0);
}

TEST(GpuClocksTest, ReasonNamesInBitOrderWithUnknownBitsInHex) {
  EXPECT_EQ(ThrottleReasonNames(0), "none");
  EXPECT_EQ(ThrottleReasonNames(0x1), "gpu_idle");
  EXPECT_EQ(ThrottleReasonNames(0x4 | 0x40), "sw_power_cap,hw_thermal_slowdown");
  EXPECT_EQ(ThrottleReasonNames(0x1ff),
            "gpu_idle,applications_clocks,sw_power_cap,hw_slowdown,sync_boost,sw_thermal_slowdown,"
            "hw_thermal_slowdown,hw_power_brake_slowdown,display_clock");
  EXPECT_EQ(ThrottleReasonNames(0x8 | 0x1000), "hw_slowdown,0x1000");
  EXPECT_EQ(ThrottleReasonNames(0x3000), "0x3000");
}

TEST(GpuClocksTest, ReadingFillsTheEnvironment) {
  Reset();
  v1::Environment env;
  FillGpuClockEnvironment(ReadGpuClocks(FullApi(), g.uuid), "run start", &env);
  EXPECT_EQ(env.sm_clock_mhz(), 1980u);
  EXPECT_EQ(env.mem_clock_mhz(), 3201u);
  EXPECT_EQ(env.power_limit_w(), 700u);
  EXPECT_EQ(env.throttle_reasons(), "gpu_idle,sw_power_cap");
  EXPECT_EQ(env.extra().at("sm_clock_max_mhz"), "1980");
  EXPECT_EQ(env.extra().at("mem_clock_max_mhz"), "3201");
  EXPECT_EQ(env.extra().at("power_draw_w"), "81");
  EXPECT_EQ(env.extra().at("gpu_temperature_c"), "37");
  EXPECT_EQ(env.extra().at("gpu_clocks_at"), "run start");
  EXPECT_EQ(env.driver_version(), "580.95.05");
  EXPECT_EQ(env.extra().count("gpu_clocks_unavailable"), 0u);
}

TEST(GpuClocksTest, UnknownReasonsStayEmptyRatherThanNone) {
  Reset();
  nvml::Api a = FullApi();
  a.GetEventReasons = nullptr;
  v1::Environment env;
  FillGpuClockEnvironment(ReadGpuClocks(a, g.uuid), "run start", &env);
  EXPECT_EQ(env.throttle_reasons(), "");
  EXPECT_EQ(env.sm_clock_mhz(), 1980u);
}

TEST(GpuClocksTest, ErrorLeavesFieldsEmptyAndSaysWhy) {
  v1::Environment env;
  FillGpuClockEnvironment(absl::UnavailableError("NVML Init() failed: Driver Not Loaded (9)"), "run start",
                          &env);
  EXPECT_EQ(env.sm_clock_mhz(), 0u);
  EXPECT_EQ(env.mem_clock_mhz(), 0u);
  EXPECT_EQ(env.power_limit_w(), 0u);
  EXPECT_EQ(env.throttle_reasons(), "");
  EXPECT_EQ(env.extra().at("gpu_clocks_unavailable"), "NVML Init() failed: Driver Not Loaded (9)");
  EXPECT_EQ(env.extra().count("gpu_clocks_at"), 0u);
}

TEST(GpuClocksTest, AbsentLibraryIsNotFoundWithTheLibraryName) {
  auto c = SampleGpuClocks("", "libnvidia-ml-medprof-absent.so.1");
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kNotFound,
                          HasSubstr("no NVIDIA driver: cannot load libnvidia-ml-medprof-absent.so.1")));
}

TEST(GpuClocksTest, SamplingLoadsThroughTheSharedNvmlTable) {
  // The fake NVML of the Slurm tests has the inventory's entry points but no clocks; the
  // shared loader (agent/nvml) names what the clock reader lacks.
  EXPECT_THAT(SampleGpuClocks("", MEDPROF_FAKE_NVML),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("lacks the clock entry points (driver too old?): nvmlDeviceGetClockInfo")));
}

TEST(GpuClocksTest, LibraryWithoutNvmlSymbolsIsRejected) {
  // libz is present wherever this builds (protobuf needs it) and has no NVML entry points.
  absl::StatusOr<GpuClocks> c = SampleGpuClocks("", "libz.so.1");
  EXPECT_THAT(c,
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("libz.so.1 lacks the clock entry points")));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("nvmlInit_v2")));
}

}  // namespace
}  // namespace medprof::worker
