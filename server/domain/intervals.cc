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

// The median of `v` (reordered), with Quantile's convention: the mean of the two middle values
// of an even count.
double MedianInPlace(std::vector<double>& v) {
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
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
  std::vector<const std::vector<double>*> nonempty;
  for (const auto& r : runs) {
    if (!r.empty()) nonempty.push_back(&r);
  }
  std::vector<double> out;
  if (nonempty.empty() || replicates <= 0) return out;
  SplitMix64 rng(seed);
  out.reserve(static_cast<size_t>(replicates));
  std::vector<double> drawn;
  for (int b = 0; b < replicates; ++b) {
    drawn.clear();
    for (size_t i = 0; i < nonempty.size(); ++i) {
      // With one run there is nothing to resample at the run level.
      const std::vector<double>& run = nonempty.size() > 1 ? *nonempty[rng.Below(nonempty.size())] : *nonempty[0];
      for (size_t s = 0; s < run.size(); ++s) drawn.push_back(run[rng.Below(run.size())]);
    }
    out.push_back(MedianInPlace(drawn));
  }
  return out;
}

Interval PercentileInterval(std::vector<double> replicates, double level) {
  if (replicates.empty()) return {};
  const double tail = (1.0 - std::clamp(level, 0.0, 1.0)) / 2;
  std::sort(replicates.begin(), replicates.end());
  return Interval{Quantile(replicates, tail), Quantile(replicates, 1.0 - tail)};
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
