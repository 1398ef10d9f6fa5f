#include "agent/agent/nvml_probe.h"

#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "agent/nvml/nvml.h"

namespace medprof::agent {
namespace {

class NvmlProbe final : public GpuProbe {
 public:
  explicit NvmlProbe(std::string library) : library_(std::move(library)) {}

  absl::StatusOr<std::vector<v1::Device>> Probe() override {
    std::lock_guard<std::mutex> lock(mu_);
    absl::StatusOr<std::unique_ptr<nvml::Library>> lib = nvml::Library::Load(nvml::kInventory, library_);
    if (!lib.ok()) return lib.status();
    absl::StatusOr<std::unique_ptr<nvml::Session>> session = nvml::Session::Start((*lib)->api());
    if (!session.ok()) return session.status();
    return ReadDevices((*lib)->api());
  }

 private:
  static absl::StatusOr<std::vector<v1::Device>> ReadDevices(const nvml::Api& api) {
    char driver[nvml::kDriverBuffer] = {};
    MEDPROF_NVML_CALL(api, GetDriverVersion(driver, sizeof driver));
    int cuda_version = 0;
    MEDPROF_NVML_CALL(api, GetCudaDriverVersion(&cuda_version));
    unsigned count = 0;
    MEDPROF_NVML_CALL(api, GetCount(&count));
    std::vector<v1::Device> devices;
    for (unsigned i = 0; i < count; ++i) {
      nvml::Device dev = nullptr;
      MEDPROF_NVML_CALL(api, GetHandleByIndex(i, &dev));
      v1::Device d;
      d.set_index(static_cast<int>(i));
      d.set_kind("cuda");
      d.set_driver_version(driver);
      d.set_cuda_driver_version(absl::StrCat(cuda_version / 1000, ".", (cuda_version % 1000) / 10));
      if (absl::Status s = ReadDevice(api, dev, &d); !s.ok()) return s;
      devices.push_back(std::move(d));
    }
    return devices;
  }

  // One device's name, UUID, compute capability and memory (required), then MIG, ECC and SM
  // count where the driver answers.
  static absl::Status ReadDevice(const nvml::Api& api, nvml::Device dev, v1::Device* d) {
    char name[nvml::kNameBuffer] = {};
    MEDPROF_NVML_CALL(api, GetName(dev, name, sizeof name));
    d->set_name(name);
    char uuid[nvml::kUuidBuffer] = {};
    MEDPROF_NVML_CALL(api, GetUuid(dev, uuid, sizeof uuid));
    d->set_uuid(uuid);
    int major = 0, minor = 0;
    MEDPROF_NVML_CALL(api, GetComputeCapability(dev, &major, &minor));
    d->set_compute_capability(absl::StrCat(major, ".", minor));
    nvml::Memory mem{};
    MEDPROF_NVML_CALL(api, GetMemoryInfo(dev, &mem));
    d->set_memory_bytes(mem.total);
    if (api.GetMigMode != nullptr) {
      unsigned current = 0, pending = 0;
      if (api.GetMigMode(dev, &current, &pending) == nvml::kSuccess) d->set_mig_enabled(current == 1);
    }
    if (api.GetEccMode != nullptr) {
      int current = 0, pending = 0;
      if (api.GetEccMode(dev, &current, &pending) == nvml::kSuccess) d->set_ecc_enabled(current == 1);
    }
    if (api.GetAttributes != nullptr) {
      // Supported for MIG device handles; full GPUs usually answer NOT_SUPPORTED (sm_count 0).
      nvml::AttributesPrefix attr{};
      if (api.GetAttributes(dev, &attr) == nvml::kSuccess)
        d->set_sm_count(static_cast<int>(attr.multiprocessor_count));
    }
    return absl::OkStatus();
  }

  std::string library_;
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<GpuProbe> MakeNvmlProbe(std::string library) {
  return std::make_unique<NvmlProbe>(std::move(library));
}

}  // namespace medprof::agent
