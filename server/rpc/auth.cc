#include "server/rpc/auth.h"

#include <grpcpp/server_context.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "server/domain/limits.h"
#include "server/rpc/convert.h"

namespace medprof::server::rpc {
namespace {

constexpr Role kPeople[] = {Role::kAdmin, Role::kSubmit, Role::kRead};
constexpr Role kWriters[] = {Role::kAdmin, Role::kSubmit};
constexpr Role kAgents[] = {Role::kAgent};
constexpr Role kAdmins[] = {Role::kAdmin};

struct MethodRule {
  const char* method;
  std::vector<Role> roles;
};

// Who may call what. Agents are shared by every project, so people of any role may list
// them; only the agent role may call AgentService, and only as its own agent (AccessControl).
const std::vector<MethodRule>& Rules() {
  static const std::vector<MethodRule> rules = {
      // MedprofService: reading
      {"GetStudy", {std::begin(kPeople), std::end(kPeople)}},
      {"ListStudies", {std::begin(kPeople), std::end(kPeople)}},
      {"WatchStudy", {std::begin(kPeople), std::end(kPeople)}},
      {"ListRuns", {std::begin(kPeople), std::end(kPeople)}},
      {"GetRun", {std::begin(kPeople), std::end(kPeople)}},
      {"Compare", {std::begin(kPeople), std::end(kPeople)}},
      {"ListAgents", {std::begin(kPeople), std::end(kPeople)}},
      {"ListKernels", {std::begin(kPeople), std::end(kPeople)}},
      {"DiffRuns", {std::begin(kPeople), std::end(kPeople)}},
      {"GetTimeline", {std::begin(kPeople), std::end(kPeople)}},
      // MedprofService: changing
      {"SubmitStudy", {std::begin(kWriters), std::end(kWriters)}},
      {"CancelStudy", {std::begin(kWriters), std::end(kWriters)}},
      {"ImportRun", {std::begin(kWriters), std::end(kWriters)}},
      {"UploadRun", {std::begin(kWriters), std::end(kWriters)}},
      // ModelService (proto/medprof/v1/models.proto)
      {"ListModels", {std::begin(kPeople), std::end(kPeople)}},
      {"HasModel", {std::begin(kWriters), std::end(kWriters)}},
      {"UploadModel", {std::begin(kWriters), std::end(kWriters)}},
      {"DeleteModel", {std::begin(kAdmins), std::end(kAdmins)}},
      {"FetchModel", {std::begin(kAgents), std::end(kAgents)}},
      // AgentService
      {"Register", {std::begin(kAgents), std::end(kAgents)}},
      {"Heartbeat", {std::begin(kAgents), std::end(kAgents)}},
      {"AcquireJob", {std::begin(kAgents), std::end(kAgents)}},
      {"UploadResults", {std::begin(kAgents), std::end(kAgents)}},
      {"FinishRun", {std::begin(kAgents), std::end(kAgents)}},
  };
  return rules;
}

std::string RoleList(const std::vector<Role>& roles) {
  std::vector<std::string> names;
  for (Role r : roles) names.emplace_back(RoleName(r));
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<AuthMode> ParseAuthMode(absl::string_view text) {
  if (text == "off") return AuthMode::kOff;
  if (text == "tokens") return AuthMode::kTokens;
  return absl::InvalidArgumentError(
      absl::StrCat("--auth '", text.substr(0, 32), "' is not a mode (allowed tokens|off; off on loopback only)"));
}

absl::string_view AuthModeName(AuthMode mode) { return mode == AuthMode::kOff ? "off" : "tokens"; }

std::vector<Role> MethodRoles(absl::string_view method) {
  for (const MethodRule& r : Rules()) {
    if (method == r.method) return r.roles;
  }
  return {};
}

std::vector<std::string> AuthorizedMethods() {
  std::vector<std::string> out;
  for (const MethodRule& r : Rules()) out.emplace_back(r.method);
  return out;
}

absl::Status Authorize(const Principal& principal, absl::string_view method) {
  const std::vector<Role> roles = MethodRoles(method);
  for (Role r : roles) {
    if (r == principal.role) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(method, ": a ", RoleName(principal.role), " token (",
                                                  principal.token_id, ") may not call it (allowed roles: ",
                                                  RoleList(roles), ")"));
}

absl::StatusOr<Principal> Authenticator::Verify(absl::string_view token) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(token);
    if (it != cache_.end()) {
      if (now - it->second.verified < limits::kTokenCacheTtl) return it->second.principal;
      cache_.erase(it);
    }
  }
  if (tokens_ == nullptr) return absl::InternalError("authentication: no token service");
  MEDPROF_ASSIGN_OR_RETURN(Principal p, tokens_->Verify(token));
  std::lock_guard<std::mutex> lock(mu_);
  // Bounded: a flood of distinct valid tokens cannot grow the cache past what exists in the
  // database, but drop everything now and then anyway.
  if (cache_.size() > 100000) cache_.clear();
  cache_[std::string(token)] = Cached{p, now};
  return p;
}

absl::StatusOr<CallContext> Authenticator::AuthenticateHeader(absl::string_view authorization,
                                                             absl::string_view method) {
  CallContext ctx;
  if (mode_ == AuthMode::kOff) return ctx;
  if (authorization.empty()) {
    return absl::UnauthenticatedError(absl::StrCat(
        method, ": no bearer token (send 'authorization: Bearer <token>'; the CLI reads MEDPROF_TOKEN or "
                "MEDPROF_TOKEN_FILE, the agent --token-file or MEDPROF_TOKEN)"));
  }
  constexpr absl::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() ||
      !absl::EqualsIgnoreCase(authorization.substr(0, kBearer.size()), kBearer)) {
    return absl::UnauthenticatedError(
        absl::StrCat(method, ": authorization: expected 'Bearer <token>'"));
  }
  const absl::string_view token = absl::StripAsciiWhitespace(authorization.substr(kBearer.size()));
  auto principal = Verify(token);
  if (!principal.ok()) {
    return absl::Status(principal.status().code(), absl::StrCat(method, ": ", principal.status().message()));
  }
  MEDPROF_RETURN_IF_ERROR(Authorize(*principal, method));
  ctx.token_id = principal->token_id;
  ctx.agent_name = principal->agent_name;
  if (principal->project == "*") {
    ctx.all_projects = true;
    ctx.project = "default";
  } else {
    ctx.all_projects = false;
    ctx.project = principal->project;
  }
  return ctx;
}

absl::StatusOr<CallContext> Authenticator::Authenticate(const grpc::ServerContext* context,
                                                       absl::string_view method) {
  absl::string_view header;
  const auto& md = context->client_metadata();
  if (auto it = md.find("authorization"); it != md.end()) header = absl::string_view(it->second.data(), it->second.size());
  MEDPROF_ASSIGN_OR_RETURN(CallContext auth, AuthenticateHeader(header, method));
  CallContext ctx = MakeCallContext(context);
  ctx.project = std::move(auth.project);
  ctx.all_projects = auth.all_projects;
  ctx.agent_name = std::move(auth.agent_name);
  ctx.token_id = std::move(auth.token_id);
  return ctx;
}

absl::Status Authenticator::CountSubmission(const CallContext& ctx) {
  if (ctx.token_id.empty()) return absl::OkStatus();
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  auto& times = submissions_[ctx.token_id];
  while (!times.empty() && now - times.front() >= std::chrono::minutes(1)) times.pop_front();
  if (static_cast<int>(times.size()) >= limits::kSubmissionsPerTokenPerMinute) {
    return limits::LimitExceeded("submissions_per_token_per_minute",
                                 absl::StrCat(times.size() + 1, " submissions by ", ctx.token_id,
                                              " within a minute; retry later"),
                                 limits::kSubmissionsPerTokenPerMinute);
  }
  times.push_back(now);
  return absl::OkStatus();
}

void Authenticator::ClearCache() {
  std::lock_guard<std::mutex> lock(mu_);
  cache_.clear();
}

}  // namespace medprof::server::rpc
