#include "server/rpc/convert.h"

#include <grpc/grpc_security_constants.h>
#include <grpcpp/security/auth_context.h>

#include <chrono>

namespace medprof::server::rpc {

CallContext MakeCallContext(const grpc::ServerContext* context) {
  CallContext c;
  c.peer = context->peer();
  const std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const auto& v : auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
      c.identity.assign(v.data(), v.size());
      break;
    }
  }
  const auto deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    const auto left = deadline - std::chrono::system_clock::now();
    c.deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
  }
  c.is_cancelled = [context] { return context->IsCancelled(); };
  return c;
}

// ---------------------------------------------------------------- enums

v1::JobState ToProto(JobState s) { return static_cast<v1::JobState>(static_cast<int>(s)); }
JobState FromProto(v1::JobState s) {
  return v1::JobState_IsValid(s) ? static_cast<JobState>(static_cast<int>(s)) : JobState::kUnspecified;
}
v1::RunState ToProto(RunState s) { return static_cast<v1::RunState>(static_cast<int>(s)); }
RunState FromProto(v1::RunState s) {
  return v1::RunState_IsValid(s) ? static_cast<RunState>(static_cast<int>(s)) : RunState::kUnspecified;
}
v1::StudyState ToProto(StudyState s) { return static_cast<v1::StudyState>(static_cast<int>(s)); }

// The numbering is shared on purpose (records.h); a drift would be caught here.
static_assert(static_cast<int>(JobState::kCancelled) == v1::JOB_CANCELLED);
static_assert(static_cast<int>(RunState::kLost) == v1::RUN_LOST);
static_assert(static_cast<int>(RunState::kCancelled) == v1::RUN_CANCELLED);
static_assert(static_cast<int>(StudyState::kCancelled) == v1::STUDY_CANCELLED);

// ---------------------------------------------------------------- agents

v1::Device ToProto(const DeviceRecord& d) {
  v1::Device p;
  p.set_index(d.index);
  p.set_kind(d.kind);
  p.set_name(d.name);
  p.set_uuid(d.uuid);
  p.set_compute_capability(d.compute_capability);
  p.set_memory_bytes(d.memory_bytes);
  p.set_driver_version(d.driver_version);
  p.set_cuda_driver_version(d.cuda_driver_version);
  p.set_mig_enabled(d.mig_enabled);
  p.set_ecc_enabled(d.ecc_enabled);
  p.set_counters_admin_only(d.counters_admin_only);
  p.set_sm_count(d.sm_count);
  return p;
}

DeviceRecord FromProto(const v1::Device& p) {
  DeviceRecord d;
  d.index = p.index();
  d.kind = p.kind();
  d.name = p.name();
  d.uuid = p.uuid();
  d.compute_capability = p.compute_capability();
  d.memory_bytes = p.memory_bytes();
  d.driver_version = p.driver_version();
  d.cuda_driver_version = p.cuda_driver_version();
  d.mig_enabled = p.mig_enabled();
  d.ecc_enabled = p.ecc_enabled();
  d.counters_admin_only = p.counters_admin_only();
  d.sm_count = p.sm_count();
  return d;
}

RegisterAgentRequest FromProto(const v1::RegisterRequest& p) {
  RegisterAgentRequest r;
  r.protocol_version = static_cast<int>(p.protocol_version());
  r.agent_name = p.agent_name();
  r.host = p.host();
  r.version = p.version();
  for (const v1::Device& d : p.devices()) r.devices.push_back(FromProto(d));
  r.labels.insert(p.labels().begin(), p.labels().end());
  r.max_concurrent_jobs = p.max_concurrent_jobs();
  return r;
}

v1::RegisterResponse ToProto(const RegisterAgentResult& r) {
  v1::RegisterResponse p;
  p.set_agent_id(r.agent_id);
  p.set_heartbeat_interval_ms(r.heartbeat_interval_ms);
  p.set_lease_ttl_ms(r.lease_ttl_ms);
  p.set_server_version(r.server_version);
  return p;
}

v1::Agent ToProto(const AgentView& a) {
  v1::Agent p;
  p.set_agent_id(a.record.agent_id);
  p.set_name(a.record.name);
  p.set_host(a.record.host);
  p.set_version(a.record.version);
  for (const DeviceRecord& d : a.record.devices) *p.add_devices() = ToProto(d);
  p.mutable_labels()->insert(a.record.labels.begin(), a.record.labels.end());
  p.set_online(a.online);
  p.set_last_seen_unix_ms(a.record.last_seen_unix_ms);
  p.set_running_jobs(a.running_jobs);
  return p;
}

// ---------------------------------------------------------------- scheduling

HeartbeatRequest FromProto(const v1::HeartbeatRequest& p) {
  HeartbeatRequest r;
  r.agent_id = p.agent_id();
  r.running_run_ids.assign(p.running_run_ids().begin(), p.running_run_ids().end());
  for (const v1::RunProgress& rp : p.progress()) r.progress.emplace_back(rp.run_id(), rp.progress());
  r.draining = p.draining();
  return r;
}

v1::HeartbeatResponse ToProto(const HeartbeatResult& r) {
  v1::HeartbeatResponse p;
  for (const std::string& id : r.cancel_run_ids) p.add_cancel_run_ids(id);
  for (const std::string& id : r.unknown_run_ids) p.add_unknown_run_ids(id);
  return p;
}

AcquireJobRequest FromProto(const v1::AcquireJobRequest& p) {
  AcquireJobRequest r;
  r.agent_id = p.agent_id();
  r.free_device_indexes.assign(p.free_device_indexes().begin(), p.free_device_indexes().end());
  r.wait_ms = p.wait_ms();
  return r;
}

v1::Assignment ToProto(const Assignment& a) {
  v1::Assignment p;
  p.set_run_id(a.run_id);
  p.set_job_id(a.job_id);
  p.set_study_id(a.study_id);
  p.set_attempt(a.attempt);
  *p.mutable_config() = a.config;
  p.set_device_index(a.device_index);
  p.set_timeout_s(a.timeout_s);
  p.set_lease_ttl_ms(a.lease_ttl_ms);
  return p;
}

ResultChunk FromProto(const v1::ResultChunk& p) {
  return ResultChunk{p.run_id(), p.agent_id(), p.seq(), p.message()};
}

ResultChunk FromProto(v1::ResultChunk&& p) {
  ResultChunk c{p.run_id(), p.agent_id(), p.seq(), {}};
  c.message.Swap(p.mutable_message());
  return c;
}

v1::UploadAck ToProto(const CommittedThrough& c) {
  v1::UploadAck p;
  p.mutable_committed_through_seq()->insert(c.begin(), c.end());
  return p;
}

FinishRunRequest FromProto(const v1::FinishRunRequest& p) {
  FinishRunRequest r;
  r.agent_id = p.agent_id();
  r.run_id = p.run_id();
  r.state = FromProto(p.state());
  r.error = p.error();
  r.stderr_tail = p.stderr_tail();
  r.last_seq = p.last_seq();
  r.exit_code = p.exit_code();
  if (p.has_agent_environment()) r.agent_environment = p.agent_environment();
  return r;
}

// ---------------------------------------------------------------- studies and runs

SubmitStudyRequest FromProto(const v1::SubmitStudyRequest& p) {
  SubmitStudyRequest r;
  r.name = p.name();
  r.presets.assign(p.presets().begin(), p.presets().end());
  r.config = p.config();
  r.targets.assign(p.targets().begin(), p.targets().end());
  r.repeats = p.repeats();
  r.max_attempts = p.max_attempts();
  r.timeout_s = p.timeout_s();
  return r;
}

v1::SubmitStudyResponse ToProto(const SubmitStudyResult& r) {
  v1::SubmitStudyResponse p;
  p.set_study_id(r.study_id);
  for (const JobView& j : r.jobs) *p.add_jobs() = ToProto(j);
  for (const std::string& w : r.warnings) p.add_warnings(w);
  return p;
}

v1::Job ToProto(const JobView& j) {
  v1::Job p;
  const JobRecord& r = j.record;
  p.set_job_id(r.job_id);
  p.set_study_id(r.study_id);
  p.set_preset(r.preset);
  p.set_target(r.target);
  p.set_repeat(r.repeat);
  p.set_state(ToProto(r.state));
  p.set_attempts(r.attempts);
  p.set_max_attempts(r.max_attempts);
  p.set_error(r.error);
  *p.mutable_config() = j.config;
  p.set_current_run_id(r.current_run_id);
  if (j.last_progress.has_value()) *p.mutable_last_progress() = *j.last_progress;
  p.set_created_unix_ms(r.created_unix_ms);
  p.set_updated_unix_ms(r.updated_unix_ms);
  return p;
}

v1::Study ToProto(const StudyView& s) {
  v1::Study p;
  p.set_study_id(s.record.study_id);
  p.set_name(s.record.name);
  p.set_state(ToProto(s.state));
  for (const JobView& j : s.jobs) *p.add_jobs() = ToProto(j);
  p.set_created_unix_ms(s.record.created_unix_ms);
  p.set_project(s.record.project);
  p.set_jobs_total(s.counts.total);
  p.set_jobs_done(s.counts.done());
  return p;
}

ListStudiesRequest FromProto(const v1::ListStudiesRequest& p) {
  ListStudiesRequest r;
  r.limit = p.limit();
  r.page_token = p.page_token();
  return r;
}

v1::ListStudiesResponse ToProto(const ListStudiesResult& r) {
  v1::ListStudiesResponse p;
  for (const StudyView& s : r.studies) *p.add_studies() = ToProto(s);
  p.set_next_page_token(r.next_page_token);
  return p;
}

v1::StudyEvent ToProto(const StudyEvent& e) {
  v1::StudyEvent p;
  p.set_event_id(e.record.event_id);
  p.set_study_id(e.record.study_id);
  p.set_job_id(e.record.job_id);
  p.set_run_id(e.record.run_id);
  p.set_job_state(ToProto(e.record.job_state));
  if (e.progress.has_value()) *p.mutable_progress() = *e.progress;
  p.set_message(e.record.message);
  p.set_unix_ms(e.record.unix_ms);
  p.set_study_finished(e.record.study_finished);
  return p;
}

ListRunsRequest FromProto(const v1::ListRunsRequest& p) {
  ListRunsRequest r;
  r.study_id = p.study_id();
  r.job_id = p.job_id();
  r.limit = p.limit();
  return r;
}

v1::StepTiming ToProto(const StepRow& s) {
  v1::StepTiming p;
  p.set_phase(static_cast<v1::Phase>(s.phase));
  p.set_step(s.step);
  p.set_wall_ns(s.wall_ns);
  p.set_device_ns(s.device_ns);
  p.set_loss(s.loss);
  for (const auto& [k, v] : s.phase_ns) (*p.mutable_phase_ns())[k] = v;
  return p;
}

v1::OpStat ToProto(const OpRow& o) {
  v1::OpStat p;
  p.set_name(o.name);
  p.set_phase(o.phase);
  p.set_category(o.category);
  p.set_count(o.count);
  p.set_total_ns(o.total_ns);
  p.set_self_ns(o.self_ns);
  return p;
}

v1::KernelStat ToProto(const KernelRow& k) {
  v1::KernelStat p;
  p.set_name(k.name);
  p.set_op(k.op);
  p.set_phase(k.phase);
  p.set_category(k.category);
  p.set_count(k.count);
  p.set_total_ns(k.total_ns);
  p.set_min_ns(k.min_ns);
  p.set_max_ns(k.max_ns);
  for (int g : k.grid) p.add_grid(g);
  for (int b : k.block) p.add_block(b);
  p.set_registers(k.registers);
  p.set_shared_bytes(k.shared_bytes);
  p.set_theoretical_occupancy(k.theoretical_occupancy);
  return p;
}

v1::MetricValue ToProto(const MetricRow& m) {
  v1::MetricValue p;
  p.set_scope(m.scope);
  p.set_name(m.name);
  p.set_value(m.value);
  p.set_unit(m.unit);
  return p;
}

v1::Run ToProto(const RunView& v) {
  v1::Run p;
  const RunRecord& r = v.record;
  p.set_run_id(r.run_id);
  p.set_job_id(r.job_id);
  p.set_study_id(r.study_id);
  p.set_agent_id(r.agent_id);
  p.set_attempt(r.attempt);
  p.set_state(ToProto(r.state));
  p.set_preset(v.preset);
  p.set_gpu(r.gpu_name);
  p.set_error(r.error);
  p.set_stderr_tail(r.stderr_tail);
  *p.mutable_effective() = v.effective;
  *p.mutable_environment() = v.environment;
  if (v.summary.has_value()) *p.mutable_summary() = *v.summary;
  for (const StepRow& s : v.steps) *p.add_steps() = ToProto(s);
  for (const OpRow& o : v.ops) *p.add_ops() = ToProto(o);
  for (const KernelRow& k : v.kernels) *p.add_kernels() = ToProto(k);
  for (const MetricRow& m : v.metrics) *p.add_metrics() = ToProto(m);
  p.set_started_unix_ms(r.started_unix_ms);
  p.set_finished_unix_ms(r.finished_unix_ms);
  p.set_parameters(r.parameters);
  return p;
}

}  // namespace medprof::server::rpc
