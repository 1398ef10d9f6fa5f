// The one checked-call macro for CUPTI.
//
//   MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiActivityEnable(kind)));
//
// evaluates the call once and yields an absl::Status: OK on CUPTI_SUCCESS, else a status whose
// message records the call text and cuptiGetResultString's name and number:
//   "cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) failed: CUPTI_ERROR_UNKNOWN (999)".
// Codes: INSUFFICIENT_PRIVILEGES -> PERMISSION_DENIED; MULTIPLE_SUBSCRIBERS / HARDWARE_BUSY ->
// UNAVAILABLE; NOT_SUPPORTED and friends -> UNIMPLEMENTED; else INTERNAL.
// Only for translation units built with CUPTI (MEDPROF_HAVE_CUDA). Thread-safe.
#pragma once

#include <cupti.h>

#include "absl/status/status.h"

namespace medprof::profiler::internal {
absl::Status CuptiStatus(CUptiResult result, const char* call_text);
}  // namespace medprof::profiler::internal

#define MEDPROF_CUPTI_CALL(call) ::medprof::profiler::internal::CuptiStatus((call), #call)
