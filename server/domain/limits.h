// The operational limits of medprof-server (message sizes, rates, upload windows, cache
// lifetimes), by name; the request-shape limits it shares with the CLI and the worker are
// common/request_limits.h's, visible here under the same namespace.
//
// A refusal because of a limit names the limit and the value that crossed it, e.g.
// "limit submissions_per_token_per_minute: 31 submissions in the last minute (allowed 30)",
// through LimitExceeded() below (RESOURCE_EXHAUSTED for rates and totals) or a field error
// (INVALID_ARGUMENT, "config.volume: 4096 is out of range (allowed 8..512)") for request
// shapes. A unit test (tests/unit/common/request_limits_test.cc) holds docs/server.md's
// table to these numbers.
//
// Header-only constants; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/request_limits.h"

namespace medprof::server::limits {

// The request-shape limits the server shares with the CLI and the worker, so that server code
// names every limit as limits::kName.
using namespace ::medprof::limits;  // NOLINT(google-build-using-namespace)

// ---- transport
// Largest request message, bytes (GrpcServerOptions::max_receive_message_bytes default).
inline constexpr int kMaxRequestBytes = 16 << 20;
// Largest response message, bytes.
inline constexpr int kMaxResponseBytes = 64 << 20;

// ---- strings (characters); the request-shape ones are common/request_limits.h's
inline constexpr size_t kMaxTokenChars = 200;        // the authorization header's token
inline constexpr size_t kMaxProjectChars = 64;
inline constexpr size_t kMaxTokenNote = 200;

// ---- submissions
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
