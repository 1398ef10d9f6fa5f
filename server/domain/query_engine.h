// QueryEngine: the comparative questions asked of stored runs (first version: compare).
//
// Compare groups the succeeded runs of a study into cells by (GPU, preset, phase), where GPU is
// the run environment's gpu_name ("cpu" on the CPU backend) and phase the StepTiming phase.
// Per cell: n runs; the measured steps of those runs pooled; the median, p10 and p90 of the
// pooled step wall times (Quantile below: linear interpolation between closest ranks, so the
// median of an even count is the mean of the two middle values); speedup_vs_baseline =
// baseline median / cell median for the baseline preset's cell on the same GPU and phase
// (has_baseline false without one); the shares of time by kernel-taxonomy category, from the
// runs' kernel totals when the cell has kernel rows (time_source "kernels"), else from the op
// self times (time_source "ops"), largest first, the top N kept; notes for the profiler layers
// that did not run ("metrics not collected: no GPU"). A run with steps in several phases
// counts its kernel and op times in each of those cells. Cells are ordered by GPU, phase, then
// preset in the order baseline, opt1, opt2, opt12, bf16, opt3.
//
// Thread-safe (reads only). Holds references into its DomainCore.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "server/domain/call_context.h"
#include "server/domain/core.h"
#include "server/domain/types.h"

namespace medprof::server {

class QueryEngine {
 public:
  explicit QueryEngine(DomainCore& core) : core_(core) {}

  absl::StatusOr<CompareResult> Compare(const CallContext& ctx, const CompareRequest& request);

 private:
  DomainCore& core_;
};

// The q-quantile (0 <= q <= 1) of `values` with linear interpolation between the closest ranks:
// sorted x[0..n-1], rank h = q * (n - 1), result x[floor h] + (h - floor h) * (x[floor h + 1] -
// x[floor h]). 0 for an empty input.
double Quantile(std::vector<double> values, double q);

}  // namespace medprof::server
