// GPU discovery for the worker: is there a CUDA device this process can use, and what is it.
//
// ProbeGpu() asks the CUDA runtime (cudaGetDeviceCount, cudaGetDeviceProperties,
// cudaDriverGetVersion). It never fails and never crashes: on a machine without an NVIDIA
// driver cudaGetDeviceCount returns cudaErrorInsufficientDriver (35), and the probe reports
// "no GPU" with that cause. In a build without CUDA (MEDPROF_HAVE_CUDA off) it reports so.
//
// DescribeCudaLibraries() names the libcupti / libcudart this process actually loaded
// (dladdr on one of their symbols) and their versions, for Environment.cupti_library.
//
// Thread-safe (the CUDA runtime calls are).
#pragma once

#include <cstdint>
#include <string>

#include "agent/profiler/occupancy.h"

namespace medprof::profiler {

struct GpuInfo {
  int index = 0;                   // CUDA ordinal used (0)
  std::string name;                // "NVIDIA H200"
  std::string uuid;                // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  std::string compute_capability;  // "9.0"
  uint64_t memory_bytes = 0;
  int sm_count = 0;
  std::string cuda_driver_version;  // CUDA version the driver supports, "13.0"
  std::string runtime_version;     // CUDA runtime linked, "13.0"
  DeviceLimits limits;             // for theoretical occupancy
};

struct GpuProbe {
  bool available = false;
  int device_count = 0;
  // Why no GPU is usable, starting with "no GPU: " — e.g. "no GPU: cudaGetDeviceCount(&count)
  // failed: cudaErrorInsufficientDriver (35): CUDA driver version is insufficient ...".
  std::string reason;
  GpuInfo gpu;  // valid when available
};

GpuProbe ProbeGpu();

struct CudaLibraries {
  bool cuda_compiled = false;     // MEDPROF_HAVE_CUDA
  std::string cupti_library;      // path of the loaded libcupti ("" when not compiled)
  std::string cupti_version;      // CUPTI API version, e.g. "130001"
  std::string cudart_library;     // path of the loaded libcudart
  std::string runtime_version;    // "13.0"
};

CudaLibraries DescribeCudaLibraries();

// "13.0" from the CUDA encoding 13000.
std::string CudaVersionString(int encoded);

}  // namespace medprof::profiler
