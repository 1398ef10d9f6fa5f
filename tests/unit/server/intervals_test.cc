// The bootstrap of intervals.h on inputs whose answer can be worked out by hand.
#include "server/domain/intervals.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace medprof::server {
namespace {

TEST(SeedOf, IsFnv1a64) {
  EXPECT_EQ(SeedOf(""), 0xcbf29ce484222325ULL);   // the FNV-1a offset basis
  EXPECT_EQ(SeedOf("a"), 0xaf63dc4c8601ec8cULL);  // published FNV-1a test vector
  EXPECT_NE(SeedOf("cpu|2|baseline"), SeedOf("cpu|2|opt1"));
}

TEST(PercentileInterval, TakesTheCentralNinetyFivePercent) {
  std::vector<double> v;
  for (int i = 40; i >= 0; --i) v.push_back(i);  // 0..40, unsorted
  // ranks 0.025 * 40 = 1 and 0.975 * 40 = 39
  const Interval i = PercentileInterval(v);
  EXPECT_DOUBLE_EQ(i.lo, 1);
  EXPECT_DOUBLE_EQ(i.hi, 39);
  const Interval e = PercentileInterval({});
  EXPECT_DOUBLE_EQ(e.lo, 0);
  EXPECT_DOUBLE_EQ(e.hi, 0);
}

TEST(RatioReplicates, PairsByIndexAndSkipsZeroDenominators) {
  EXPECT_EQ(RatioReplicates({2, 6, 5}, {1, 2, 0}), (std::vector<double>{2, 3}));
  EXPECT_TRUE(RatioReplicates({1, 2}, {1}).empty());
}

TEST(BootstrapMedians, ConstantStepsGiveAPointInterval) {
  const std::vector<double> r = BootstrapMedians({{7, 7, 7}, {7, 7}}, 1, 100);
  ASSERT_EQ(r.size(), 100u);
  EXPECT_TRUE(std::all_of(r.begin(), r.end(), [](double x) { return x == 7; }));
  EXPECT_TRUE(BootstrapMedians({{}, {}}, 1).empty());
}

TEST(BootstrapMedians, OneRunOfTwoStepsReachesBothEnds) {
  // Resamples of {1, 3}: (1,1) -> 1 with p 1/4, (1,3) or (3,1) -> 2 with p 1/2, (3,3) -> 3 with
  // p 1/4. The 2.5 % and 97.5 % points are then 1 and 3.
  const std::vector<double> r = BootstrapMedians({{1, 3}}, SeedOf("one run"));
  ASSERT_EQ(r.size(), static_cast<size_t>(kBootstrapReplicates));
  const auto twos = std::count(r.begin(), r.end(), 2.0);
  EXPECT_GT(twos, 900);  // 1000 expected, sd 22
  EXPECT_LT(twos, 1100);
  const Interval i = PercentileInterval(r);
  EXPECT_DOUBLE_EQ(i.lo, 1);
  EXPECT_DOUBLE_EQ(i.hi, 3);
}

TEST(BootstrapMedians, ResamplesRunsBeforeSteps) {
  // Two runs of constant steps, 10 and 20 ms. Runs first: both draws run A (p 1/4) -> median 10,
  // both run B (p 1/4) -> 20, one of each (p 1/2) -> ten steps, five of each -> 15. Resampling the
  // ten pooled steps instead would give 15 only when exactly five 10s are drawn: C(10,5)/2^10 =
  // 0.246 of the time — so the share of 15s tells the two apart.
  const std::vector<double> r = BootstrapMedians({{10, 10, 10, 10, 10}, {20, 20, 20, 20, 20}}, SeedOf("two runs"));
  const auto fifteens = std::count(r.begin(), r.end(), 15.0);
  EXPECT_GT(fifteens, 900);
  EXPECT_LT(fifteens, 1100);
  const Interval i = PercentileInterval(r);
  EXPECT_DOUBLE_EQ(i.lo, 10);
  EXPECT_DOUBLE_EQ(i.hi, 20);
}

TEST(BootstrapMedians, SameSeedSameReplicates) {
  const std::vector<std::vector<double>> runs = {{1, 5, 2, 8}, {3, 9, 4}, {6, 7}};
  EXPECT_EQ(BootstrapMedians(runs, 42), BootstrapMedians(runs, 42));
  EXPECT_NE(BootstrapMedians(runs, 42), BootstrapMedians(runs, 43));
}

// The resampler as first written (draw the values, select the median with nth_element), kept
// here as the reference: BootstrapMedians counts ranks instead, and must give the same doubles.
std::vector<double> ReferenceBootstrap(const std::vector<std::vector<double>>& runs, uint64_t seed, int replicates) {
  std::vector<const std::vector<double>*> nonempty;
  for (const auto& r : runs) {
    if (!r.empty()) nonempty.push_back(&r);
  }
  std::vector<double> out;
  if (nonempty.empty()) return out;
  uint64_t state = seed;
  auto next = [&state] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  auto below = [&](size_t n) { return static_cast<size_t>((static_cast<unsigned __int128>(next()) * n) >> 64); };
  std::vector<double> drawn;
  for (int b = 0; b < replicates; ++b) {
    drawn.clear();
    for (size_t i = 0; i < nonempty.size(); ++i) {
      const std::vector<double>& run = nonempty.size() > 1 ? *nonempty[below(nonempty.size())] : *nonempty[0];
      for (size_t s = 0; s < run.size(); ++s) drawn.push_back(run[below(run.size())]);
    }
    const size_t mid = drawn.size() / 2;
    std::nth_element(drawn.begin(), drawn.begin() + static_cast<std::ptrdiff_t>(mid), drawn.end());
    const double upper = drawn[mid];
    out.push_back(drawn.size() % 2 == 1
                      ? upper
                      : (*std::max_element(drawn.begin(), drawn.begin() + static_cast<std::ptrdiff_t>(mid)) + upper) / 2);
  }
  return out;
}

TEST(BootstrapMedians, SameDoublesAsTheReferenceResampler) {
  // Random cells: 1..12 runs (some empty) of 0..40 steps, odd and even counts, ties (values
  // rounded to 0.25 ms) and distinct values; every replicate must be the same double.
  std::mt19937_64 gen(2026);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::vector<double>> runs(1 + gen() % 12);
    const bool ties = trial % 2 == 0;
    for (auto& run : runs) {
      run.resize(gen() % 41);
      for (double& v : run) {
        const double x = 5.0 + static_cast<double>(gen() % 100000) / 997.0;
        v = ties ? std::round(x * 4) / 4 : x;
      }
    }
    const uint64_t seed = gen();
    ASSERT_EQ(BootstrapMedians(runs, seed, 200), ReferenceBootstrap(runs, seed, 200)) << "trial " << trial;
  }
}

}  // namespace
}  // namespace medprof::server
