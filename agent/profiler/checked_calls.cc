// Implementations of MEDPROF_CUDA_CALL and MEDPROF_CUPTI_CALL (cuda_call.h, cupti_call.h).
#include "absl/strings/str_cat.h"
#include "agent/profiler/cuda_call.h"
#include "agent/profiler/cupti_call.h"

namespace medprof::profiler::internal {

absl::Status CudaStatus(cudaError_t result, const char* call_text) {
  if (result == cudaSuccess) return absl::OkStatus();
  const char* name = cudaGetErrorName(result);
  const char* text = cudaGetErrorString(result);
  std::string message = absl::StrCat(call_text, " failed: ", name ? name : "cudaError", " (",
                                     static_cast<int>(result), "): ", text ? text : "");
  switch (result) {
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInvalidDevice:
      return absl::UnavailableError(message);
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status CuptiStatus(CUptiResult result, const char* call_text) {
  if (result == CUPTI_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  if (cuptiGetResultString(result, &name) != CUPTI_SUCCESS || name == nullptr) name = "CUPTI_ERROR";
  std::string message =
      absl::StrCat(call_text, " failed: ", name, " (", static_cast<int>(result), ")");
  switch (result) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      return absl::PermissionDeniedError(message);
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
    case CUPTI_ERROR_HARDWARE_BUSY:
      return absl::UnavailableError(message);
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
      return absl::UnimplementedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace medprof::profiler::internal
