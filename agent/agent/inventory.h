// The devices an agent offers: its GPUs (found through NVML, loaded at run time) or, when it
// has none, one CPU device.
//
// GpuProbe is the seam: NvmlProbe (nvml_probe.h) asks the driver, tests pass a fake with any
// number of GPUs. BuildInventory applies the agent's own CUDA_VISIBLE_DEVICES (Slurm sets it
// for a partial-node allocation), numbers the offered devices 0..n-1 in that order (the CUDA
// ordinals as the agent sees them), and remembers for each the CUDA_VISIBLE_DEVICES value that
// pins a worker to it. Pure functions over their inputs; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::agent {

class GpuProbe {
 public:
  virtual ~GpuProbe() = default;
  // Every GPU the driver reports, in its (PCI bus) order, with Device.index = that position.
  // An error means "no usable GPU" and says why (no driver, library missing, ...).
  virtual absl::StatusOr<std::vector<v1::Device>> Probe() = 0;
};

struct OfferedDevice {
  v1::Device device;          // as registered; index = agent-side CUDA ordinal, -1 for the CPU
  std::string visible_token;  // CUDA_VISIBLE_DEVICES for a worker on this device ("" for the CPU)
};

struct Inventory {
  std::vector<OfferedDevice> devices;  // never empty
  std::string no_gpu_reason;           // why only the CPU is offered ("" when GPUs are)
  bool HasGpu() const { return no_gpu_reason.empty(); }
  const OfferedDevice* Find(int index) const;
};

struct InventoryInputs {
  // The agent's own $CUDA_VISIBLE_DEVICES (nullopt when unset: every GPU is offered).
  std::optional<std::string> cuda_visible_devices;
  // Where the driver states whether counters are admin-only (RmProfilingAdminOnly).
  std::string nvidia_params_path = "/proc/driver/nvidia/params";
  // For the CPU device's name ("model name") and memory (MemTotal).
  std::string cpuinfo_path = "/proc/cpuinfo";
  std::string meminfo_path = "/proc/meminfo";
};

// Builds the inventory. `probe` may be null (= no GPU support).
Inventory BuildInventory(GpuProbe* probe, const InventoryInputs& inputs);

// The CPU device: index -1, kind "cpu", name = the CPU model (or "cpu"), memory = MemTotal.
v1::Device CpuDevice(const std::string& cpuinfo_path, const std::string& meminfo_path);

// RmProfilingAdminOnly from the driver's params file. Unreadable -> true (the driver's
// default since 418.43: counters for admins only).
bool CountersAdminOnly(const std::string& nvidia_params_path);

}  // namespace medprof::agent
