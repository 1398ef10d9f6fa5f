#include "server/domain/access.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace medprof::server {
namespace {

absl::Status NoSuch(const char* field, const char* what, const std::string& id) {
  return absl::NotFoundError(absl::StrCat(field, ": no ", what, " '", id.substr(0, 64), "'"));
}

}  // namespace

absl::Status AccessControl::CheckStudy(const CallContext& ctx, const std::string& study_id) {
  if (ctx.all_projects) return absl::OkStatus();
  std::optional<StudyRecord> study;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(study, tx.GetStudy(study_id));
    return absl::OkStatus();
  }));
  if (!study.has_value() || !Sees(ctx, study->project)) return NoSuch("study_id", "study", study_id);
  return absl::OkStatus();
}

absl::Status AccessControl::CheckRun(const CallContext& ctx, const std::string& run_id) {
  if (ctx.all_projects) return absl::OkStatus();
  bool visible = false;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(std::optional<RunRecord> run, tx.GetRun(run_id));
    if (!run.has_value()) return absl::OkStatus();
    MEDPROF_ASSIGN_OR_RETURN(std::optional<StudyRecord> study, tx.GetStudy(run->study_id));
    visible = study.has_value() && Sees(ctx, study->project);
    return absl::OkStatus();
  }));
  return visible ? absl::OkStatus() : NoSuch("run_id", "run", run_id);
}

absl::Status AccessControl::CheckJob(const CallContext& ctx, const std::string& job_id) {
  if (ctx.all_projects) return absl::OkStatus();
  bool visible = false;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(std::optional<JobRecord> job, tx.GetJob(job_id));
    if (!job.has_value()) return absl::OkStatus();
    MEDPROF_ASSIGN_OR_RETURN(std::optional<StudyRecord> study, tx.GetStudy(job->study_id));
    visible = study.has_value() && Sees(ctx, study->project);
    return absl::OkStatus();
  }));
  return visible ? absl::OkStatus() : NoSuch("job_id", "job", job_id);
}

absl::Status AccessControl::CheckAgentName(const CallContext& ctx, const std::string& agent_name) const {
  if (ctx.agent_name.empty() || ctx.agent_name == agent_name) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("agent_name: this token acts only as agent '", ctx.agent_name,
                                                  "', not '", agent_name.substr(0, 128), "'"));
}

absl::Status AccessControl::CheckAgentId(const CallContext& ctx, const std::string& agent_id) {
  if (ctx.agent_name.empty()) return absl::OkStatus();
  std::optional<AgentRecord> agent;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(agent, tx.GetAgent(agent_id));
    return absl::OkStatus();
  }));
  if (!agent.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("agent_id: no agent '", agent_id.substr(0, 64), "' is registered (register again)"));
  }
  if (agent->name != ctx.agent_name) {
    return absl::PermissionDeniedError(absl::StrCat("agent_id: ", agent_id, " is agent '", agent->name,
                                                    "'; this token acts only as agent '", ctx.agent_name, "'"));
  }
  return absl::OkStatus();
}

}  // namespace medprof::server
