// NVML for medprof, in one place: the declarations of the ABI-stable C API medprof calls (nvml.h
// itself is not needed to build), one table of the entry points (Api), an RAII loader
// (Library) that opens the library at run time with dlopen, an RAII Init/Shutdown pair
// (Session) and the checked-call macro. Nothing links NVML, so the agent (inventory) and the
// worker (clock sampling) start on machines without an NVIDIA driver.
//
// Users: agent/agent/nvml_probe.cc (Use::kInventory) and agent/worker/gpu_clocks.cc
// (Use::kClocks). Each entry point is required by the uses named in the table in nvml.cc and
// optional (may be null) for the others.
//
//   MEDPROF_NVML_CALL(api, GetCount(&count));
//
// calls `api.GetCount(&count)` once and, unless it returns NVML_SUCCESS, returns from the
// enclosing function an UNAVAILABLE status naming the call and NVML's own error text:
//   "NVML GetCount(&count) failed: Driver Not Loaded (9)".
//
// Threads: Api and Library are immutable after Load, so they may be read from any thread;
// NVML itself is thread-safe after Init. Session has one owner.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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
constexpr unsigned kNameBuffer = 96;      // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidBuffer = 96;      // >= NVML_DEVICE_UUID_V2_BUFFER_SIZE (96)
constexpr unsigned kDriverBuffer = 96;    // >= NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE (80)
constexpr const char* kLibrary = "libnvidia-ml.so.1";

struct Memory {  // nvmlMemory_t
  unsigned long long total, free, used;
};
// nvmlDeviceAttributes_t starts with multiprocessorCount; the rest is padding room.
struct AttributesPrefix {
  unsigned int multiprocessor_count;
  unsigned char rest[252];
};

// Who needs an entry point; a bit set.
enum Use : unsigned { kInventory = 1u << 0, kClocks = 1u << 1 };

// The NVML entry points medprof calls; null when absent. Filled by Library::Load, or by tests
// with fakes. Which are required for which Use: the table in nvml.cc.
struct Api {
  Return (*Init)() = nullptr;
  Return (*Shutdown)() = nullptr;
  const char* (*ErrorString)(Return) = nullptr;
  Return (*GetDriverVersion)(char*, unsigned) = nullptr;
  Return (*GetCudaDriverVersion)(int*) = nullptr;
  Return (*GetCount)(unsigned*) = nullptr;
  Return (*GetHandleByIndex)(unsigned, Device*) = nullptr;
  Return (*GetHandleByUuid)(const char*, Device*) = nullptr;
  Return (*GetName)(Device, char*, unsigned) = nullptr;
  Return (*GetUuid)(Device, char*, unsigned) = nullptr;
  Return (*GetComputeCapability)(Device, int*, int*) = nullptr;
  Return (*GetMemoryInfo)(Device, Memory*) = nullptr;
  Return (*GetMigMode)(Device, unsigned*, unsigned*) = nullptr;
  Return (*GetEccMode)(Device, int*, int*) = nullptr;
  Return (*GetAttributes)(Device, AttributesPrefix*) = nullptr;
  Return (*GetClockInfo)(Device, unsigned, unsigned*) = nullptr;
  Return (*GetMaxClockInfo)(Device, unsigned, unsigned*) = nullptr;
  Return (*GetEnforcedPowerLimit)(Device, unsigned*) = nullptr;  // mW
  Return (*GetPowerUsage)(Device, unsigned*) = nullptr;          // mW
  Return (*GetTemperature)(Device, unsigned, unsigned*) = nullptr;
  // nvmlDeviceGetCurrentClocksEventReasons (drivers >= 535), else the older
  // nvmlDeviceGetCurrentClocksThrottleReasons: the same bits.
  Return (*GetEventReasons)(Device, unsigned long long*) = nullptr;
};

// OK when every entry point `use` requires is present in `api`; else UNAVAILABLE
// "<library> lacks the <clock|inventory> entry points (driver too old?): <missing symbols>".
absl::Status RequireEntryPoints(const Api& api, Use use, const std::string& library = "NVML library");

// An opened NVML library with its entry points resolved. Owns the dlopen handle (closed by the
// destructor; never handed out). Neither copied nor moved, so api() stays put.
class Library {
 public:
  // dlopen(path) + dlsym of every entry point in the table. NOT_FOUND "no NVIDIA driver: cannot
  // load <path> (<dlerror>)" when the library cannot be opened; UNAVAILABLE (see
  // RequireEntryPoints) when an entry point `use` requires is missing.
  static absl::StatusOr<std::unique_ptr<Library>> Load(Use use, const std::string& path = kLibrary);

  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library();

  // Valid while this Library lives.
  const Api& api() const { return api_; }

 private:
  explicit Library(void* handle) : handle_(handle) {}
  void* const handle_;
  Api api_;
};

// NVML initialised: Start calls Init (checked), the destructor calls Shutdown. `api` must
// outlive the Session. Neither copied nor moved.
class Session {
 public:
  // Errors: UNAVAILABLE "NVML Init() failed: <NVML's text> (<code>)"; nothing to shut down then.
  static absl::StatusOr<std::unique_ptr<Session>> Start(const Api& api);

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

 private:
  explicit Session(const Api& api) : api_(api) {}
  const Api& api_;
};

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
