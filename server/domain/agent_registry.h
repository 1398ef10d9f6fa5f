// AgentRegistry: agents register (same name = same agent id), and people list them.
//
// Register refuses agents speaking another protocol version (FAILED_PRECONDITION naming the
// version to run) and validates every field (INVALID_ARGUMENT naming it and its range).
// An agent is online while its last contact (registration, heartbeat, job request) is within
// three heartbeat intervals.
//
// Thread-safe; holds references into the DomainCore it is given.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "server/domain/call_context.h"
#include "server/domain/core.h"
#include "server/domain/types.h"

namespace medprof::server {

class AgentRegistry {
 public:
  explicit AgentRegistry(DomainCore& core) : core_(core) {}

  absl::StatusOr<RegisterAgentResult> Register(const CallContext& ctx, const RegisterAgentRequest& request);
  // Every registered agent, by name.
  absl::StatusOr<std::vector<AgentView>> ListAgents(const CallContext& ctx);

 private:
  DomainCore& core_;
};

// Checks a registration without touching the store (exposed for tests).
absl::Status ValidateRegistration(const RegisterAgentRequest& request);

}  // namespace medprof::server
