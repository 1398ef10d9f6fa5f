// `medprof import-ncu`: an Nsight Compute `--csv --page raw` export (parsed and aggregated by
// common/ncu_csv.h) turned into the ImportRun request the server stores as one run.
//
// The request carries the kernels (one row per kernel name: launches, total/min/max duration,
// first launch's grid, block, registers, shared memory, theoretical occupancy, taxonomy
// category; phase "fwd" for --phase forward, "sample_step" for sample, "" for train), the metric
// values under medprof names (docs/metrics.md, "Nsight Compute import"), and the environment
// the export knows (host, compute capability, process name and file in `extra`). When the
// request would exceed the server's message limit, the unknown `ncu.*` kernel metrics are left
// out (with a warning) before anything known is.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cli.h"
#include "common/ncu_csv.h"
#include "medprof/v1/service.pb.h"

namespace medprof::client {

// Largest request sent (the server accepts 16 MiB).
inline constexpr size_t kMaxImportRequestBytes = 15 << 20;

struct ImportPlan {
  v1::ImportRunRequest request;
  std::vector<std::string> warnings;
};

// INVALID_ARGUMENT when even the known metrics do not fit in kMaxImportRequestBytes.
absl::StatusOr<ImportPlan> BuildImportRequest(const ncu::NcuRun& run, const ImportNcuCommand& command,
                                              const std::string& file_name);

}  // namespace medprof::client
