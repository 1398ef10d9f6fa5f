#include "server/rpc/services.h"

#include <algorithm>
#include <vector>

#include "server/rpc/convert.h"
#include "server/rpc/status_mapping.h"

namespace medprof::server::rpc {
namespace {

constexpr size_t kWindowChunks = 256;
constexpr size_t kWindowBytes = 8 << 20;

// Runs `call` (returning absl::StatusOr<T>), and on success stores `convert(value)` in `out`.
template <typename Call, typename Convert, typename Out>
grpc::Status Handle(const char* method, Call call, Convert convert, Out* out) {
  auto result = call();
  if (!result.ok()) return ToGrpcStatus(result.status(), method);
  *out = convert(*result);
  return grpc::Status::OK;
}

}  // namespace

// ---------------------------------------------------------------- MedprofService

grpc::Status MedprofServiceImpl::SubmitStudy(grpc::ServerContext* ctx, const v1::SubmitStudyRequest* req,
                                             v1::SubmitStudyResponse* resp) {
  return Handle(
      "SubmitStudy", [&] { return domain_.studies().SubmitStudy(MakeCallContext(ctx), FromProto(*req)); },
      [](const SubmitStudyResult& r) { return ToProto(r); }, resp);
}

grpc::Status MedprofServiceImpl::GetStudy(grpc::ServerContext* ctx, const v1::GetStudyRequest* req, v1::Study* resp) {
  return Handle(
      "GetStudy", [&] { return domain_.studies().GetStudy(MakeCallContext(ctx), req->study_id()); },
      [](const StudyView& s) { return ToProto(s); }, resp);
}

grpc::Status MedprofServiceImpl::ListStudies(grpc::ServerContext* ctx, const v1::ListStudiesRequest* req,
                                             v1::ListStudiesResponse* resp) {
  return Handle(
      "ListStudies", [&] { return domain_.studies().ListStudies(MakeCallContext(ctx), FromProto(*req)); },
      [](const ListStudiesResult& r) { return ToProto(r); }, resp);
}

grpc::Status MedprofServiceImpl::WatchStudy(grpc::ServerContext* ctx, const v1::WatchStudyRequest* req,
                                            grpc::ServerWriter<v1::StudyEvent>* writer) {
  const absl::Status s = domain_.studies().WatchStudy(
      MakeCallContext(ctx), req->study_id(), [writer](const StudyEvent& e) { return writer->Write(ToProto(e)); });
  return ToGrpcStatus(s, "WatchStudy");
}

grpc::Status MedprofServiceImpl::CancelStudy(grpc::ServerContext* ctx, const v1::CancelStudyRequest* req,
                                             v1::CancelStudyResponse* resp) {
  return Handle(
      "CancelStudy",
      [&] { return domain_.studies().CancelStudy(MakeCallContext(ctx), req->study_id(), req->reason()); },
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
      "ListRuns", [&] { return domain_.studies().ListRuns(MakeCallContext(ctx), FromProto(*req)); },
      [](const std::vector<RunView>& runs) {
        v1::ListRunsResponse r;
        for (const RunView& v : runs) *r.add_runs() = ToProto(v);
        return r;
      },
      resp);
}

grpc::Status MedprofServiceImpl::GetRun(grpc::ServerContext* ctx, const v1::GetRunRequest* req, v1::Run* resp) {
  return Handle(
      "GetRun", [&] { return domain_.studies().GetRun(MakeCallContext(ctx), req->run_id()); },
      [](const RunView& v) { return ToProto(v); }, resp);
}

grpc::Status MedprofServiceImpl::Compare(grpc::ServerContext* ctx, const v1::CompareRequest* req,
                                         v1::CompareResponse* resp) {
  return Handle(
      "Compare", [&] { return domain_.queries().Compare(MakeCallContext(ctx), FromProto(*req)); },
      [](const CompareResult& r) { return ToProto(r); }, resp);
}

grpc::Status MedprofServiceImpl::ListAgents(grpc::ServerContext* ctx, const v1::ListAgentsRequest*,
                                            v1::ListAgentsResponse* resp) {
  return Handle(
      "ListAgents", [&] { return domain_.agents().ListAgents(MakeCallContext(ctx)); },
      [](const std::vector<AgentView>& agents) {
        v1::ListAgentsResponse r;
        for (const AgentView& a : agents) *r.add_agents() = ToProto(a);
        return r;
      },
      resp);
}

// ---------------------------------------------------------------- AgentService

grpc::Status AgentServiceImpl::Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req,
                                        v1::RegisterResponse* resp) {
  return Handle(
      "Register", [&] { return domain_.agents().Register(MakeCallContext(ctx), FromProto(*req)); },
      [](const RegisterAgentResult& r) { return ToProto(r); }, resp);
}

grpc::Status AgentServiceImpl::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                                         v1::HeartbeatResponse* resp) {
  return Handle(
      "Heartbeat", [&] { return domain_.scheduler().Heartbeat(MakeCallContext(ctx), FromProto(*req)); },
      [](const HeartbeatResult& r) { return ToProto(r); }, resp);
}

grpc::Status AgentServiceImpl::AcquireJob(grpc::ServerContext* ctx, const v1::AcquireJobRequest* req,
                                          v1::AcquireJobResponse* resp) {
  return Handle(
      "AcquireJob", [&] { return domain_.scheduler().AcquireJob(MakeCallContext(ctx), FromProto(*req)); },
      [](const std::optional<Assignment>& a) {
        v1::AcquireJobResponse r;
        if (a.has_value()) *r.mutable_assignment() = ToProto(*a);
        return r;
      },
      resp);
}

grpc::Status AgentServiceImpl::UploadResults(grpc::ServerContext* ctx, grpc::ServerReader<v1::ResultChunk>* reader,
                                             v1::UploadAck* resp) {
  const CallContext call = MakeCallContext(ctx);
  CommittedThrough acked;
  std::vector<ResultChunk> window;
  size_t window_bytes = 0;
  auto flush = [&]() -> absl::Status {
    if (window.empty()) return absl::OkStatus();
    absl::StatusOr<CommittedThrough> done = domain_.ingestor().Ingest(call, window);
    window.clear();
    window_bytes = 0;
    if (!done.ok()) return done.status();
    for (const auto& [run_id, seq] : *done) acked[run_id] = std::max(acked[run_id], seq);
    return absl::OkStatus();
  };
  v1::ResultChunk chunk;
  while (reader->Read(&chunk)) {
    window_bytes += chunk.ByteSizeLong();
    window.push_back(FromProto(std::move(chunk)));
    chunk.Clear();
    if (window.size() >= kWindowChunks || window_bytes >= kWindowBytes) {
      if (absl::Status s = flush(); !s.ok()) return ToGrpcStatus(s, "UploadResults");
    }
  }
  if (absl::Status s = flush(); !s.ok()) return ToGrpcStatus(s, "UploadResults");
  *resp = ToProto(acked);
  return grpc::Status::OK;
}

grpc::Status AgentServiceImpl::FinishRun(grpc::ServerContext* ctx, const v1::FinishRunRequest* req,
                                         v1::FinishRunResponse* resp) {
  return Handle(
      "FinishRun", [&] { return domain_.scheduler().FinishRun(MakeCallContext(ctx), FromProto(*req)); },
      [](JobState s) {
        v1::FinishRunResponse r;
        r.set_job_state(ToProto(s));
        return r;
      },
      resp);
}

}  // namespace medprof::server::rpc
