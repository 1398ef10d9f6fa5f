// GoogleTest matchers for absl::Status / absl::StatusOr (Debian 12's Abseil has none).
//
//   EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("volume")));
//   EXPECT_THAT(s, IsOk());
#pragma once

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/status.h"
#include "gmock/gmock.h"

namespace medprof::testing {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) { return s.status(); }

MATCHER(IsOk, "is OK") {
  const absl::Status& s = GetStatus(arg);
  if (!s.ok()) *result_listener << "status is " << s;
  return s.ok();
}

MATCHER_P2(StatusIs, code, message_matcher,
           std::string("has code ") + absl::StatusCodeToString(code) + " and a matching message") {
  const absl::Status& s = GetStatus(arg);
  *result_listener << "status is " << s;
  return s.code() == code &&
         ::testing::Matches(message_matcher)(std::string(s.message()));
}

}  // namespace medprof::testing

#define MEDPROF_ASSERT_OK_AND_ASSIGN(lhs, expr)        \
  auto MEDPROF_STATUS_CONCAT_(aoa_, __LINE__) = (expr); \
  ASSERT_TRUE(MEDPROF_STATUS_CONCAT_(aoa_, __LINE__).ok()) \
      << MEDPROF_STATUS_CONCAT_(aoa_, __LINE__).status();  \
  lhs = std::move(MEDPROF_STATUS_CONCAT_(aoa_, __LINE__)).value()
