// CuptiCallbacks: the process's one CUPTI callback subscriber (CUPTI allows a single one).
//
// It serves two users: PC sampling, which must be enabled when the CUDA context is created
// (before any module loads — spec/cupti.md §4.1), and the metrics layer, which arms the range
// profiler around chosen kernel launches (driver-API launch callbacks, API enter/exit). Install()
// subscribes and turns on CUPTI_CBID_RESOURCE_CONTEXT_CREATED; launch callbacks are switched on
// only while a hook is set (they cost a little on every launch).
//
// Also CurrentContext(): the calling thread's CUcontext through the runtime's driver entry
// point, so nothing links libcuda (the worker must start where no driver is installed).
//
// Thread safety: hooks may be set from any thread; callbacks run on the thread of the CUDA call.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace medprof::profiler {

// The driver APIs that launch a kernel (cuDNN and cuBLAS launch through the driver API too): the
// callbacks the metrics layer hooks and the driver records the tracer keeps.
inline constexpr CUpti_CallbackId kKernelLaunchCbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
};

struct LaunchEvent {
  bool enter = false;            // API enter (before the launch) or exit (after)
  const char* symbol = nullptr;  // mangled kernel name (CUPTI's symbolName)
  uint32_t correlation_id = 0;
  CUcontext context = nullptr;
  unsigned grid[3] = {0, 0, 0};  // launch grid (cuLaunchKernel*/cuLaunchKernelEx* parameters)
  unsigned block[3] = {0, 0, 0};
  unsigned dynamic_shared_bytes = 0;  // sharedMemBytes of the launch
};

class CuptiCallbacks {
 public:
  using ContextHook = std::function<void(CUcontext)>;
  using LaunchHook = std::function<void(const LaunchEvent&)>;

  // Subscribes once per process; later calls return the same instance.
  static absl::StatusOr<CuptiCallbacks*> Install();

  void SetContextCreatedHook(ContextHook hook);
  // Sets (or with nullptr clears) the launch hook and turns the driver launch callbacks on/off.
  absl::Status SetLaunchHook(LaunchHook hook);

  // Dispatch (public for the C callback only).
  void Dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);

 private:
  CuptiCallbacks() = default;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  ContextHook context_hook_;
  LaunchHook launch_hook_;
};

// The current thread's CUDA context (cuCtxGetCurrent via cudaGetDriverEntryPointByVersion);
// FAILED_PRECONDITION when there is none.
absl::StatusOr<CUcontext> CurrentContext();

}  // namespace medprof::profiler
