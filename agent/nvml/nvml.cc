#include "agent/nvml/nvml.h"

#include <dlfcn.h>

#include <memory>
#include <type_traits>
#include <vector>

#include "absl/strings/str_join.h"

namespace medprof::nvml {
namespace {

constexpr unsigned kOptional = 0;
constexpr unsigned kBoth = kInventory | kClocks;

// The one table: each entry point's member, symbol and the uses that require it. Where two
// symbols fill one member, the first one found wins. `visit(member, symbol, required_by)`.
template <typename ApiT, typename Visit>
void ForEachEntryPoint(ApiT& a, Visit&& visit) {
  visit(a.Init, "nvmlInit_v2", kBoth);
  visit(a.Shutdown, "nvmlShutdown", kBoth);
  visit(a.ErrorString, "nvmlErrorString", kBoth);
  visit(a.GetDriverVersion, "nvmlSystemGetDriverVersion", kInventory);
  visit(a.GetCudaDriverVersion, "nvmlSystemGetCudaDriverVersion_v2", kInventory);
  visit(a.GetCount, "nvmlDeviceGetCount_v2", kInventory);
  visit(a.GetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2", kInventory);
  visit(a.GetHandleByUuid, "nvmlDeviceGetHandleByUUID", kOptional);
  visit(a.GetName, "nvmlDeviceGetName", kInventory);
  visit(a.GetUuid, "nvmlDeviceGetUUID", kInventory);
  visit(a.GetComputeCapability, "nvmlDeviceGetCudaComputeCapability", kInventory);
  visit(a.GetMemoryInfo, "nvmlDeviceGetMemoryInfo", kInventory);
  visit(a.GetMigMode, "nvmlDeviceGetMigMode", kOptional);
  visit(a.GetEccMode, "nvmlDeviceGetEccMode", kOptional);
  visit(a.GetAttributes, "nvmlDeviceGetAttributes_v2", kOptional);
  visit(a.GetClockInfo, "nvmlDeviceGetClockInfo", kClocks);
  visit(a.GetMaxClockInfo, "nvmlDeviceGetMaxClockInfo", kOptional);
  visit(a.GetEnforcedPowerLimit, "nvmlDeviceGetEnforcedPowerLimit", kOptional);
  visit(a.GetPowerUsage, "nvmlDeviceGetPowerUsage", kOptional);
  visit(a.GetTemperature, "nvmlDeviceGetTemperature", kOptional);
  visit(a.GetEventReasons, "nvmlDeviceGetCurrentClocksEventReasons", kOptional);
  visit(a.GetEventReasons, "nvmlDeviceGetCurrentClocksThrottleReasons", kOptional);
}

const char* UseName(Use use) { return use == kClocks ? "clock" : "inventory"; }

}  // namespace

absl::Status RequireEntryPoints(const Api& api, Use use, const std::string& library) {
  std::vector<const char*> missing;
  ForEachEntryPoint(api, [&](const auto& member, const char* symbol, unsigned required_by) {
    if (member == nullptr && (required_by & use) != 0) missing.push_back(symbol);
  });
  if (missing.empty()) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(library, " lacks the ", UseName(use),
                   " entry points (driver too old?): ", absl::StrJoin(missing, ", ")));
}

absl::StatusOr<std::unique_ptr<Library>> Library::Load(Use use, const std::string& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    return absl::NotFoundError(
        absl::StrCat("no NVIDIA driver: cannot load ", path, " (", err ? err : "unknown dlopen error", ")"));
  }
  std::unique_ptr<Library> lib(new Library(handle));  // owns the handle from here on, on every path
  ForEachEntryPoint(lib->api_, [handle](auto& member, const char* symbol, unsigned) {
    using Fn = std::remove_reference_t<decltype(member)>;
    if (member == nullptr) member = reinterpret_cast<Fn>(::dlsym(handle, symbol));
  });
  if (absl::Status s = RequireEntryPoints(lib->api_, use, path); !s.ok()) return s;
  return lib;
}

Library::~Library() { ::dlclose(handle_); }

absl::StatusOr<std::unique_ptr<Session>> Session::Start(const Api& api) {
  MEDPROF_NVML_CALL(api, Init());
  return std::unique_ptr<Session>(new Session(api));
}

Session::~Session() { api_.Shutdown(); }

}  // namespace medprof::nvml
