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
#pragma once

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

// "started" | "progress" | "step" | "ops" | "kernels" | "metrics" | "summary" | "error" | "findings" |
// "timeline" | "utilization" | "" (empty).
const char* ChunkKind(const v1::WorkerMessage& message);

}  // namespace medprof::server
