// medprof's hardware metric names (docs/metrics.md) and the Perfworks metrics behind them: one
// table for the worker's metrics layer (agent/profiler/metric_catalog.h resolves it per chip
// through CUPTI) and the Nsight Compute importer (common/ncu_csv.h maps an export's columns
// through it).
//
// Each entry names one medprof metric, its unit, the group it is collected with (core, stalls,
// throughput, sass — the groups of spec/cupti.md §1.3 — and work, the roofline's FLOP and traffic
// counters) and the Perfworks names that can supply it, in order of preference (chips differ:
// e.g. Hopper's `sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active` excludes HFMA2.MMA,
// older chips only have the HMMA pipe).
//
// Pure data: no CUPTI, no CUDA. Thread-safe (immutable after first use).
#pragma once

#include <string>
#include <vector>

namespace medprof::metrics {

// kWork: the roofline's counters the core set lacks — FLOPs (SASS op counts, Tensor Core ops by
// input precision) and L2/L1 traffic — counted on every core signature (one launch each: a
// signature's launches run the same instructions on the same inputs) and on the phase ranges.
enum class MetricGroup { kCore, kStalls, kThroughput, kSass, kWork };
const char* MetricGroupName(MetricGroup g);

struct MetricEntry {
  std::string name;  // medprof name, e.g. "tensor_pipe_pct"
  std::string unit;  // "ns", "cycles", "inst", "%", "bytes", ...
  MetricGroup group = MetricGroup::kCore;
  std::vector<std::string> candidates;  // Perfworks names, preferred first
  bool percent = false;                 // a 0..100 value: clamped, time-weighted when averaged
};

// The full catalog of docs/metrics.md, in a fixed order.
const std::vector<MetricEntry>& MetricCatalog();

// The PM-sampling columns (single-pass set, spec/cupti.md §4.2): medprof name -> candidates.
const std::vector<MetricEntry>& PmSamplingCatalog();

}  // namespace medprof::metrics
