#include "agent/profiler/cupti_callbacks.h"

#include <cuda_runtime_api.h>

#include <mutex>

#include "absl/strings/str_cat.h"
#include "agent/profiler/cuda_call.h"
#include "agent/profiler/cupti_call.h"
#include "common/status.h"

namespace medprof::profiler {
namespace {

std::mutex g_mu;  // guards the hooks and the instance
CuptiCallbacks* g_instance = nullptr;

void CUPTIAPI OnCallback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                         const void* data) {
  static_cast<CuptiCallbacks*>(userdata)->Dispatch(domain, cbid, data);
}

}  // namespace

absl::StatusOr<CuptiCallbacks*> CuptiCallbacks::Install() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_instance != nullptr) return g_instance;
  auto* cb = new CuptiCallbacks();  // process lifetime: CUPTI may call it until exit
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiSubscribe(&cb->subscriber_, &OnCallback, cb)));
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiEnableCallback(1, cb->subscriber_, CUPTI_CB_DOMAIN_RESOURCE,
                                                                 CUPTI_CBID_RESOURCE_CONTEXT_CREATED)));
  g_instance = cb;
  return cb;
}

void CuptiCallbacks::SetContextCreatedHook(ContextHook hook) {
  std::lock_guard<std::mutex> lock(g_mu);
  context_hook_ = std::move(hook);
}

absl::Status CuptiCallbacks::SetLaunchHook(LaunchHook hook) {
  const uint32_t on = hook ? 1 : 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    launch_hook_ = std::move(hook);
  }
  for (CUpti_CallbackId cbid : kKernelLaunchCbids) {
    MEDPROF_RETURN_IF_ERROR(
        MEDPROF_CUPTI_CALL(cuptiEnableCallback(on, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, cbid)));
  }
  return absl::OkStatus();
}

void CuptiCallbacks::Dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    const auto* r = static_cast<const CUpti_ResourceData*>(data);
    ContextHook hook;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      hook = context_hook_;
    }
    if (hook) hook(r->context);
    return;
  }
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto* d = static_cast<const CUpti_CallbackData*>(data);
    LaunchHook hook;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      hook = launch_hook_;
    }
    if (!hook) return;
    LaunchEvent e;
    e.enter = d->callbackSite == CUPTI_API_ENTER;
    e.symbol = d->symbolName;
    e.correlation_id = d->correlationId;
    e.context = d->context;
    if (d->functionParams != nullptr) {
      switch (cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz: {
          // The cooperative launch's parameters start like cuLaunchKernel's (f, grid, block...).
          const auto* p = static_cast<const cuLaunchKernel_params*>(d->functionParams);
          e.grid[0] = p->gridDimX;
          e.grid[1] = p->gridDimY;
          e.grid[2] = p->gridDimZ;
          e.block[0] = p->blockDimX;
          e.block[1] = p->blockDimY;
          e.block[2] = p->blockDimZ;
          e.dynamic_shared_bytes = p->sharedMemBytes;
          break;
        }
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
          const auto* p = static_cast<const cuLaunchKernelEx_params*>(d->functionParams);
          if (p->config != nullptr) {
            e.grid[0] = p->config->gridDimX;
            e.grid[1] = p->config->gridDimY;
            e.grid[2] = p->config->gridDimZ;
            e.block[0] = p->config->blockDimX;
            e.block[1] = p->config->blockDimY;
            e.block[2] = p->config->blockDimZ;
            e.dynamic_shared_bytes = p->config->sharedMemBytes;
          }
          break;
        }
        default:
          break;
      }
    }
    hook(e);
  }
}

absl::StatusOr<CUcontext> CurrentContext() {
  using GetCurrent = CUresult (*)(CUcontext*);
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUDA_CALL(
      cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &found)));
  if (fn == nullptr || found != cudaDriverEntryPointSuccess) {
    return absl::UnavailableError("cuCtxGetCurrent: not found through cudaGetDriverEntryPointByVersion");
  }
  CUcontext ctx = nullptr;
  const CUresult r = reinterpret_cast<GetCurrent>(fn)(&ctx);
  if (r != CUDA_SUCCESS)
    return absl::InternalError(absl::StrCat("cuCtxGetCurrent failed: CUresult ", static_cast<int>(r)));
  if (ctx == nullptr) return absl::FailedPreconditionError("no CUDA context is current on this thread");
  return ctx;
}

}  // namespace medprof::profiler
