// QueryEngine: the comparative questions asked of stored runs — compare, a run's kernel table,
// a kernel diff between two runs, and a run's raw timeline.
//
// Compare groups succeeded runs — those of a study, or an explicit run filter (run_ids, within
// the study when both are given) — into cells by (GPU, preset, phase), where GPU is the run
// environment's gpu_name ("cpu" on the CPU backend) and phase the StepTiming phase. Per cell:
//  * n runs; the measured steps of those runs pooled; the median, p10 and p90 of the pooled step
//    wall times (Quantile below: linear interpolation between closest ranks, so the median of an
//    even count is the mean of the two middle values);
//  * a 95 % bootstrap interval of the median (intervals.h: runs resampled first when n > 1, then
//    steps; seeded by the cell's key, so deterministic), and notes when the cell has fewer than
//    3 runs or fewer than 5 measured steps;
//  * speedup_vs_baseline = baseline median / cell median for the baseline preset's cell on the
//    same GPU and phase (has_baseline false without one, with a note); with baseline_gpu set,
//    speedup_vs_baseline_gpu = that GPU's median / cell median for the same preset and phase
//    (cross-GPU at a fixed preset); each speedup but the reference cell's own gets the interval of
//    the ratio of the two cells' replicates, significant when it excludes 1.0;
//  * the shares of time by kernel-taxonomy category, from the runs' kernel totals when the cell
//    has kernel rows (time_source "kernels"), else from the op self times ("ops"), largest
//    first, the top N kept;
//  * metrics (cell_metrics.h): per-step SM cycles and warp instructions, averaged over the runs
//    that measured them, and their ratio to the baseline preset's cell on the same GPU and phase;
//    Tensor Core / FMA pipe utilization, achieved occupancy, L1/L2 hit, DRAM throughput (means
//    over runs). A cell without any metric value says why — "metrics not collected: <reason>"
//    from the runs' LayerStatus of the metrics layer — and has no value, never a zero;
//  * stall shares (metrics layer, else PC sampling), or "stalls not collected: <reasons>";
//  * the top kernels (default 5) by priority — a kernel's priority in a run is the largest of its
//    findings' priorities (KernelFinding, matched by kernel name and op), averaged over the
//    cell's runs — with their findings; by time share when the cell has no findings (and
//    findings_note says why);
//  * notes for the profiler layers that did not run ("metrics not collected: no GPU").
// A run with steps in several phases counts its kernel and op times in each of those cells.
// Cells are ordered by GPU, phase, then preset in the order baseline, opt1, opt2, opt12, bf16,
// opt3.
//
// Kernels lists a run's kernel rows by total GPU time, largest first (op self times for a run
// without kernel rows, time_source "ops"). Diff aligns two runs' kernel time by (op, category),
// per measured step, largest |b - a| first. Timeline returns the stored Timeline parts merged
// (FAILED_PRECONDITION naming why when there are none).
//
// A comparison of studies (not of a run filter) is kept in a CompareCache and served again while
// the studies' revisions are the ones it was computed at (compare_cache.h): the same answer,
// without reading or computing it again; any write compare can see makes the next compare fresh.
//
// Every query runs on the domain's QueryPool (query_pool.h: lower CPU priority than writes),
// except a compare served from the cache, which costs a short read and a copy.
//
// Thread-safe (reads the store only; the cache has its own lock). Holds references into its
// DomainCore; reports latencies to its MetricsSink.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/domain/call_context.h"
#include "server/domain/compare.h"
#include "server/domain/compare_cache.h"
#include "server/domain/core.h"
#include "server/domain/types.h"

namespace medprof::server {

class QueryEngine {
 public:
  explicit QueryEngine(DomainCore& core)
      : core_(core), cache_(static_cast<size_t>(std::max(core.options.compare_cache_entries, 0))) {}

  absl::StatusOr<CompareResult> Compare(const CallContext& ctx, const CompareRequest& request);
  absl::StatusOr<KernelsResult> Kernels(const CallContext& ctx, const KernelsRequest& request);
  absl::StatusOr<DiffResult> Diff(const CallContext& ctx, const DiffRequest& request);
  absl::StatusOr<TimelineResult> Timeline(const CallContext& ctx, const std::string& run_id);
  // Jobs of every study per state ("queued", "running", "succeeded", "failed", "cancelled"; each
  // present, 0 when none). For monitoring.
  absl::StatusOr<std::map<std::string, int64_t>> JobsByState();
  // The comparisons kept (hits and misses), for tests and monitoring.
  const CompareCache& compare_cache() const { return cache_; }

 private:
  // Computes a comparison (cache_ miss or a run filter) and keeps it under `key` ("" = not kept).
  absl::StatusOr<CompareResult> MakeCompare(const CompareSpec& spec, const std::string& key);
  absl::StatusOr<KernelsResult> DoKernels(const KernelsRequest& request);
  absl::StatusOr<DiffResult> DoDiff(const DiffRequest& request);
  absl::StatusOr<TimelineResult> DoTimeline(const std::string& run_id);

  DomainCore& core_;
  CompareCache cache_;  // comparisons of studies, served only at the revisions they were made at
};

// The q-quantile (0 <= q <= 1) of `values` with linear interpolation between the closest ranks:
// sorted x[0..n-1], rank h = q * (n - 1), result x[floor h] + (h - floor h) * (x[floor h + 1] -
// x[floor h]). 0 for an empty input.
double Quantile(std::vector<double> values, double q);
// The same of values already sorted ascending (no copy, no sort).
double QuantileOfSorted(const std::vector<double>& sorted, double q);

}  // namespace medprof::server
