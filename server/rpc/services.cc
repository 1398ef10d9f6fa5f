#include "server/rpc/services.h"

#include <set>
#include <vector>

#include "common/status.h"
#include "server/rpc/convert.h"
#include "server/rpc/handle.h"
#include "server/rpc/import_convert.h"
#include "server/rpc/status_mapping.h"

namespace medprof::server::rpc {

// ---------------------------------------------------------------- MedprofService

grpc::Status MedprofServiceImpl::SubmitStudy(grpc::ServerContext* ctx, const v1::SubmitStudyRequest* req,
                                             v1::SubmitStudyResponse* resp) {
  return Handle(
      auth_, ctx, "SubmitStudy",
      [&](const CallContext& call) -> absl::StatusOr<SubmitStudyResult> {
        MEDPROF_RETURN_IF_ERROR(auth_.CountSubmission(call));
        if (req->config().has_model()) MEDPROF_RETURN_IF_ERROR(domain_.models().CheckReference(call, req->config().model()));
        return domain_.studies().SubmitStudy(call, FromProto(*req));
      },
      [](const SubmitStudyResult& r) { return ToProto(r); }, resp);
}

grpc::Status MedprofServiceImpl::GetStudy(grpc::ServerContext* ctx, const v1::GetStudyRequest* req, v1::Study* resp) {
  return Handle(
      auth_, ctx, "GetStudy",
      [&](const CallContext& call) -> absl::StatusOr<StudyView> {
        MEDPROF_RETURN_IF_ERROR(domain_.access().CheckStudy(call, req->study_id()));
        return domain_.studies().GetStudy(call, req->study_id());
      },
      [](const StudyView& s) { return ToProto(s); }, resp);
}

grpc::Status MedprofServiceImpl::ListStudies(grpc::ServerContext* ctx, const v1::ListStudiesRequest* req,
                                             v1::ListStudiesResponse* resp) {
  return Handle(
      auth_, ctx, "ListStudies",
      [&](const CallContext& call) { return domain_.studies().ListStudies(call, FromProto(*req)); },
      [](const ListStudiesResult& r) { return ToProto(r); }, resp);
}

grpc::Status MedprofServiceImpl::WatchStudy(grpc::ServerContext* ctx, const v1::WatchStudyRequest* req,
                                            grpc::ServerWriter<v1::StudyEvent>* writer) {
  absl::StatusOr<CallContext> call = auth_.Authenticate(ctx, "WatchStudy");
  if (!call.ok()) return ToGrpcStatus(call.status(), "WatchStudy");
  absl::Status s = domain_.access().CheckStudy(*call, req->study_id());
  if (s.ok()) {
    s = domain_.studies().WatchStudy(*call, req->study_id(),
                                     [writer](const StudyEvent& e) { return writer->Write(ToProto(e)); });
  }
  return ToGrpcStatus(s, "WatchStudy");
}

grpc::Status MedprofServiceImpl::CancelStudy(grpc::ServerContext* ctx, const v1::CancelStudyRequest* req,
                                             v1::CancelStudyResponse* resp) {
  return Handle(
      auth_, ctx, "CancelStudy",
      [&](const CallContext& call) -> absl::StatusOr<int> {
        MEDPROF_RETURN_IF_ERROR(domain_.access().CheckStudy(call, req->study_id()));
        return domain_.studies().CancelStudy(call, req->study_id(), req->reason());
      },
      [](int n) {
        v1::CancelStudyResponse r;
        r.set_jobs_cancelled(n);
        return r;
      },
      resp);
}

grpc::Status MedprofServiceImpl::ListRuns(grpc::ServerContext* ctx, const v1::ListRunsRequest* req,
                                          v1::ListRunsResponse* resp) {
  return Handle(
      auth_, ctx, "ListRuns",
      [&](const CallContext& call) -> absl::StatusOr<std::vector<RunView>> {
        if (!req->study_id().empty()) MEDPROF_RETURN_IF_ERROR(domain_.access().CheckStudy(call, req->study_id()));
        if (!req->job_id().empty()) MEDPROF_RETURN_IF_ERROR(domain_.access().CheckJob(call, req->job_id()));
        return domain_.studies().ListRuns(call, FromProto(*req));
      },
      [](const std::vector<RunView>& runs) {
        v1::ListRunsResponse r;
        for (const RunView& v : runs) *r.add_runs() = ToProto(v);
        return r;
      },
      resp);
}

grpc::Status MedprofServiceImpl::GetRun(grpc::ServerContext* ctx, const v1::GetRunRequest* req, v1::Run* resp) {
  return Handle(
      auth_, ctx, "GetRun",
      [&](const CallContext& call) -> absl::StatusOr<RunView> {
        MEDPROF_RETURN_IF_ERROR(domain_.access().CheckRun(call, req->run_id()));
        return domain_.studies().GetRun(call, req->run_id());
      },
      [](const RunView& v) { return ToProto(v); }, resp);
}

grpc::Status MedprofServiceImpl::Compare(grpc::ServerContext* ctx, const v1::CompareRequest* req,
                                         v1::CompareResponse* resp) {
  return Handle(
      auth_, ctx, "Compare",
      [&](const CallContext& call) -> absl::StatusOr<CompareResult> {
        if (!req->study_id().empty() || req->run_ids().empty()) {
          MEDPROF_RETURN_IF_ERROR(domain_.access().CheckStudy(call, req->study_id()));
        }
        for (const std::string& study_id : req->more_study_ids()) {
          MEDPROF_RETURN_IF_ERROR(domain_.access().CheckStudy(call, study_id));
        }
        for (const std::string& run_id : req->run_ids()) {
          MEDPROF_RETURN_IF_ERROR(domain_.access().CheckRun(call, run_id));
        }
        return domain_.queries().Compare(call, FromProto(*req));
      },
      [](const CompareResult& r) { return ToProto(r); }, resp);
}

grpc::Status MedprofServiceImpl::ListKernels(grpc::ServerContext* ctx, const v1::ListKernelsRequest* req,
                                             v1::ListKernelsResponse* resp) {
  return Handle(
      auth_, ctx, "ListKernels",
      [&](const CallContext& call) -> absl::StatusOr<KernelsResult> {
        MEDPROF_RETURN_IF_ERROR(domain_.access().CheckRun(call, req->run_id()));
        return domain_.queries().Kernels(call, FromProto(*req));
      },
      [](const KernelsResult& r) { return ToProto(r); }, resp);
}

grpc::Status MedprofServiceImpl::DiffRuns(grpc::ServerContext* ctx, const v1::DiffRunsRequest* req,
                                          v1::DiffRunsResponse* resp) {
  return Handle(
      auth_, ctx, "DiffRuns",
      [&](const CallContext& call) -> absl::StatusOr<DiffResult> {
        MEDPROF_RETURN_IF_ERROR(domain_.access().CheckRun(call, req->run_a()));
        MEDPROF_RETURN_IF_ERROR(domain_.access().CheckRun(call, req->run_b()));
        return domain_.queries().Diff(call, FromProto(*req));
      },
      [](const DiffResult& r) { return ToProto(r); }, resp);
}

grpc::Status MedprofServiceImpl::GetTimeline(grpc::ServerContext* ctx, const v1::GetTimelineRequest* req,
                                             v1::GetTimelineResponse* resp) {
  return Handle(
      auth_, ctx, "GetTimeline",
      [&](const CallContext& call) -> absl::StatusOr<TimelineResult> {
        MEDPROF_RETURN_IF_ERROR(domain_.access().CheckRun(call, req->run_id()));
        return domain_.queries().Timeline(call, req->run_id());
      },
      [](const TimelineResult& r) { return ToProto(r); }, resp);
}

grpc::Status MedprofServiceImpl::ListAgents(grpc::ServerContext* ctx, const v1::ListAgentsRequest*,
                                            v1::ListAgentsResponse* resp) {
  return Handle(
      auth_, ctx, "ListAgents", [&](const CallContext& call) { return domain_.agents().ListAgents(call); },
      [](const std::vector<AgentView>& agents) {
        v1::ListAgentsResponse r;
        for (const AgentView& a : agents) *r.add_agents() = ToProto(a);
        return r;
      },
      resp);
}

grpc::Status MedprofServiceImpl::ImportRun(grpc::ServerContext* ctx, const v1::ImportRunRequest* req,
                                           v1::ImportRunResponse* resp) {
  return Handle(
      auth_, ctx, "ImportRun",
      [&](const CallContext& call) -> absl::StatusOr<ImportRunResult> {
        MEDPROF_RETURN_IF_ERROR(auth_.CountSubmission(call));
        if (!req->study_id().empty()) MEDPROF_RETURN_IF_ERROR(domain_.access().CheckStudy(call, req->study_id()));
        return domain_.importer().Import(call, FromProto(*req));
      },
      [](const ImportRunResult& r) { return ToProto(r); }, resp);
}

grpc::Status MedprofServiceImpl::UploadRun(grpc::ServerContext* ctx, const v1::UploadRunRequest* req,
                                           v1::UploadRunResponse* resp) {
  return Handle(
      auth_, ctx, "UploadRun",
      [&](const CallContext& call) -> absl::StatusOr<UploadRunResult> {
        MEDPROF_RETURN_IF_ERROR(auth_.CountSubmission(call));
        MEDPROF_RETURN_IF_ERROR(domain_.access().CheckStudy(call, req->study_id()));
        return domain_.uploader().Upload(call, FromProto(*req));
      },
      [](const UploadRunResult& r) { return ToProto(r); }, resp);
}

// ---------------------------------------------------------------- AgentService

grpc::Status AgentServiceImpl::Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req,
                                        v1::RegisterResponse* resp) {
  return Handle(
      auth_, ctx, "Register",
      [&](const CallContext& call) -> absl::StatusOr<RegisterAgentResult> {
        MEDPROF_RETURN_IF_ERROR(domain_.access().CheckAgentName(call, req->agent_name()));
        return domain_.agents().Register(call, FromProto(*req));
      },
      [](const RegisterAgentResult& r) { return ToProto(r); }, resp);
}

grpc::Status AgentServiceImpl::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                         v1::HeartbeatResponse* resp) {
  return Handle(
      auth_, ctx, "Heartbeat",
      [&](const CallContext& call) -> absl::StatusOr<HeartbeatResult> {
        MEDPROF_RETURN_IF_ERROR(domain_.access().CheckAgentId(call, req->agent_id()));
        return domain_.scheduler().Heartbeat(call, FromProto(*req));
      },
      [](const HeartbeatResult& r) { return ToProto(r); }, resp);
}

grpc::Status AgentServiceImpl::AcquireJob(grpc::ServerContext* ctx, const v1::AcquireJobRequest* req,
                                          v1::AcquireJobResponse* resp) {
  return Handle(
      auth_, ctx, "AcquireJob",
      [&](const CallContext& call) -> absl::StatusOr<std::optional<Assignment>> {
        MEDPROF_RETURN_IF_ERROR(domain_.access().CheckAgentId(call, req->agent_id()));
        return domain_.scheduler().AcquireJob(call, FromProto(*req));
      },
      [](const std::optional<Assignment>& a) {
        v1::AcquireJobResponse r;
        if (a.has_value()) *r.mutable_assignment() = ToProto(*a);
        return r;
      },
      resp);
}

grpc::Status AgentServiceImpl::UploadResults(grpc::ServerContext* ctx, grpc::ServerReader<v1::ResultChunk>* reader,
                                             v1::UploadAck* resp) {
  absl::StatusOr<CallContext> authed = auth_.Authenticate(ctx, "UploadResults");
  if (!authed.ok()) return ToGrpcStatus(authed.status(), "UploadResults");
  const CallContext& call = *authed;
  std::set<std::string> checked_agents;  // agent ids this stream has shown it may act as
  UploadWindow window(domain_.ingestor(), call);
  v1::ResultChunk chunk;
  while (reader->Read(&chunk)) {
    if (!call.agent_name.empty() && !checked_agents.contains(chunk.agent_id())) {
      if (absl::Status s = domain_.access().CheckAgentId(call, chunk.agent_id()); !s.ok()) {
        return ToGrpcStatus(s, "UploadResults");
      }
      checked_agents.insert(chunk.agent_id());
    }
    const size_t wire_bytes = chunk.ByteSizeLong();
    if (absl::Status s = window.Add(FromProto(std::move(chunk)), wire_bytes); !s.ok()) {
      return ToGrpcStatus(s, "UploadResults");
    }
    chunk.Clear();
  }
  absl::StatusOr<CommittedThrough> acked = window.Finish();
  if (!acked.ok()) return ToGrpcStatus(acked.status(), "UploadResults");
  *resp = ToProto(*acked);
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::FinishRun(grpc::ServerContext* ctx, const v1::FinishRunRequest* req,
                                         v1::FinishRunResponse* resp) {
  return Handle(
      auth_, ctx, "FinishRun",
      [&](const CallContext& call) -> absl::StatusOr<JobState> {
        MEDPROF_RETURN_IF_ERROR(domain_.access().CheckAgentId(call, req->agent_id()));
        return domain_.scheduler().FinishRun(call, FromProto(*req));
      },
      [](JobState s) {
        v1::FinishRunResponse r;
        r.set_job_state(ToProto(s));
        return r;
      },
      resp);
}

}  // namespace medprof::server::rpc
