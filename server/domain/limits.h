// Every limit medprof-server enforces, by name, in one place.
//
// A refusal because of a limit names the limit and the value that crossed it, e.g.
// "limit submissions_per_token_per_minute: 31 submissions in the last minute (allowed 30)",
// through LimitExceeded() below (RESOURCE_EXHAUSTED for rates and totals) or a field error
// (INVALID_ARGUMENT, "config.volume: 4096 is out of range (allowed 8..512)") for request
// shapes. The request-shape limits listed here are the ones the validation code checks; the
// numbers must stay equal to what the proto comments and server/README.md promise.
//
// Header-only constants; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace medprof::server::limits {

// ---- transport
// Largest request message, bytes (GrpcServerOptions::max_receive_message_bytes default).
inline constexpr int kMaxRequestBytes = 16 << 20;
// Largest response message, bytes.
inline constexpr int kMaxResponseBytes = 64 << 20;

// ---- strings (characters)
inline constexpr size_t kMaxStudyName = 200;
inline constexpr size_t kMaxCancelReason = 1000;
inline constexpr size_t kMaxAgentName = 128;
inline constexpr size_t kMaxIdChars = 64;            // study_id, job_id, run_id, agent_id
inline constexpr size_t kMaxTokenChars = 200;        // the authorization header's token
inline constexpr size_t kMaxProjectChars = 64;
inline constexpr size_t kMaxTokenNote = 200;

// ---- submissions
inline constexpr int kMaxPresets = 16;
inline constexpr int kMaxTargets = 64;
inline constexpr int kMaxRepeats = 100;
inline constexpr int kMaxAttempts = 10;
inline constexpr int kMaxJobsPerStudy = 1000;        // presets x targets x repeats
inline constexpr int kMinVolume = 8;                 // voxels per side (common/workload_config)
inline constexpr int kMaxVolume = 512;
inline constexpr int kMaxTimeoutS = 7 * 24 * 3600;
// Submissions one token may make in any sliding minute.
inline constexpr int kSubmissionsPerTokenPerMinute = 30;

// ---- results
// Chunks one upload window (one transaction) holds, and its bytes.
inline constexpr size_t kUploadWindowChunks = 256;
inline constexpr size_t kUploadWindowBytes = 8 << 20;
// Largest stored error / stderr tail of a run, bytes (longer ones are cut, never refused).
inline constexpr size_t kMaxRunErrorBytes = 64 * 1024;
inline constexpr size_t kMaxRunStderrBytes = 64 * 1024;
// Run ids one heartbeat may list.
inline constexpr size_t kMaxIdsPerHeartbeat = 1024;

// ---- authentication
// How long a verified token is trusted without looking at the database again: a revocation
// made by `medprof-server token revoke` (another process) takes effect within this time.
inline constexpr auto kTokenCacheTtl = std::chrono::seconds(5);

// RESOURCE_EXHAUSTED "limit NAME: WHAT (allowed LIMIT)".
inline absl::Status LimitExceeded(absl::string_view name, absl::string_view what, int64_t allowed) {
  return absl::ResourceExhaustedError(absl::StrCat("limit ", name, ": ", what, " (allowed ", allowed, ")"));
}

}  // namespace medprof::server::limits
