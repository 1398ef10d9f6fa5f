// What one run's stored metric rows say about one compare cell (GPU × preset × phase): the
// per-step counters, the time-weighted utilizations and the warp-stall shares, following the
// metric names of docs/metrics.md.
//
// Sources, in order of preference:
//  * `phase:<p>` scopes of the cell's phase (train: fwd, bwd, optim; forward: fwd; sample:
//    sample_step; the step phase's own name is accepted too). Counters (sm_cycles,
//    warp_instructions) are summed over the phase scopes and divided by the measured steps;
//    percentages are averaged weighted by each scope's duration_ns (equal weights without it).
//  * else `kernel:<name>` scopes. A kernel's aggregate (a scope with coverage_pct: the sum over
//    all its launches in one step) is summed as it is; a run stored before aggregates (one
//    launch per kernel) has its counter scaled to a step by its launches per step (its KernelRow
//    counts / measured steps; one launch when the kernel has no row); percentages are averaged
//    weighted by the kernel's traced total time (its duration_ns, else equal weights, when it
//    has no row).
// The roofline summary (common/roofline.h) comes from the kernel aggregates (`kernel:<name>` scopes
// with coverage_pct) that have FLOP or byte counters, placed against the run's roofs; none without
// roofs or such kernels.
// Stall shares are stall.<r> / cpi from the same scopes (source "metrics"); without them,
// PC-sampling shares pcsamp.<r> of kernel scopes weighted by kernel time ("pc_sampling").
//
// Pure functions; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/roofline.h"
#include "server/store/records.h"

namespace medprof::server {

// The utilization metrics a cell reports, in output order.
inline constexpr const char* kCellPercentMetrics[] = {"tensor_pipe_pct",   "fma_pipe_pct", "achieved_occupancy_pct",
                                                       "l1_hit_pct",        "l2_hit_pct",
                                                       "dram_throughput_pct"};

struct RunMetrics {
  bool any = false;                         // some counter, percentage or stall value found
  std::string source;                       // "phase" | "kernels" | ""
  std::optional<double> sm_cycles;          // per measured step
  std::optional<double> warp_instructions;  // per measured step
  std::map<std::string, double> percent;    // kCellPercentMetrics present, 0..100
  std::string stall_source;                 // "metrics" | "pc_sampling" | "" (none)
  std::map<std::string, double> stalls;     // reason -> share 0..1
  std::optional<roofline::Summary> roofline;  // over the placed kernel aggregates
};

// `phase` is a medprof.v1.Phase number; `steps` the run's measured steps in that phase (>= 1);
// `roofs` the run's (roofline::RoofsOf its Environment.ceilings).
RunMetrics ExtractRunMetrics(const std::vector<MetricRow>& metrics, const std::vector<KernelRow>& kernels, int phase,
                             int steps, const roofline::Roofs& roofs);

// The `phase:<p>` scope names of a step phase ("train" -> fwd, bwd, optim, train; ...).
std::vector<std::string> PhaseScopes(int phase);

}  // namespace medprof::server
