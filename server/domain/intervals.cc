#include "server/domain/intervals.h"

#include <algorithm>

#include "server/domain/query_engine.h"

namespace medprof::server {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014): small, fast, and fully specified.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // An index in [0, n) (Lemire's multiply-shift; the bias is below n / 2^64).
  size_t Below(size_t n) {
    return static_cast<size_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

// The steps of the non-empty runs as ranks into all their values sorted ascending
// (sorted[rank] is the step's value), so that a resample's median is found by counting ranks
// instead of selecting among the drawn values: the same values, in O(drawn + steps) with no
// comparisons of the drawn values.
struct RankedRuns {
  std::vector<double> sorted;
  std::vector<std::vector<uint32_t>> ranks;  // per non-empty run, in its step order
};

RankedRuns Rank(const std::vector<std::vector<double>>& runs) {
  std::vector<std::pair<double, uint32_t>> all;  // (value, position in the runs' concatenation)
  RankedRuns out;
  for (const auto& r : runs) {
    if (r.empty()) continue;
    out.ranks.emplace_back(r.size());
    for (double v : r) all.emplace_back(v, static_cast<uint32_t>(all.size()));
  }
  std::sort(all.begin(), all.end());
  out.sorted.resize(all.size());
  std::vector<uint32_t> rank_of(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    out.sorted[i] = all[i].first;
    rank_of[all[i].second] = static_cast<uint32_t>(i);
  }
  size_t at = 0;
  for (auto& r : out.ranks) {
    for (uint32_t& x : r) x = rank_of[at++];
  }
  return out;
}

// The median of the `drawn` values counted by rank in `counts`, with Quantile's convention (the
// mean of the two middle values of an even count): positions drawn / 2 and, for an even count,
// drawn / 2 - 1 of the drawn values in ascending order.
double MedianOfCounts(const std::vector<uint32_t>& counts, const std::vector<double>& sorted, size_t drawn) {
  const size_t mid = drawn / 2;
  const size_t below = drawn % 2 == 1 ? mid : mid - 1;
  size_t seen = 0;
  size_t rank = 0;
  while (seen + counts[rank] <= below) seen += counts[rank++];
  const double lower = sorted[rank];
  while (seen + counts[rank] <= mid) seen += counts[rank++];
  return drawn % 2 == 1 ? sorted[rank] : (lower + sorted[rank]) / 2;
}

}  // namespace

uint64_t SeedOf(std::string_view key) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : key) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::vector<double> BootstrapMedians(const std::vector<std::vector<double>>& runs, uint64_t seed, int replicates) {
  const RankedRuns ranked = Rank(runs);
  const std::vector<std::vector<uint32_t>>& nonempty = ranked.ranks;
  std::vector<double> out;
  if (nonempty.empty() || replicates <= 0) return out;
  SplitMix64 rng(seed);
  out.reserve(static_cast<size_t>(replicates));
  std::vector<uint32_t> counts(ranked.sorted.size());
  for (int b = 0; b < replicates; ++b) {
    std::fill(counts.begin(), counts.end(), 0);
    size_t drawn = 0;
    for (size_t i = 0; i < nonempty.size(); ++i) {
      // With one run there is nothing to resample at the run level.
      const std::vector<uint32_t>& run = nonempty.size() > 1 ? nonempty[rng.Below(nonempty.size())] : nonempty[0];
      for (size_t s = 0; s < run.size(); ++s) ++counts[run[rng.Below(run.size())]];
      drawn += run.size();
    }
    out.push_back(MedianOfCounts(counts, ranked.sorted, drawn));
  }
  return out;
}

Interval PercentileInterval(std::vector<double> replicates, double level) {
  if (replicates.empty()) return {};
  const double tail = (1.0 - std::clamp(level, 0.0, 1.0)) / 2;
  std::sort(replicates.begin(), replicates.end());
  return Interval{QuantileOfSorted(replicates, tail), QuantileOfSorted(replicates, 1.0 - tail)};
}

std::vector<double> RatioReplicates(const std::vector<double>& numerator, const std::vector<double>& denominator) {
  std::vector<double> out;
  if (numerator.size() != denominator.size()) return out;
  out.reserve(numerator.size());
  for (size_t i = 0; i < numerator.size(); ++i) {
    if (denominator[i] != 0) out.push_back(numerator[i] / denominator[i]);
  }
  return out;
}

}  // namespace medprof::server
