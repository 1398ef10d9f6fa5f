#include "agent/agent/backoff.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::agent {
namespace {

using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

TEST(BackoffTest, WithoutJitterDoublesUpToTheCap) {
  Backoff b({.initial_ms = 100, .max_ms = 1000, .multiplier = 2.0, .jitter = 0.0});
  const std::vector<int64_t> expected = {100, 200, 400, 800, 1000, 1000, 1000};
  for (int64_t e : expected) EXPECT_EQ(b.NextDelayMs(), e);
  EXPECT_EQ(b.attempt(), 7);
  b.Reset();
  EXPECT_EQ(b.attempt(), 0);
  EXPECT_EQ(b.NextDelayMs(), 100);
}

TEST(BackoffTest, JitteredDelaysStayWithinTheirStepAndTheCap) {
  const BackoffOptions o{.initial_ms = 500, .max_ms = 30'000, .multiplier = 2.0, .jitter = 0.5};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Backoff b(o, seed);
    double base = 500;
    for (int attempt = 0; attempt < 20; ++attempt) {
      const double step = std::min(base, 30'000.0);
      const int64_t d = b.NextDelayMs();
      EXPECT_GE(d, static_cast<int64_t>(step * 0.5)) << "seed " << seed << " attempt " << attempt;
      EXPECT_LE(d, static_cast<int64_t>(step)) << "seed " << seed << " attempt " << attempt;
      base *= 2;
    }
  }
}

TEST(BackoffTest, JitterSpreadsDelays) {
  Backoff a({.initial_ms = 1000, .max_ms = 1000, .multiplier = 1.0, .jitter = 0.5}, 1);
  std::set<int64_t> seen;
  for (int i = 0; i < 20; ++i) seen.insert(a.NextDelayMs());
  EXPECT_GT(seen.size(), 5u);
}

TEST(BackoffTest, ManyAttemptsNeitherOverflowNorExceedTheCap) {
  Backoff b({.initial_ms = 1, .max_ms = 60'000, .multiplier = 10.0, .jitter = 0.0});
  for (int i = 0; i < 5000; ++i) {
    const int64_t d = b.NextDelayMs();
    ASSERT_GE(d, 1);
    ASSERT_LE(d, 60'000);
  }
  EXPECT_EQ(b.NextDelayMs(), 60'000);
}

TEST(BackoffTest, OptionsAreValidated) {
  EXPECT_THAT(ValidateBackoffOptions({.initial_ms = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("initial_ms")));
  EXPECT_THAT(ValidateBackoffOptions({.initial_ms = 10, .max_ms = 5}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("max_ms: 5 is out of range (allowed >= initial_ms 10)")));
  EXPECT_THAT(ValidateBackoffOptions({.multiplier = 0.5}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("multiplier")));
  EXPECT_THAT(ValidateBackoffOptions({.jitter = 1.5}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("jitter: 1.5")));
  EXPECT_THAT(ValidateBackoffOptions({}), medprof::testing::IsOk());
}

}  // namespace
}  // namespace medprof::agent
