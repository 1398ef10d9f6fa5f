// RunImporter: stores measurements taken outside medprof (an Nsight Compute export that the CLI
// parsed with common/ncu_csv.h) as one succeeded run, so they join compare, kernels, diff and
// the report like runs made by agents.
//
// Import writes, in one transaction: a study (new, in the caller's project, or the existing
// study_id), one job (the preset, state succeeded, one attempt) and one run (state succeeded,
// agent "import:<source>", backend = source, gpu_name = the request's gpu) with
//   - `steps` StepTiming rows in the request's phase, each wall_ns = device_ns = the kernels'
//     total time / steps (the export holds kernel durations only: host gaps are not in it);
//   - the kernel rows (category from the taxonomy when the request leaves it empty) and the
//     metric rows as given;
//   - a RunSummary (measured_steps, median step time, layers: metrics ran; trace and sampling did
//     not, with the reason "imported from <source>: ..."), the environment with gpu_name set,
//     extra["source"] = source, and the effective config {preset, phase};
//   - the job's succeeded event (the study's finished event when it was the last open job).
// Every field is checked first; a refusal is INVALID_ARGUMENT naming the field (NOT_FOUND for
// an unknown study_id), and nothing is written.
//
// Thread-safe. Holds references into its DomainCore.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "medprof/v1/results.pb.h"
#include "medprof/v1/workload.pb.h"
#include "server/domain/call_context.h"
#include "server/domain/core.h"

namespace medprof::server {

struct ImportRunRequest {
  std::string study_id;      // "" = a new study
  std::string study_name;    // new study's name, <= 200 characters
  std::string preset;        // required, a known preset
  std::string gpu;           // required, 1..128 printable characters
  v1::Phase phase = v1::PHASE_UNSPECIFIED;  // unspecified = train
  std::string source;        // required, 1..32 of [a-z0-9_.-] (e.g. "ncu")
  int steps = 0;             // 0 = 1; 1..100000
  v1::Environment environment;
  std::vector<v1::KernelStat> kernels;  // 1..100000 rows
  std::vector<v1::MetricValue> metrics;  // <= 2000000 rows
  std::vector<v1::KernelSignature> signatures;  // <= 100000, each of a kernel in `kernels`
};

struct ImportRunResult {
  std::string study_id;
  std::string job_id;
  std::string run_id;
  int kernels = 0;
  int metrics = 0;
  double step_ms = 0;
};

class RunImporter {
 public:
  explicit RunImporter(DomainCore& core) : core_(core) {}

  absl::StatusOr<ImportRunResult> Import(const CallContext& ctx, const ImportRunRequest& request);

 private:
  DomainCore& core_;
};

}  // namespace medprof::server
