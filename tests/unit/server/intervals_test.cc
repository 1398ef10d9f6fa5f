// The bootstrap of intervals.h on inputs whose answer can be worked out by hand.
#include "server/domain/intervals.h"

#include <gtest/gtest.h>

#include <algorithm>

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

}  // namespace
}  // namespace medprof::server
