// RunUploader: a run made by hand (`medprof-worker ... --out run.pb`) stored in a study, so that
// it joins compare, kernels, diff, export and the report like a run made by an agent.
//
// Upload checks the shape of the worker's record stream first — its first message is `started`
// (whose effective config names a known preset), it holds at least one `step` and a `summary`,
// and no `error` (a failed run has nothing to compare) — and refuses with INVALID_ARGUMENT
// naming the message index before anything is written. It then creates, in one transaction, a
// job (the started preset, target "upload") and a running run owned by agent id
// "upload:<run id>", feeds the messages through ResultIngestor — the very path and checks of an
// agent's upload, sequence numbers 1..n — and marks run and job succeeded (with the job's
// event). Should the ingest refuse a message (e.g. the per-run result-size limit), the run and
// job are marked failed with that cause, and the error is returned.
//
// Thread-safe. Holds references into its DomainCore and the ingestor.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "medprof/v1/results.pb.h"
#include "server/domain/call_context.h"
#include "server/domain/core.h"
#include "server/domain/result_ingest.h"

namespace medprof::server {

struct UploadRunRequest {
  std::string study_id;                     // required; the study must exist and not be cancelled
  std::vector<v1::WorkerMessage> messages;  // the worker's records in file order, 2..100000
};

struct UploadRunResult {
  std::string study_id;
  std::string job_id;
  std::string run_id;
  std::string preset;
  std::string gpu;      // as compare will group it ("cpu" on the CPU backend)
  int steps = 0;        // step records stored
};

class RunUploader {
 public:
  RunUploader(DomainCore& core, ResultIngestor& ingestor) : core_(core), ingestor_(ingestor) {}

  absl::StatusOr<UploadRunResult> Upload(const CallContext& ctx, const UploadRunRequest& request);

 private:
  absl::Status Finish(const std::string& run_id, bool succeeded, const std::string& message);

  DomainCore& core_;
  ResultIngestor& ingestor_;
};

}  // namespace medprof::server
