#include "server/domain/agent_registry.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/request_limits.h"
#include "common/status.h"
#include "common/text_check.h"
#include "common/version.h"
#include "server/domain/codec.h"

namespace medprof::server {
namespace {

const Logger kLog("agents");

bool PrintableNoSpace(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return c > 0x20 && c < 0x7f; });
}

bool ValidLabelKey(const std::string& k) {
  if (k.empty() || k.size() > 64) return false;
  return std::all_of(k.begin(), k.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-' || c == '.'; });
}

absl::Status Invalid(const std::string& msg) { return absl::InvalidArgumentError(msg); }

}  // namespace

absl::Status ValidateRegistration(const RegisterAgentRequest& r) {
  if (r.protocol_version != kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "protocol_version: the agent speaks protocol ", r.protocol_version, " but this server (medprof-server ",
        kVersionLine, ") speaks protocol ", kProtocolVersion, ": run a medprof-agent whose --version says protocol ",
        kProtocolVersion));
  }
  // Before the check below, which quotes the name.
  MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(r.agent_name, "agent_name"));
  MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(r.host, "host"));
  MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(r.version, "version"));
  if (r.agent_name.empty() || r.agent_name.size() > limits::kMaxAgentNameChars || !PrintableNoSpace(r.agent_name)) {
    return Invalid(absl::StrCat("agent_name: '", r.agent_name.substr(0, 140),
                                "' is not valid (allowed 1..", limits::kMaxAgentNameChars,
                                " printable characters without spaces)"));
  }
  if (r.host.size() > 255) return Invalid(absl::StrCat("host: ", r.host.size(), " characters (allowed at most 255)"));
  if (r.version.size() > 128) {
    return Invalid(absl::StrCat("version: ", r.version.size(), " characters (allowed at most 128)"));
  }
  if (r.devices.empty() || r.devices.size() > 64) {
    return Invalid(absl::StrCat("devices: ", r.devices.size(),
                                " devices (allowed 1..64; an agent without a GPU registers its CPU device, "
                                "kind \"cpu\", index -1)"));
  }
  std::set<int> seen;
  for (size_t i = 0; i < r.devices.size(); ++i) {
    const DeviceRecord& d = r.devices[i];
    const std::string field = absl::StrCat("devices[", i, "]");
    if (d.kind == "cuda") {
      if (d.index < 0 || d.index > 63) {
        return Invalid(absl::StrCat(field, ".index: ", d.index, " is out of range for a cuda device (allowed 0..63)"));
      }
    } else if (d.kind == "cpu") {
      if (d.index != -1) return Invalid(absl::StrCat(field, ".index: ", d.index, " (the cpu device has index -1)"));
    } else {
      return Invalid(absl::StrCat(field, ".kind: '", d.kind, "' is not a device kind (allowed cuda|cpu)"));
    }
    if (!seen.insert(d.index).second) {
      return Invalid(absl::StrCat(field, ".index: ", d.index, " is listed twice (each device once)"));
    }
    if (d.name.size() > 256) return Invalid(absl::StrCat(field, ".name: longer than 256 characters"));
    MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(d.name, absl::StrCat(field, ".name")));
    MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(d.compute_capability, absl::StrCat(field, ".compute_capability")));
    if (d.compute_capability.size() > 16) {
      return Invalid(absl::StrCat(field, ".compute_capability: longer than 16 characters"));
    }
  }
  if (r.labels.size() > 64) return Invalid(absl::StrCat("labels: ", r.labels.size(), " labels (allowed at most 64)"));
  for (const auto& [k, v] : r.labels) {
    if (!ValidLabelKey(k)) {
      return Invalid(absl::StrCat("labels: key '", k.substr(0, 80),
                                  "' is not valid (allowed 1..64 characters: letters, digits, '_', '-', '.')"));
    }
    if (v.size() > 256) return Invalid(absl::StrCat("labels[", k, "]: value longer than 256 characters"));
    MEDPROF_RETURN_IF_ERROR(text::CheckNoControl(v, absl::StrCat("labels[", k, "]")));
  }
  if (r.max_concurrent_jobs < 0 || r.max_concurrent_jobs > 64) {
    return Invalid(absl::StrCat("max_concurrent_jobs: ", r.max_concurrent_jobs,
                                " is out of range (allowed 1..64; 0 = 1)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<RegisterAgentResult> AgentRegistry::Register(const CallContext& ctx,
                                                            const RegisterAgentRequest& r) {
  MEDPROF_RETURN_IF_ERROR(ValidateRegistration(r));
  const int64_t now = core_.clock.NowUnixMs();
  AgentRecord a;
  bool known = false;
  MEDPROF_RETURN_IF_ERROR(core_.store.Write([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(std::optional<AgentRecord> existing, tx.FindAgentByName(r.agent_name));
    known = existing.has_value();
    a.agent_id = known ? existing->agent_id : NewId("agent");
    a.name = r.agent_name;
    a.host = r.host;
    a.version = r.version;
    a.devices = r.devices;
    a.labels = r.labels;
    a.max_concurrent_jobs = r.max_concurrent_jobs == 0 ? 1 : r.max_concurrent_jobs;
    a.draining = false;
    a.registered_unix_ms = now;
    a.last_seen_unix_ms = now;
    return tx.PutAgent(a);
  }));
  kLog.Info("agent {} {} as {} (host {}, {} device(s), version {}, from {})", a.name,
            known ? "re-registered" : "registered", a.agent_id, a.host, a.devices.size(), a.version, ctx.peer);
  core_.work.Notify();  // a new agent may match queued jobs
  RegisterAgentResult out;
  out.agent_id = a.agent_id;
  out.heartbeat_interval_ms = core_.options.heartbeat_interval_ms;
  out.lease_ttl_ms = core_.options.lease_ttl_ms;
  out.server_version = absl::StrCat("medprof-server ", kVersionLine);
  return out;
}

absl::StatusOr<std::vector<AgentView>> AgentRegistry::ListAgents(const CallContext&) {
  const int64_t now = core_.clock.NowUnixMs();
  std::vector<AgentView> out;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(std::vector<AgentRecord> agents, tx.ListAgents());
    for (AgentRecord& a : agents) {
      AgentView v;
      MEDPROF_ASSIGN_OR_RETURN(std::vector<RunRecord> running, RunningRunsOf(tx, a.agent_id));
      v.running_jobs = static_cast<int>(running.size());
      v.online = now - a.last_seen_unix_ms <= 3 * core_.options.heartbeat_interval_ms;
      v.record = std::move(a);
      out.push_back(std::move(v));
    }
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace medprof::server
