// MetricCatalog resolved per chip: which of each metric's Perfworks candidates (common/
// metric_names.h, the one table of medprof's metric names) a chip can count. Resolve() picks, per
// chip, the first candidate a validity predicate accepts (the CUPTI host API in
// metric_validator.h) and records every entry it had to drop with the reason — the metrics layer
// never fails on one bad name. Also the combination of profiled launches (medians), the metrics
// derived from parts, and the packing of metrics into one-pass configurations.
//
// Pure data and logic: no CUPTI, no CUDA. Thread-safe (immutable after construction).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/metric_names.h"

namespace medprof::profiler {

// The catalog's data (medprof names, units, groups, Perfworks candidates) lives in
// common/metric_names.h, shared with the ncu importer; the profiler names it as its own.
using metrics::MetricCatalog;
using metrics::MetricEntry;
using metrics::MetricGroup;
using metrics::MetricGroupName;
using metrics::PmSamplingCatalog;

// A catalog entry resolved for one chip.
struct ResolvedMetric {
  std::string name;  // medprof name
  std::string unit;
  std::string perfworks;  // the Perfworks metric chosen
  MetricGroup group = MetricGroup::kCore;
  bool percent = false;
};

struct DroppedMetric {
  std::string name;  // medprof name
  std::string
      reason;  // e.g. "no valid Perfworks metric on GH100: sm__x.sum (CUPTI_ERROR_INVALID_METRIC_NAME)"
};

struct ResolvedCatalog {
  std::string chip;
  std::vector<ResolvedMetric> metrics;
  std::vector<DroppedMetric> dropped;
  // The Perfworks names of the metrics in `groups`, in catalog order.
  std::vector<std::string> PerfworksNames(const std::vector<MetricGroup>& groups) const;
  std::vector<ResolvedMetric> InGroups(const std::vector<MetricGroup>& groups) const;
};

// Returns "" when `perfworks` is valid on the chip, else the reason it is not.
using MetricValidity = std::function<std::string(const std::string& perfworks)>;

ResolvedCatalog ResolveCatalog(const std::vector<MetricEntry>& catalog, const std::string& chip,
                               const MetricValidity& valid);

// Clamps percentages to [0, 100] (hardware ratios can read 101 %); NaN/inf -> 0 and false.
bool SanitizeMetricValue(const ResolvedMetric& m, double* value);

// The values of several profiled launches of one kernel (medprof name -> value per launch; the
// metrics layer profiles the same launch in consecutive steps) combined into one record: per
// metric, the median over the launches that have it (an even count takes the mean of the
// middle two), so one launch that ran long (short kernels' launches vary by several percent) does
// not decide the figure. Adds
// "launch.samples" (the number of launches) and, when two or more launches have duration_ns,
// "launch.duration_spread_pct" = (max - min) / median * 100, and what DeriveFromParts derives from
// the medians. No launches -> empty.
std::map<std::string, double> MedianOfLaunches(const std::vector<std::map<std::string, double>>& launches);

// The metrics made from others, when their parts are in `values` (the one place these are made: per
// range, per median, and over a signature's merged sessions):
//   dram_bytes = dram_bytes_read + dram_bytes_write
//   the roofline's bytes.dram, bytes.l1 and flops.<class> (roofline::DeriveWorkAndTraffic)
//   l2_hit_pct = 100 * l2_sectors_hit / l2_sectors (clamped to 0..100), unless measured directly:
//                lts__t_sector_hit_rate.pct reads exactly the raw counters of
//                lts__t_sectors_lookup_hit.sum and lts__t_sectors.sum (MetricRawCounters, tested)
void DeriveFromParts(std::map<std::string, double>* values);

// The unit of each metric DeriveFromParts makes ("bytes", "flop", "%"), for the aggregation's
// counter/rate split.
const std::map<std::string, std::string>& DerivedMetricUnits();

// `metrics` less those DeriveFromParts makes from parts that are also in `metrics` (the L2 hit
// rate, which needs two passes on GH100 while each part counts in one).
std::vector<ResolvedMetric> WithoutDerived(const std::vector<ResolvedMetric>& metrics);

// Metrics packed into configurations of one pass each, so every value of a group comes from a
// single execution of the kernel, as the application ran it (no replay). `rest`: the metrics a
// single pass cannot count even alone, in their catalog order.
struct SinglePassPlan {
  std::vector<std::vector<ResolvedMetric>> groups;
  std::vector<ResolvedMetric> rest;
};
// The pass count of a configuration of these Perfworks metrics (CuptiHost::Config::passes); an
// error counts as "does not fit".
using PassCounter = std::function<absl::StatusOr<size_t>(const std::vector<std::string>& perfworks)>;
// First fit in the given order: each metric joins the first group it still fits in one pass
// with, else opens a new group.
SinglePassPlan PackSinglePass(const std::vector<ResolvedMetric>& metrics, const PassCounter& passes);

// True when every metric counts instructions (unit "inst" or "thread inst"; not empty): a
// signature's launches run the same code on inputs of the same sizes, so one launch gives the
// value the median of several would — the metrics layer profiles such a group on one launch.
bool CountsInstructionsOnly(const std::vector<ResolvedMetric>& metrics);

}  // namespace medprof::profiler
