// agent/profiler/metrics_request: the counter-API choice and the legacy API's train-step guard.
#include "agent/profiler/metrics_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace medprof::profiler {
namespace {

using ::testing::HasSubstr;

TEST(MetricsRequestTest, CounterApiNamesRoundTripAndUnknownNamesAreRefused) {
  for (CounterApiChoice c : {CounterApiChoice::kAuto, CounterApiChoice::kRange, CounterApiChoice::kLegacy}) {
    EXPECT_EQ(*ParseCounterApiChoice(CounterApiChoiceName(c)), c);
  }
  absl::StatusOr<CounterApiChoice> bad = ParseCounterApiChoice("cupti");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("auto|range|legacy"));
}

TEST(MetricsRequestTest, AutoPickingTheLegacyApiOnATrainStepIsRefusedWithWhatStillWorks) {
  const absl::Status s = CheckLegacyApiStep(CounterApiChoice::kAuto, /*legacy_api=*/true, /*train_step=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("--phase forward"));
  EXPECT_THAT(s.message(), HasSubstr("--counter-api legacy"));
}

TEST(MetricsRequestTest, ForwardStepsTheRangeProfilerAndAForcedLegacyApiRun) {
  EXPECT_TRUE(CheckLegacyApiStep(CounterApiChoice::kAuto, true, false).ok());     // V100 forward
  EXPECT_TRUE(CheckLegacyApiStep(CounterApiChoice::kAuto, false, true).ok());     // range profiler, train
  EXPECT_TRUE(CheckLegacyApiStep(CounterApiChoice::kLegacy, true, true).ok());    // forced: to investigate
  EXPECT_TRUE(CheckLegacyApiStep(CounterApiChoice::kRange, false, true).ok());
}

}  // namespace
}  // namespace medprof::profiler
