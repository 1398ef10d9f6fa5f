#include "server/store/records.h"

#include <array>

namespace medprof::server {
namespace {

constexpr std::array<const char*, 6> kJobStates = {"unspecified", "queued",    "running",
                                                        "succeeded",   "failed",    "cancelled"};
constexpr std::array<const char*, 7> kRunStates = {"unspecified", "running", "succeeded",   "failed",
                                                        "interrupted", "lost",    "cancelled"};

template <typename E, size_t N>
bool ParseName(const std::array<const char*, N>& names, std::string_view text, E* out) {
  for (size_t i = 1; i < N; ++i) {
    if (names[i] == text) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

}  // namespace

const char* JobStateName(JobState s) {
  const auto i = static_cast<size_t>(s);
  return i < kJobStates.size() ? kJobStates[i] : kJobStates[0];
}

const char* RunStateName(RunState s) {
  const auto i = static_cast<size_t>(s);
  return i < kRunStates.size() ? kRunStates[i] : kRunStates[0];
}

bool ParseJobState(std::string_view text, JobState* out) { return ParseName(kJobStates, text, out); }
bool ParseRunState(std::string_view text, RunState* out) { return ParseName(kRunStates, text, out); }

bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

}  // namespace medprof::server
