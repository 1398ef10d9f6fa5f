// libnvidia-ml.so.1 for the Slurm tests: the few NVML entry points medprof-agent's GPU probe
// (agent/agent/nvml_probe.cc) calls, answering for the node's fake GPUs — the character
// devices tests/slurm/cluster.sh gives Slurm's gres.conf. The test puts this library's
// directory on LD_LIBRARY_PATH of the batch job, so the real agent runs its real inventory code
// (NVML's device list, then the CUDA_VISIBLE_DEVICES Slurm set for the allocation) on a
// machine without a GPU. Like the real NVML it lists every GPU of the node, whatever the job
// was given.
//
// $MEDPROF_FAKE_NVML_GPUS (1..16) is the node's GPU count; unset or out of range, nvmlInit
// fails with NVML_ERROR_DRIVER_NOT_LOADED as on a machine without a driver. Thread-safe (reads
// only constants and the environment).
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kSuccess = 0;             // NVML_SUCCESS
constexpr int kInvalidArgument = 2;     // NVML_ERROR_INVALID_ARGUMENT
constexpr int kDriverNotLoaded = 9;     // NVML_ERROR_DRIVER_NOT_LOADED
constexpr int kInsufficientSize = 7;    // NVML_ERROR_INSUFFICIENT_SIZE
constexpr unsigned kMaxGpus = 16;

struct FakeDevice {
  unsigned index;
};
FakeDevice g_devices[kMaxGpus] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7},
                                  {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}};

// The configured GPU count, 0 when unset or invalid.
unsigned GpuCount() {
  const char* text = std::getenv("MEDPROF_FAKE_NVML_GPUS");
  if (text == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || n < 1 || n > static_cast<long>(kMaxGpus)) return 0;
  return static_cast<unsigned>(n);
}

int CopyOut(const char* text, char* out, unsigned size) {
  if (out == nullptr) return kInvalidArgument;
  if (std::strlen(text) + 1 > size) return kInsufficientSize;
  std::strcpy(out, text);
  return kSuccess;
}

const FakeDevice* AsDevice(void* handle) {
  for (const FakeDevice& d : g_devices) {
    if (handle == &d) return &d;
  }
  return nullptr;
}

}  // namespace

extern "C" {

struct nvmlMemory_st {
  unsigned long long total, free, used;
};

int nvmlInit_v2() { return GpuCount() == 0 ? kDriverNotLoaded : kSuccess; }
int nvmlShutdown() { return kSuccess; }
const char* nvmlErrorString(int rc) {
  switch (rc) {
    case kSuccess: return "Success";
    case kInvalidArgument: return "Invalid Argument";
    case kInsufficientSize: return "Insufficient Size";
    case kDriverNotLoaded: return "Driver Not Loaded (fake NVML: set MEDPROF_FAKE_NVML_GPUS=1..16)";
    default: return "Unknown Error";
  }
}
int nvmlSystemGetDriverVersion(char* out, unsigned size) { return CopyOut("999.99-fake", out, size); }
int nvmlSystemGetCudaDriverVersion_v2(int* version) {
  if (version == nullptr) return kInvalidArgument;
  *version = 13000;
  return kSuccess;
}
int nvmlDeviceGetCount_v2(unsigned* count) {
  if (count == nullptr) return kInvalidArgument;
  *count = GpuCount();
  return *count == 0 ? kDriverNotLoaded : kSuccess;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (device == nullptr || index >= GpuCount()) return kInvalidArgument;
  *device = &g_devices[index];
  return kSuccess;
}
int nvmlDeviceGetName(void* device, char* out, unsigned size) {
  return AsDevice(device) == nullptr ? kInvalidArgument : CopyOut("medprof fake GPU", out, size);
}
int nvmlDeviceGetUUID(void* device, char* out, unsigned size) {
  const FakeDevice* d = AsDevice(device);
  if (d == nullptr) return kInvalidArgument;
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-fake0000-0000-0000-0000-%012u", d->index);
  return CopyOut(uuid, out, size);
}
int nvmlDeviceGetCudaComputeCapability(void* device, int* major, int* minor) {
  if (AsDevice(device) == nullptr || major == nullptr || minor == nullptr) return kInvalidArgument;
  *major = 9;
  *minor = 0;
  return kSuccess;
}
int nvmlDeviceGetMemoryInfo(void* device, nvmlMemory_st* memory) {
  if (AsDevice(device) == nullptr || memory == nullptr) return kInvalidArgument;
  memory->total = 1ull << 30;
  memory->free = memory->total;
  memory->used = 0;
  return kSuccess;
}

}  // extern "C"
