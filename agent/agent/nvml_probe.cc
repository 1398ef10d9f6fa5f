#include "agent/agent/nvml_probe.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/agent/nvml_call.h"

namespace medprof::agent {
namespace {

// The NVML types and the checked-call macro are shared with the worker (nvml_call.h); the
// buffer sizes and structs below are the probe's own. Values from nvml.h.
using nvmlReturn_t = nvml::Return;
using nvmlDevice_t = nvml::Device;
constexpr nvmlReturn_t kNvmlSuccess = nvml::kSuccess;
constexpr unsigned kNameBuffer = 96;    // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidBuffer = 96;    // >= NVML_DEVICE_UUID_V2_BUFFER_SIZE (96)
constexpr unsigned kDriverBuffer = 96;  // >= NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE (80)
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
// nvmlDeviceAttributes_t starts with multiprocessorCount; the rest is padding room.
struct NvmlAttributesPrefix {
  unsigned int multiprocessor_count;
  unsigned char rest[252];
};

struct NvmlApi {
  nvmlReturn_t (*Init)();
  nvmlReturn_t (*Shutdown)();
  const char* (*ErrorString)(nvmlReturn_t);
  nvmlReturn_t (*GetCount)(unsigned*);
  nvmlReturn_t (*GetHandleByIndex)(unsigned, nvmlDevice_t*);
  nvmlReturn_t (*GetName)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*GetUuid)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*GetComputeCapability)(nvmlDevice_t, int*, int*);
  nvmlReturn_t (*GetMemoryInfo)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*GetDriverVersion)(char*, unsigned);
  nvmlReturn_t (*GetCudaDriverVersion)(int*);
  nvmlReturn_t (*GetMigMode)(nvmlDevice_t, unsigned*, unsigned*);      // optional
  nvmlReturn_t (*GetEccMode)(nvmlDevice_t, int*, int*);                // optional
  nvmlReturn_t (*GetAttributes)(nvmlDevice_t, NvmlAttributesPrefix*);  // optional
};

#define NVML_CALL(api, call) MEDPROF_NVML_CALL(api, call)

class NvmlProbe final : public GpuProbe {
 public:
  explicit NvmlProbe(std::string library) : library_(std::move(library)) {}

  absl::StatusOr<std::vector<v1::Device>> Probe() override {
    std::lock_guard<std::mutex> lock(mu_);
    void* handle = ::dlopen(library_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* err = ::dlerror();
      return absl::NotFoundError(absl::StrCat("no NVIDIA driver: cannot load ", library_, " (",
                                              err ? err : "unknown dlopen error", ")"));
    }
    NvmlApi api{};
    absl::Status loaded = Resolve(handle, &api);
    absl::StatusOr<std::vector<v1::Device>> out = loaded.ok() ? Read(api) : loaded;
    ::dlclose(handle);
    return out;
  }

 private:
  template <typename Fn>
  static absl::Status Sym(void* handle, const char* name, Fn* out, bool required) {
    *out = reinterpret_cast<Fn>(::dlsym(handle, name));
    if (*out == nullptr && required) {
      return absl::UnavailableError(absl::StrCat("NVML library lacks ", name, " (driver too old?)"));
    }
    return absl::OkStatus();
  }

  static absl::Status Resolve(void* h, NvmlApi* a) {
    for (absl::Status s :
         {Sym(h, "nvmlInit_v2", &a->Init, true), Sym(h, "nvmlShutdown", &a->Shutdown, true),
          Sym(h, "nvmlErrorString", &a->ErrorString, true),
          Sym(h, "nvmlDeviceGetCount_v2", &a->GetCount, true),
          Sym(h, "nvmlDeviceGetHandleByIndex_v2", &a->GetHandleByIndex, true),
          Sym(h, "nvmlDeviceGetName", &a->GetName, true), Sym(h, "nvmlDeviceGetUUID", &a->GetUuid, true),
          Sym(h, "nvmlDeviceGetCudaComputeCapability", &a->GetComputeCapability, true),
          Sym(h, "nvmlDeviceGetMemoryInfo", &a->GetMemoryInfo, true),
          Sym(h, "nvmlSystemGetDriverVersion", &a->GetDriverVersion, true),
          Sym(h, "nvmlSystemGetCudaDriverVersion_v2", &a->GetCudaDriverVersion, true),
          Sym(h, "nvmlDeviceGetMigMode", &a->GetMigMode, false),
          Sym(h, "nvmlDeviceGetEccMode", &a->GetEccMode, false),
          Sym(h, "nvmlDeviceGetAttributes_v2", &a->GetAttributes, false)}) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  static absl::StatusOr<std::vector<v1::Device>> Read(const NvmlApi& api) {
    NVML_CALL(api, Init());
    absl::StatusOr<std::vector<v1::Device>> out = ReadDevices(api);
    api.Shutdown();
    return out;
  }

  static absl::StatusOr<std::vector<v1::Device>> ReadDevices(const NvmlApi& api) {
    char driver[kDriverBuffer] = {};
    NVML_CALL(api, GetDriverVersion(driver, sizeof driver));
    int cuda_version = 0;
    NVML_CALL(api, GetCudaDriverVersion(&cuda_version));
    unsigned count = 0;
    NVML_CALL(api, GetCount(&count));
    std::vector<v1::Device> devices;
    for (unsigned i = 0; i < count; ++i) {
      nvmlDevice_t dev = nullptr;
      NVML_CALL(api, GetHandleByIndex(i, &dev));
      v1::Device d;
      d.set_index(static_cast<int>(i));
      d.set_kind("cuda");
      char name[kNameBuffer] = {};
      NVML_CALL(api, GetName(dev, name, sizeof name));
      d.set_name(name);
      char uuid[kUuidBuffer] = {};
      NVML_CALL(api, GetUuid(dev, uuid, sizeof uuid));
      d.set_uuid(uuid);
      int major = 0, minor = 0;
      NVML_CALL(api, GetComputeCapability(dev, &major, &minor));
      d.set_compute_capability(absl::StrCat(major, ".", minor));
      nvmlMemory_t mem{};
      NVML_CALL(api, GetMemoryInfo(dev, &mem));
      d.set_memory_bytes(mem.total);
      d.set_driver_version(driver);
      d.set_cuda_driver_version(absl::StrCat(cuda_version / 1000, ".", (cuda_version % 1000) / 10));
      if (api.GetMigMode != nullptr) {
        unsigned current = 0, pending = 0;
        if (api.GetMigMode(dev, &current, &pending) == kNvmlSuccess) d.set_mig_enabled(current == 1);
      }
      if (api.GetEccMode != nullptr) {
        int current = 0, pending = 0;
        if (api.GetEccMode(dev, &current, &pending) == kNvmlSuccess) d.set_ecc_enabled(current == 1);
      }
      if (api.GetAttributes != nullptr) {
        // Supported for MIG device handles; full GPUs usually answer NOT_SUPPORTED (sm_count 0).
        NvmlAttributesPrefix attr{};
        if (api.GetAttributes(dev, &attr) == kNvmlSuccess)
          d.set_sm_count(static_cast<int>(attr.multiprocessor_count));
      }
      devices.push_back(std::move(d));
    }
    return devices;
  }

  std::string library_;
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<GpuProbe> MakeNvmlProbe(std::string library) {
  return std::make_unique<NvmlProbe>(std::move(library));
}

}  // namespace medprof::agent
