// ResultIngestor: stores the numbered worker records agents upload (UploadResults).
//
// For each chunk: the run must exist and belong to the uploading agent (agent_id); a chunk
// already stored (same run_id and seq) is acknowledged again and not stored twice; a new chunk
// is accepted only while the run is running. Each record is stored by type: RunStarted -> the
// run's effective config, environment, parameters; StepTiming -> run_steps; OpAggregates ->
// run_ops; KernelAggregates -> run_kernels; MetricValues -> run_metrics; KernelFindings ->
// run_findings; Timeline / UtilizationTimeline -> run_timelines (one part per message, as JSON);
// Progress -> the job's
// last progress and a study event; RunSummary -> the run's summary; WorkerError -> the run's
// error. One Ingest call (one read window of the stream) is one transaction: either every new
// chunk of the window is stored or none is. The answer is, per run of the window, the highest
// seq below which every chunk is stored.
//
// Thread-safe. Holds references into its DomainCore.
//
// UploadWindow: how one UploadResults stream is cut into Ingest windows. A window is ingested
// once it holds limits::kUploadWindowChunks chunks or limits::kUploadWindowBytes bytes, and
// the rest at Finish; the stream's answer is, per run, the highest committed seq any of its
// windows reached. One per stream, used on that stream's thread only; holds references to the
// ingestor and the call context, which must outlive it.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "server/domain/call_context.h"
#include "server/domain/core.h"
#include "server/domain/types.h"

namespace medprof::server {

class ResultIngestor {
 public:
  explicit ResultIngestor(DomainCore& core) : core_(core) {}

  absl::StatusOr<CommittedThrough> Ingest(const CallContext& ctx, const std::vector<ResultChunk>& chunks);

 private:
  DomainCore& core_;
};

class UploadWindow {
 public:
  UploadWindow(ResultIngestor& ingestor, const CallContext& call) : ingestor_(ingestor), call_(call) {}

  // Adds one chunk; `wire_bytes` is its size as received, counted against the byte bound.
  // When the window is full it is ingested here: an error is that window's, and the stream
  // should end with it (the window's chunks are dropped either way).
  absl::Status Add(ResultChunk chunk, size_t wire_bytes);

  // Ingests what is left and returns, per run of the stream, the highest committed seq.
  absl::StatusOr<CommittedThrough> Finish();

 private:
  absl::Status Flush();

  ResultIngestor& ingestor_;
  const CallContext& call_;
  std::vector<ResultChunk> window_;
  size_t window_bytes_ = 0;
  CommittedThrough acked_;
};

// "started" | "progress" | "step" | "ops" | "kernels" | "metrics" | "summary" | "error" | "findings" |
// "timeline" | "utilization" | "signatures" | "" (empty).
const char* ChunkKind(const v1::WorkerMessage& message);

}  // namespace medprof::server
