// agent/profiler/metrics_request: the counter-API choice.
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

}  // namespace
}  // namespace medprof::profiler
