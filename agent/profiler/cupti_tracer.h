// CuptiTracer: the thin wrapper around the CUPTI Activity API (spec/cupti.md §3, §7a).
//
// Start() enables CONCURRENT_KERNEL, MEMCPY, MEMSET and EXTERNAL_CORRELATION records plus API
// records for the launch/copy/set calls only (cuptiActivityEnableRuntimeApi/DriverApi, CUPTI
// API >= 24; older CUPTI: all RUNTIME and DRIVER records), registers CLOCK_MONOTONIC as CUPTI's
// timestamp source, and hands CUPTI buffers from a pool (default 8 MB each, at most 32; when
// the pool is empty CUPTI drops records, which are counted). A collector thread calls
// cuptiActivityFlushAll(0) every flush_period_ms; Stop() does a forced flush, so every
// record reaches the sink before it returns. Completed buffers are converted to TraceRecords
// (cupti_records.h) and passed to the sink on the thread CUPTI delivers them on.
//
// CUPTI's activity state is process-wide: one CuptiTracer at a time (a second Start() is
// FAILED_PRECONDITION). Without an NVIDIA driver, enabling fails (CUPTI_ERROR_UNKNOWN) and
// Start() returns that status with the call text; nothing stays enabled. Thread safety:
// Push/PopExternalId from any thread (CUPTI keeps one stack per thread); Start/Stop from one.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "agent/profiler/trace_records.h"

namespace medprof::profiler {

struct CuptiTracerOptions {
  size_t buffer_bytes = 8 << 20;  // bytes per activity buffer (CUPTI guidance: 4-8 MB)
  int max_buffers = 32;           // pool cap (buffers in CUPTI's hands + being processed)
  int flush_period_ms = 100;      // collector thread period; 0 = no periodic flush
  bool monotonic_clock = true;    // cuptiActivityRegisterTimestampCallback(CLOCK_MONOTONIC)
};

struct CuptiTracerStats {
  int64_t buffers_allocated = 0;
  int64_t buffers_completed = 0;
  int64_t buffers_refused = 0;   // requests answered with no buffer (pool exhausted)
  int64_t records = 0;           // records converted and delivered
  int64_t dropped = 0;           // cuptiActivityGetNumDroppedRecords, summed
  int64_t parse_errors = 0;      // cuptiActivityGetNextRecord errors other than end of buffer
  int64_t correlation_errors = 0;  // failed push/pop of external correlation ids
};

class CuptiTracer {
 public:
  using Sink = std::function<void(const std::vector<TraceRecord>&)>;
  using DroppedSink = std::function<void(uint64_t records)>;

  static absl::StatusOr<std::unique_ptr<CuptiTracer>> Start(const CuptiTracerOptions& options,
                                                            Sink sink, DroppedSink dropped);
  ~CuptiTracer();  // Stop()s
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  // Forced flush, then disables the activity kinds and joins the collector. Idempotent.
  absl::Status Stop();

  // Turns the activity kinds off (forced flush first) and on again, for the trace-overhead
  // A/B steps: while paused, CUPTI instruments nothing and Push/PopExternalId do nothing.
  absl::Status Pause();
  // Forced flush: every record of finished work reaches the sink before it returns.
  absl::Status Flush();
  absl::Status Resume();
  bool paused() const { return paused_.load(std::memory_order_acquire); }

  // Tags CUDA API calls made by this thread until the matching Pop (CUSTOM0 kind).
  void PushExternalId(uint64_t id);
  void PopExternalId();

  // Now, in the clock of the records' timestamps.
  uint64_t NowNs() const;
  bool monotonic_clock() const { return monotonic_clock_; }
  CuptiTracerStats stats() const;

  // Called from the CUPTI buffer callbacks (public for them only).
  uint8_t* RequestBuffer(size_t* size);
  void CompleteBuffer(void* context, uint32_t stream_id, uint8_t* buffer, size_t valid_size);

 private:
  CuptiTracer(const CuptiTracerOptions& options, Sink sink, DroppedSink dropped);
  absl::Status Enable();
  void DisableAll();
  void Collect();
  const char* ApiName(bool driver, uint32_t cbid);

  const CuptiTracerOptions options_;
  const Sink sink_;
  const DroppedSink dropped_sink_;
  bool monotonic_clock_ = false;
  absl::Status clock_status_;
  std::vector<int> enabled_kinds_;  // CUpti_ActivityKind values enabled by Enable()
  std::atomic<bool> paused_{false};
  bool registered_ = false;  // buffer and timestamp callbacks registered (once per process)

  mutable std::mutex pool_mu_;
  std::vector<uint8_t*> free_buffers_;
  int buffers_out_ = 0;  // allocated and not freed

  mutable std::mutex stats_mu_;
  CuptiTracerStats stats_;

  std::mutex names_mu_;
  std::vector<std::pair<uint64_t, std::string>> api_names_;  // (driver << 32 | cbid) -> name

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread collector_;
};

}  // namespace medprof::profiler
