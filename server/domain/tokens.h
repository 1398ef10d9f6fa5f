// Bearer tokens: creation, listing, revocation and verification, over the Store.
//
// A token reads `mpt_<12 hex id>_<64 hex secret>`. The id is public (it names the token in
// `medprof-server token list|revoke` and in logs); the secret is 32 bytes from OpenSSL's
// RAND_bytes and is shown once, at creation. The store keeps only a random 16-byte salt and
// SHA-256(salt || secret): a 256-bit random secret needs no key stretching (PBKDF2 guards
// low-entropy passwords), and one SHA-256 keeps verification cheap enough for every call of
// a thousand agents. Comparison is constant-time.
//
// Each token has one role and one project:
//   admin  — every people-facing call, in its project; project "*" = every project
//   submit — submit and cancel studies, and everything `read` may do, in its project
//   read   — read studies, runs, comparisons and agents of its project
//   agent  — only the agent calls, and only as the agent named at creation
//
// Thread-safe (the Store serializes transactions).
#pragma once

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "server/store/store.h"

namespace medprof::server {

enum class Role { kAdmin, kSubmit, kRead, kAgent };

// "admin", "submit", "read", "agent".
absl::string_view RoleName(Role role);
// INVALID_ARGUMENT naming the allowed roles.
absl::StatusOr<Role> ParseRole(absl::string_view text);

// What a token may do. Field rules (Validate): project 1..64 of [a-z0-9._-] starting with a
// letter or digit, or "*" for admin only; agent_name required for (and only for) the agent
// role, 1..128 printable characters without spaces; note at most 200 characters.
struct TokenGrant {
  Role role = Role::kRead;
  std::string project;
  std::string agent_name;
  std::string note;

  absl::Status Validate() const;
};

// The identity a verified token carries.
struct Principal {
  std::string token_id;
  Role role = Role::kRead;
  std::string project;     // "*" = every project (admin)
  std::string agent_name;  // agent role only
};

struct CreatedToken {
  TokenRecord record;
  std::string token;  // the full secret token; shown once, never stored
};

class TokenService {
 public:
  TokenService(Store& store, const Clock& clock) : store_(store), clock_(clock) {}

  absl::StatusOr<CreatedToken> Create(const TokenGrant& grant);
  absl::StatusOr<std::vector<TokenRecord>> List();
  // NOT_FOUND naming the id; revoking a revoked token again is OK.
  absl::Status Revoke(const std::string& token_id);
  // UNAUTHENTICATED for a malformed, unknown, wrong or revoked token (the message says which,
  // without echoing the secret).
  absl::StatusOr<Principal> Verify(absl::string_view token);

 private:
  Store& store_;
  const Clock& clock_;
};

// Splits "mpt_<id>_<secret>" into ("tok-<id>", secret); INVALID_ARGUMENT when malformed.
absl::StatusOr<std::pair<std::string, std::string>> SplitToken(absl::string_view token);

}  // namespace medprof::server
