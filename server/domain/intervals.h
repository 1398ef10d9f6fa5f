// Intervals: the 95 % bootstrap intervals compare puts on a cell's median step time and on every
// speedup, so that noise is not shown as a result.
//
// A cell's steps come from n runs. Steps of one run share that run's state (clocks, placement,
// the allocator's history), so they are not independent draws: when n > 1 the bootstrap first
// resamples runs with replacement, then the steps within each drawn run (a two-stage bootstrap);
// with one run it can only resample steps, and the interval then covers step-to-step noise alone.
// Each replicate is the median (Quantile 0.5 of query_engine.h) of the drawn steps pooled.
//
// Resampling is deterministic: SplitMix64 seeded from the cell's key (SeedOf), with the index
// drawn by a 128-bit multiply rather than std::uniform_int_distribution, whose algorithm differs
// between standard libraries — the same store gives the same interval on every machine.
//
// A speedup a / b gets the percentile interval of replicate_a[i] / replicate_b[i] over the two
// cells' independent replicates. It is "significant" when that interval excludes 1.0.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace medprof::server {

// Replicates drawn per cell: the 2.5 % and 97.5 % points then rest on 50 replicates each.
inline constexpr int kBootstrapReplicates = 2000;

struct Interval {
  double lo = 0;
  double hi = 0;
  bool Contains(double v) const { return lo <= v && v <= hi; }
};

// A stable 64-bit seed for `key` (FNV-1a): the same on every platform and run.
uint64_t SeedOf(std::string_view key);

// `replicates` bootstrap medians of the steps in `runs` (one vector of step times per run; empty
// runs are ignored). Runs are resampled first when more than one has steps. Empty result when
// there is no step at all.
std::vector<double> BootstrapMedians(const std::vector<std::vector<double>>& runs, uint64_t seed,
                                     int replicates = kBootstrapReplicates);

// The central `level` (0 < level < 1) percentile interval of `replicates` (Quantile's
// interpolation at (1 - level) / 2 and (1 + level) / 2). {0, 0} for an empty input.
Interval PercentileInterval(std::vector<double> replicates, double level = 0.95);

// numerator[i] / denominator[i] for each i (pairs with a zero denominator are skipped); the
// inputs must have the same length, else the result is empty.
std::vector<double> RatioReplicates(const std::vector<double>& numerator, const std::vector<double>& denominator);

}  // namespace medprof::server
