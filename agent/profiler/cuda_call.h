// The one checked-call macro for the CUDA runtime API.
//
//   MEDPROF_RETURN_IF_ERROR(MEDPROF_CUDA_CALL(cudaGetDeviceCount(&n)));
//
// evaluates the call once and yields an absl::Status: OK on cudaSuccess, else a status whose
// message records the call text, the error's name, number and CUDA's own description:
//   "cudaGetDeviceCount(&n) failed: cudaErrorInsufficientDriver (35): CUDA driver version is
//    insufficient for CUDA runtime version".
// Codes: no driver/device -> UNAVAILABLE, out of memory -> RESOURCE_EXHAUSTED, else INTERNAL.
// Only for translation units built with the CUDA toolkit (MEDPROF_HAVE_CUDA). Thread-safe.
#pragma once

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace medprof::profiler::internal {
absl::Status CudaStatus(cudaError_t result, const char* call_text);
}  // namespace medprof::profiler::internal

#define MEDPROF_CUDA_CALL(call) ::medprof::profiler::internal::CudaStatus((call), #call)
