// GpuProbe backed by NVML through agent/nvml (loaded at run time, so the agent starts on
// machines without an NVIDIA driver; the probe then reports why there is no GPU). The agent
// links no CUDA library. Each Probe() loads, initialises, reads and shuts NVML
// down again; calls are serialised internally, so one probe may be shared across threads.
#pragma once

#include <memory>
#include <string>

#include "agent/agent/inventory.h"
#include "agent/nvml/nvml.h"

namespace medprof::agent {

// `library` is the soname or path to dlopen.
std::unique_ptr<GpuProbe> MakeNvmlProbe(std::string library = nvml::kLibrary);

}  // namespace medprof::agent
