#include "agent/profiler/cupti_tracer.h"

#include <cupti.h>

#include <chrono>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/profiler/cupti_call.h"
#include "agent/profiler/cupti_callbacks.h"
#include "agent/profiler/cupti_records.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/logging.h"

namespace medprof::profiler {
namespace {

const Logger kLog("cupti");

// CUPTI's buffer callbacks are plain functions: the active tracer lives here.
std::atomic<CuptiTracer*> g_tracer{nullptr};

constexpr size_t kBufferAlignment = 8;  // ACTIVITY_RECORD_ALIGNMENT

uint64_t CUPTIAPI MonotonicTimestamp() { return static_cast<uint64_t>(MonotonicNs()); }

void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;  // as many as fit
  CuptiTracer* t = g_tracer.load(std::memory_order_acquire);
  if (t == nullptr) {
    *buffer = nullptr;
    *size = 0;
    return;
  }
  *buffer = t->RequestBuffer(size);
}

void CUPTIAPI OnBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size,
                                size_t valid_size) {
  (void)size;
  CuptiTracer* t = g_tracer.load(std::memory_order_acquire);
  if (t == nullptr) {
    std::free(buffer);  // a buffer CUPTI returns after the tracer went away
    return;
  }
  t->CompleteBuffer(context, stream_id, buffer, valid_size);
}

#if CUPTI_API_VERSION >= 24
// Launch, copy and set calls: the API records that carry external correlation ids.
constexpr CUpti_CallbackId kRuntimeApis[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
};
// Besides the kernel launches (kKernelLaunchCbids): graph launches, async copies and sets.
constexpr CUpti_CallbackId kDriverCopyApis[] = {
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,
    CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz,
};
#endif

}  // namespace

CuptiTracer::CuptiTracer(const CuptiTracerOptions& options, Sink sink, DroppedSink dropped)
    : options_(options), sink_(std::move(sink)), dropped_sink_(std::move(dropped)) {}

absl::StatusOr<std::unique_ptr<CuptiTracer>> CuptiTracer::Start(const CuptiTracerOptions& options,
                                                                Sink sink, DroppedSink dropped) {
  if (options.buffer_bytes < (64 << 10) || options.buffer_bytes > (256 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cupti tracer: buffer_bytes ", options.buffer_bytes, " is out of range (allowed 64 KiB..256 MiB)"));
  }
  if (options.max_buffers < 2 || options.max_buffers > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("cupti tracer: max_buffers ", options.max_buffers,
                                                   " is out of range (allowed 2..1024)"));
  }
  std::unique_ptr<CuptiTracer> tracer(new CuptiTracer(options, std::move(sink), std::move(dropped)));
  CuptiTracer* expected = nullptr;
  if (!g_tracer.compare_exchange_strong(expected, tracer.get(), std::memory_order_acq_rel)) {
    return absl::FailedPreconditionError("cupti tracer: another CuptiTracer is active in this process");
  }
  if (absl::Status s = tracer->Enable(); !s.ok()) {
    tracer->DisableAll();
    tracer->stopped_ = true;
    g_tracer.store(nullptr, std::memory_order_release);
    return s;
  }
  if (options.flush_period_ms > 0) tracer->collector_ = std::thread([t = tracer.get()] { t->Collect(); });
  return tracer;
}

absl::Status CuptiTracer::Enable() {
  if (!registered_ && options_.monotonic_clock) {
    absl::Status s = MEDPROF_CUPTI_CALL(cuptiActivityRegisterTimestampCallback(&MonotonicTimestamp));
    monotonic_clock_ = s.ok();
    clock_status_ = s;  // reported once tracing is on (without a driver everything fails)
  }
  if (!registered_) {
    MEDPROF_RETURN_IF_ERROR(
        MEDPROF_CUPTI_CALL(cuptiActivityRegisterCallbacks(&OnBufferRequested, &OnBufferCompleted)));
    registered_ = true;
  }
  const std::pair<CUpti_ActivityKind, const char*> kinds[] = {
      {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)"},
      {CUPTI_ACTIVITY_KIND_MEMCPY, "cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY)"},
      {CUPTI_ACTIVITY_KIND_MEMSET, "cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET)"},
      {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
       "cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)"},
  };
  for (const auto& [kind, text] : kinds) {
    MEDPROF_RETURN_IF_ERROR(internal::CuptiStatus(cuptiActivityEnable(kind), text));
    enabled_kinds_.push_back(kind);
  }
#if CUPTI_API_VERSION >= 24
  // Only the launch/copy/set APIs: their records carry the external correlation ids.
  for (CUpti_CallbackId cbid : kRuntimeApis) {
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiActivityEnableRuntimeApi(cbid, 1)));
  }
  for (CUpti_CallbackId cbid : kKernelLaunchCbids) {
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiActivityEnableDriverApi(cbid, 1)));
  }
  for (CUpti_CallbackId cbid : kDriverCopyApis) {
    MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiActivityEnableDriverApi(cbid, 1)));
  }
#else
  // Older CUPTI cannot select single APIs: record all runtime and driver calls.
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME)));
  enabled_kinds_.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER)));
  enabled_kinds_.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
#endif
  if (!clock_status_.ok()) {
    kLog.Warn("{}; record timestamps stay in CUPTI's clock", clock_status_.ToString());
  }
  kLog.Info("CUPTI activity tracing enabled (buffers {} MiB x up to {}, flush every {} ms, clock {})",
            options_.buffer_bytes >> 20, options_.max_buffers, options_.flush_period_ms,
            monotonic_clock_ ? "CLOCK_MONOTONIC" : "CUPTI");
  return absl::OkStatus();
}

absl::Status CuptiTracer::Pause() {
  if (paused()) return absl::OkStatus();
  MEDPROF_RETURN_IF_ERROR(MEDPROF_CUPTI_CALL(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)));
  paused_.store(true, std::memory_order_release);
  DisableAll();
  return absl::OkStatus();
}

absl::Status CuptiTracer::Flush() {
  return MEDPROF_CUPTI_CALL(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
}

absl::Status CuptiTracer::Resume() {
  if (!paused()) return absl::OkStatus();
  absl::Status s = Enable();
  paused_.store(false, std::memory_order_release);
  return s;
}

void CuptiTracer::DisableAll() {
#if CUPTI_API_VERSION >= 24
  for (CUpti_CallbackId cbid : kRuntimeApis) cuptiActivityEnableRuntimeApi(cbid, 0);
  for (CUpti_CallbackId cbid : kKernelLaunchCbids) cuptiActivityEnableDriverApi(cbid, 0);
  for (CUpti_CallbackId cbid : kDriverCopyApis) cuptiActivityEnableDriverApi(cbid, 0);
#endif
  for (int kind : enabled_kinds_) {
    if (absl::Status s = MEDPROF_CUPTI_CALL(cuptiActivityDisable(static_cast<CUpti_ActivityKind>(kind)));
        !s.ok()) {
      kLog.Warn("{}", s.ToString());
    }
  }
  enabled_kinds_.clear();
}

CuptiTracer::~CuptiTracer() {
  if (absl::Status s = Stop(); !s.ok()) kLog.Warn("stopping the CUPTI tracer: {}", s.ToString());
  std::lock_guard<std::mutex> lock(pool_mu_);
  for (uint8_t* b : free_buffers_) std::free(b);
  free_buffers_.clear();
}

absl::Status CuptiTracer::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stopped_) return absl::OkStatus();
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (collector_.joinable()) collector_.join();
  absl::Status s = MEDPROF_CUPTI_CALL(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  DisableAll();
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopped_ = true;
  }
  CuptiTracer* self = this;
  g_tracer.compare_exchange_strong(self, nullptr, std::memory_order_acq_rel);
  return s;
}

void CuptiTracer::Collect() {
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stopping_) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(options_.flush_period_ms));
    if (stopping_) break;
    lock.unlock();
    if (absl::Status s = MEDPROF_CUPTI_CALL(cuptiActivityFlushAll(0)); !s.ok()) {
      kLog.Warn("{}", s.ToString());
    }
    lock.lock();
  }
}

void CuptiTracer::PushExternalId(uint64_t id) {
  if (paused()) return;
  if (cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id) != CUPTI_SUCCESS) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.correlation_errors += 1;
  }
}

void CuptiTracer::PopExternalId() {
  if (paused()) return;
  uint64_t last = 0;
  if (cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last) != CUPTI_SUCCESS) {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.correlation_errors += 1;
  }
}

uint64_t CuptiTracer::NowNs() const {
  if (monotonic_clock_) return static_cast<uint64_t>(MonotonicNs());
  uint64_t ts = 0;
  if (cuptiGetTimestamp(&ts) != CUPTI_SUCCESS) return static_cast<uint64_t>(MonotonicNs());
  return ts;
}

CuptiTracerStats CuptiTracer::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

uint8_t* CuptiTracer::RequestBuffer(size_t* size) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (!free_buffers_.empty()) {
    uint8_t* b = free_buffers_.back();
    free_buffers_.pop_back();
    *size = options_.buffer_bytes;
    return b;
  }
  if (buffers_out_ >= options_.max_buffers) {
    std::lock_guard<std::mutex> stats_lock(stats_mu_);
    stats_.buffers_refused += 1;
    *size = 0;
    return nullptr;  // CUPTI drops records and counts them
  }
  auto* b = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, options_.buffer_bytes));
  if (b == nullptr) {
    *size = 0;
    return nullptr;
  }
  buffers_out_ += 1;
  {
    std::lock_guard<std::mutex> stats_lock(stats_mu_);
    stats_.buffers_allocated += 1;
  }
  *size = options_.buffer_bytes;
  return b;
}

const char* CuptiTracer::ApiName(bool driver, uint32_t cbid) {
  const uint64_t key = (uint64_t{driver} << 32) | cbid;
  std::lock_guard<std::mutex> lock(names_mu_);
  for (const auto& [k, name] : api_names_) {
    if (k == key) return name.c_str();
  }
  const char* name = nullptr;
  if (cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid,
                           &name) != CUPTI_SUCCESS ||
      name == nullptr) {
    name = driver ? "driver API" : "runtime API";
  }
  api_names_.emplace_back(key, name);
  return api_names_.back().second.c_str();
}

void CuptiTracer::CompleteBuffer(void* context, uint32_t stream_id, uint8_t* buffer, size_t valid_size) {
  std::vector<TraceRecord> records;
  int64_t parse_errors = 0;
  if (buffer != nullptr && valid_size > 0) {
    CUpti_Activity* record = nullptr;
    while (true) {
      const CUptiResult r = cuptiActivityGetNextRecord(buffer, valid_size, &record);
      if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of buffer
      if (r != CUPTI_SUCCESS) {
        parse_errors += 1;
        break;
      }
      TraceRecord out;
      if (!ConvertActivity(record, &out)) continue;
      if (out.kind == RecordKind::kApi) out.name = ApiName(out.api_driver, out.api_cbid);
      records.push_back(std::move(out));
    }
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(static_cast<CUcontext>(context), stream_id, &dropped) != CUPTI_SUCCESS) {
    dropped = 0;
  }
  if (!records.empty() && sink_) sink_(records);
  if (dropped > 0 && dropped_sink_) dropped_sink_(dropped);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.buffers_completed += 1;
    stats_.records += static_cast<int64_t>(records.size());
    stats_.dropped += static_cast<int64_t>(dropped);
    stats_.parse_errors += parse_errors;
  }
  if (buffer != nullptr) {
    std::lock_guard<std::mutex> lock(pool_mu_);
    free_buffers_.push_back(buffer);
  }
}

}  // namespace medprof::profiler
