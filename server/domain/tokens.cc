#include "server/domain/tokens.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cctype>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/text_check.h"
#include "common/token_text.h"
#include "server/domain/limits.h"

namespace medprof::server {
namespace {

// The shape is defined once, in common/token_text.h (clients check it before sending).
constexpr absl::string_view kPrefix(token::kPrefix.data(), token::kPrefix.size());
constexpr size_t kIdHex = token::kIdHex;
constexpr size_t kSecretHex = token::kSecretHex;
constexpr size_t kSaltBytes = 16;

absl::StatusOr<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    return absl::InternalError("openssl: RAND_bytes failed (no entropy source?)");
  }
  return out;
}

absl::StatusOr<std::string> Sha256(absl::string_view salt, absl::string_view secret) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return absl::InternalError("openssl: EVP_MD_CTX_new failed");
  const bool ok = EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, salt.data(), salt.size()) == 1 &&
                  EVP_DigestUpdate(ctx, secret.data(), secret.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx, digest, &len) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) return absl::InternalError("openssl: SHA-256 digest failed");
  return std::string(reinterpret_cast<const char*>(digest), len);
}

bool IsLowerHex(absl::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool ValidProject(absl::string_view p) {
  if (p.empty() || p.size() > limits::kMaxProjectChars) return false;
  if (!std::isalnum(static_cast<unsigned char>(p[0]))) return false;
  for (char c : p) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kAdmin: return "admin";
    case Role::kSubmit: return "submit";
    case Role::kRead: return "read";
    case Role::kAgent: return "agent";
  }
  return "?";
}

absl::StatusOr<Role> ParseRole(absl::string_view text) {
  for (Role r : {Role::kAdmin, Role::kSubmit, Role::kRead, Role::kAgent}) {
    if (text == RoleName(r)) return r;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("role: '", text.substr(0, 32), "' is not a role (allowed admin|submit|read|agent)"));
}

absl::Status TokenGrant::Validate() const {
  if (project == "*") {
    if (role != Role::kAdmin) {
      return absl::InvalidArgumentError(absl::StrCat(
          "project: '*' (every project) is for admin tokens only; give a ", RoleName(role), " token one project"));
    }
  } else if (!ValidProject(project)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "project: '", project.substr(0, 80), "' is not a project name (1..", limits::kMaxProjectChars,
        " of a-z 0-9 . _ -, starting with a letter or digit; '*' = every project, admin only)"));
  }
  if (role == Role::kAgent) {
    if (agent_name.empty() || agent_name.size() > limits::kMaxAgentNameChars) {
      return absl::InvalidArgumentError(absl::StrCat("agent_name: an agent token needs the agent's name (1..",
                                                     limits::kMaxAgentNameChars, " characters), got ",
                                                     agent_name.size()));
    }
    for (char c : agent_name) {
      if (!std::isgraph(static_cast<unsigned char>(c))) {
        return absl::InvalidArgumentError("agent_name: printable characters without spaces only");
      }
    }
  } else if (!agent_name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("agent_name: only agent tokens name an agent (this one is ", RoleName(role), ")"));
  }
  MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(note, "note"));
  if (note.size() > limits::kMaxTokenNote) {
    return absl::InvalidArgumentError(
        absl::StrCat("note: ", note.size(), " characters (allowed at most ", limits::kMaxTokenNote, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::string, std::string>> SplitToken(absl::string_view token) {
  if (token.size() > limits::kMaxTokenChars) {
    return absl::InvalidArgumentError(absl::StrCat("token: ", token.size(),
                                                   " characters, longer than limit max_token_chars ",
                                                   limits::kMaxTokenChars));
  }
  MEDPROF_RETURN_IF_ERROR(token::CheckShape(std::string_view(token.data(), token.size()), "token"));
  const absl::string_view rest = token.substr(kPrefix.size());
  return std::make_pair(absl::StrCat("tok-", rest.substr(0, kIdHex)), std::string(rest.substr(kIdHex + 1)));
}

absl::StatusOr<CreatedToken> TokenService::Create(const TokenGrant& grant) {
  MEDPROF_RETURN_IF_ERROR(grant.Validate());
  MEDPROF_ASSIGN_OR_RETURN(std::string id_bytes, RandomBytes(kIdHex / 2));
  MEDPROF_ASSIGN_OR_RETURN(std::string secret_bytes, RandomBytes(kSecretHex / 2));
  MEDPROF_ASSIGN_OR_RETURN(std::string salt, RandomBytes(kSaltBytes));
  const std::string id_hex = absl::BytesToHexString(id_bytes);
  const std::string secret = absl::BytesToHexString(secret_bytes);
  MEDPROF_ASSIGN_OR_RETURN(std::string digest, Sha256(salt, secret));
  CreatedToken out;
  out.token = absl::StrCat(kPrefix, id_hex, "_", secret);
  TokenRecord& r = out.record;
  r.token_id = absl::StrCat("tok-", id_hex);
  r.salt = absl::BytesToHexString(salt);
  r.hash = absl::BytesToHexString(digest);
  r.role = std::string(RoleName(grant.role));
  r.project = grant.project;
  r.agent_name = grant.agent_name;
  r.note = grant.note;
  r.created_unix_ms = clock_.NowUnixMs();
  MEDPROF_RETURN_IF_ERROR(store_.Write([&](StoreTx& tx) { return tx.InsertToken(r); }));
  return out;
}

absl::StatusOr<std::vector<TokenRecord>> TokenService::List() {
  std::vector<TokenRecord> out;
  MEDPROF_RETURN_IF_ERROR(store_.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(out, tx.ListTokens());
    return absl::OkStatus();
  }));
  return out;
}

absl::Status TokenService::Revoke(const std::string& token_id) {
  bool found = false;
  const int64_t now = clock_.NowUnixMs();
  MEDPROF_RETURN_IF_ERROR(store_.Write([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(found, tx.RevokeToken(token_id, now));
    return absl::OkStatus();
  }));
  if (!found) return absl::NotFoundError(absl::StrCat("token_id: no token '", token_id.substr(0, 64), "'"));
  return absl::OkStatus();
}

absl::StatusOr<Principal> TokenService::Verify(absl::string_view token) {
  auto parts = SplitToken(token);
  if (!parts.ok()) return absl::UnauthenticatedError(parts.status().message());
  // Named copies, not a structured binding: clang 14 (the fuzz build) cannot capture those.
  const std::string token_id = parts->first;
  const std::string secret = parts->second;
  std::optional<TokenRecord> record;
  MEDPROF_RETURN_IF_ERROR(store_.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(record, tx.GetToken(token_id));
    return absl::OkStatus();
  }));
  if (!record.has_value()) return absl::UnauthenticatedError(absl::StrCat("token: unknown token id ", token_id));
  if (!IsLowerHex(record->salt) || !IsLowerHex(record->hash) || record->salt.size() % 2 != 0 ||
      record->hash.size() % 2 != 0) {
    return absl::InternalError(absl::StrCat("tokens: stored hash of ", token_id, " is not hex"));
  }
  const std::string salt = absl::HexStringToBytes(record->salt);
  const std::string expected = absl::HexStringToBytes(record->hash);
  MEDPROF_ASSIGN_OR_RETURN(std::string digest, Sha256(salt, secret));
  if (digest.size() != expected.size() || CRYPTO_memcmp(digest.data(), expected.data(), digest.size()) != 0) {
    return absl::UnauthenticatedError(absl::StrCat("token: wrong secret for token id ", token_id));
  }
  if (record->revoked_unix_ms != 0) {
    return absl::UnauthenticatedError(absl::StrCat("token: ", token_id, " was revoked"));
  }
  Principal p;
  p.token_id = record->token_id;
  MEDPROF_ASSIGN_OR_RETURN(p.role, ParseRole(record->role));
  p.project = record->project;
  p.agent_name = record->agent_name;
  return p;
}

}  // namespace medprof::server
