// The trace layer's records in plain C++ form: what the CUPTI Activity API delivers
// (CUpti_ActivityKernel*, Memcpy*, Memset*, ExternalCorrelation, API records), reduced to the
// fields medprof uses. The CUPTI wrapper (cupti_tracer) converts activity buffers into these;
// the aggregator and the tests never see CUPTI types, so aggregation is testable on machines
// without a GPU or without the CUDA toolkit.
//
// Plain value types; thread-compatible.
#pragma once

#include <cstdint>
#include <string>

namespace medprof::profiler {

enum class RecordKind {
  kKernel,               // CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL / KERNEL
  kMemcpy,               // CUPTI_ACTIVITY_KIND_MEMCPY
  kMemset,               // CUPTI_ACTIVITY_KIND_MEMSET
  kExternalCorrelation,  // CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION
  kApi,                  // CUPTI_ACTIVITY_KIND_RUNTIME / DRIVER (launch APIs only)
};

struct TraceRecord {
  RecordKind kind = RecordKind::kKernel;
  // kKernel: kernel name as CUPTI reports it (usually mangled); kMemcpy: "[memcpy HtoD]" etc.;
  // kMemset: "[memset]"; kApi: the API name ("cudaLaunchKernel").
  std::string name;
  uint64_t start_ns = 0;  // timestamps in the tracer's clock (CLOCK_MONOTONIC when registered)
  uint64_t end_ns = 0;
  // Links device activity to the API call that issued it (and that call to an external id).
  uint32_t correlation_id = 0;
  uint32_t device_id = 0;
  uint32_t stream_id = 0;
  uint32_t thread_id = 0;  // kApi: OS thread of the call
  // kKernel launch shape.
  int32_t grid[3] = {0, 0, 0};
  int32_t block[3] = {0, 0, 0};
  int32_t registers_per_thread = 0;
  int32_t static_shared_bytes = 0;
  int32_t dynamic_shared_bytes = 0;
  uint32_t shared_carveout_bytes = 0;  // sharedMemoryExecuted: per-SM shared memory configured
  // kMemcpy / kMemset size.
  uint64_t bytes = 0;
  // kExternalCorrelation: the id pushed by the profiler (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0).
  uint64_t external_id = 0;
  // kApi: the callback id of the API and whether it is a driver (cu*) or runtime (cuda*) call.
  uint32_t api_cbid = 0;
  bool api_driver = false;
};

}  // namespace medprof::profiler
