#include "agent/profiler/gpu_probe.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"

#if MEDPROF_HAVE_CUDA
#include <cupti.h>
#include <dlfcn.h>

#include "agent/profiler/cuda_call.h"
#include "agent/profiler/cupti_call.h"
#endif

namespace medprof::profiler {
namespace {

const Logger kLog("profiler");

#if MEDPROF_HAVE_CUDA
// The file that defines `symbol` in this process. dlsym (not &function) so that a PLT stub in
// the executable cannot stand in for the library's definition.
std::string LibraryOf(const char* symbol_name) {
  void* symbol = dlsym(RTLD_DEFAULT, symbol_name);
  Dl_info info{};
  if (symbol != nullptr && dladdr(symbol, &info) != 0 && info.dli_fname != nullptr) {
    return info.dli_fname;
  }
  return "";
}

std::string FormatUuid(const cudaUUID_t& uuid) {
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  return absl::StrFormat(
      "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
      b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}
#endif

}  // namespace

std::string CudaVersionString(int encoded) {
  if (encoded <= 0) return "";
  return absl::StrCat(encoded / 1000, ".", (encoded % 1000) / 10);
}

GpuProbe ProbeGpu() {
  GpuProbe probe;
#if MEDPROF_HAVE_CUDA
  int count = 0;
  absl::Status s = MEDPROF_CUDA_CALL(cudaGetDeviceCount(&count));
  if (!s.ok()) {
    probe.reason = absl::StrCat("no GPU: ", s.message());
    return probe;
  }
  probe.device_count = count;
  if (count <= 0) {
    probe.reason = "no GPU: cudaGetDeviceCount found 0 CUDA devices";
    return probe;
  }
  cudaDeviceProp prop{};
  s = MEDPROF_CUDA_CALL(cudaGetDeviceProperties(&prop, 0));
  if (!s.ok()) {
    probe.reason = absl::StrCat("no GPU: ", s.message());
    return probe;
  }
  GpuInfo& g = probe.gpu;
  g.index = 0;
  g.name = prop.name;
  g.uuid = FormatUuid(prop.uuid);
  g.compute_capability = absl::StrCat(prop.major, ".", prop.minor);
  g.memory_bytes = prop.totalGlobalMem;
  g.sm_count = prop.multiProcessorCount;
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess) g.cuda_driver_version = CudaVersionString(driver);
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) g.runtime_version = CudaVersionString(runtime);
  DeviceLimits& l = g.limits;
  l.cc_major = prop.major;
  l.cc_minor = prop.minor;
  l.warp_size = prop.warpSize;
  l.max_threads_per_block = prop.maxThreadsPerBlock;
  l.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  l.max_blocks_per_sm = prop.maxBlocksPerMultiProcessor;
  l.regs_per_block = prop.regsPerBlock;
  l.regs_per_sm = prop.regsPerMultiprocessor;
  l.smem_per_sm = static_cast<int64_t>(prop.sharedMemPerMultiprocessor);
  l.smem_per_block_optin = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  l.reserved_smem_per_block = static_cast<int64_t>(prop.reservedSharedMemPerBlock);
  probe.available = true;
#else
  probe.reason = "no GPU: this worker was built without CUDA (MEDPROF_HAVE_CUDA off)";
#endif
  return probe;
}

CudaLibraries DescribeCudaLibraries() {
  CudaLibraries libs;
#if MEDPROF_HAVE_CUDA
  libs.cuda_compiled = true;
  libs.cupti_library = LibraryOf("cuptiGetVersion");
  libs.cudart_library = LibraryOf("cudaRuntimeGetVersion");
  uint32_t version = 0;
  if (absl::Status s = MEDPROF_CUPTI_CALL(cuptiGetVersion(&version)); s.ok()) {
    libs.cupti_version = absl::StrCat(version);
  } else {
    kLog.Warn("{}", s.ToString());
  }
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) libs.runtime_version = CudaVersionString(runtime);
#endif
  return libs;
}

}  // namespace medprof::profiler
