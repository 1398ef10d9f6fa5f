// AccessControl: what an authenticated caller may see and act on, decided on stored facts.
//
// The rpc layer checks the caller's role against the method (server/rpc/auth.h); this class
// checks the objects a request names against the caller's CallContext:
//   - a study (or a run, or a job) of another project is answered as if it did not exist
//     (NOT_FOUND with the same text as a missing one), so a lab cannot probe others' ids;
//   - an agent token acts only as its own agent: registering under another name, or using an
//     agent_id registered under another name, is PERMISSION_DENIED naming both names.
// A CallContext with all_projects and no agent_name (authentication off, admin "*") passes.
//
// Thread-safe; holds a reference to the DomainCore it is given.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "server/domain/call_context.h"
#include "server/domain/core.h"

namespace medprof::server {

class AccessControl {
 public:
  explicit AccessControl(DomainCore& core) : core_(core) {}

  // NOT_FOUND "study_id: no study 'X'" when the study is missing or belongs to another project.
  absl::Status CheckStudy(const CallContext& ctx, const std::string& study_id);
  // NOT_FOUND "run_id: no run 'X'" likewise, through the run's study.
  absl::Status CheckRun(const CallContext& ctx, const std::string& run_id);
  // NOT_FOUND "job_id: no job 'X'" likewise, through the job's study.
  absl::Status CheckJob(const CallContext& ctx, const std::string& job_id);
  // PERMISSION_DENIED when the caller is bound to an agent name other than `agent_name`.
  absl::Status CheckAgentName(const CallContext& ctx, const std::string& agent_name) const;
  // PERMISSION_DENIED when `agent_id` is registered under another name than the caller's;
  // NOT_FOUND "agent_id: ... register again" when it is not registered at all.
  absl::Status CheckAgentId(const CallContext& ctx, const std::string& agent_id);

  // True when a study of `project` is visible to the caller.
  static bool Sees(const CallContext& ctx, const std::string& project) {
    return ctx.all_projects || project == ctx.project;
  }

 private:
  DomainCore& core_;
};

}  // namespace medprof::server
