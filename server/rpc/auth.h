// Authentication and role checks of medprof-server's gRPC calls.
//
// Every handler starts with Authenticator::Authenticate(context, method): it reads the
// `authorization: Bearer <token>` metadata, verifies the token (server/domain/tokens.h; a
// verified token is trusted for limits::kTokenCacheTtl before the database is asked again),
// checks the token's role against the method (the table in auth.cc: MethodRoles()), and
// returns the CallContext the domain sees — project, all_projects, agent_name, token_id.
//
// Modes:
//   kTokens — every call needs a valid token whose role may call the method, else
//             UNAUTHENTICATED (no/unknown/revoked token) or PERMISSION_DENIED (wrong role);
//   kOff    — no token is asked for or checked: every caller is an unrestricted developer.
//             GrpcServer allows it only on a loopback listen address.
// Requests that name objects (studies, runs, agents) are checked against the context by
// the domain's AccessControl.
//
// Also the per-token rate limit of submissions (limits::kSubmissionsPerTokenPerMinute).
//
// Thread-safe.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "server/domain/call_context.h"
#include "server/domain/tokens.h"

namespace grpc {
class ServerContext;
}

namespace medprof::server::rpc {

enum class AuthMode { kOff, kTokens };

// "off" | "tokens".
absl::StatusOr<AuthMode> ParseAuthMode(absl::string_view text);
absl::string_view AuthModeName(AuthMode mode);

// The roles that may call `method` (the short method name, e.g. "SubmitStudy"); empty for a
// method nobody may call (not in the table: a new RPC is refused until it is listed).
std::vector<Role> MethodRoles(absl::string_view method);
// Every method in the table.
std::vector<std::string> AuthorizedMethods();
// PERMISSION_DENIED "<method>: role R may not call it (allowed: ...)".
absl::Status Authorize(const Principal& principal, absl::string_view method);

class Authenticator {
 public:
  // `tokens` must outlive the authenticator; it may be null in kOff mode.
  Authenticator(AuthMode mode, TokenService* tokens) : mode_(mode), tokens_(tokens) {}

  AuthMode mode() const { return mode_; }

  // The CallContext of an authorized call of `method`, or UNAUTHENTICATED / PERMISSION_DENIED.
  absl::StatusOr<CallContext> Authenticate(const grpc::ServerContext* context, absl::string_view method);

  // Same, from the raw authorization header value ("" when absent); for tests and fuzzing.
  absl::StatusOr<CallContext> AuthenticateHeader(absl::string_view authorization, absl::string_view method);

  // Counts one submission of the caller; RESOURCE_EXHAUSTED naming the limit when it is the
  // (kSubmissionsPerTokenPerMinute + 1)-th within a minute. Callers without a token (mode off)
  // are not limited.
  absl::Status CountSubmission(const CallContext& ctx);

  // Forgets cached verifications (tests; a revocation then applies at once).
  void ClearCache();

 private:
  struct Cached {
    Principal principal;
    std::chrono::steady_clock::time_point verified;
  };
  absl::StatusOr<Principal> Verify(absl::string_view token);

  const AuthMode mode_;
  TokenService* const tokens_;
  std::mutex mu_;
  std::map<std::string, Cached, std::less<>> cache_;  // by full token
  std::map<std::string, std::deque<std::chrono::steady_clock::time_point>> submissions_;  // by token id
};

}  // namespace medprof::server::rpc
