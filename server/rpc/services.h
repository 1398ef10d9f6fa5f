// medprof-server's gRPC services: thin handlers over the Domain.
//
// Each method authenticates the caller and checks its role (auth.h), checks the objects the
// request names (AccessControl), converts the request (convert.h), calls one domain method with
// the caller's CallContext, converts the answer back, and maps the status in one place
// (status_mapping.h). No SQL and no business rules here. UploadResults hands its stream to an
// UploadWindow (server/domain/result_ingest.h), which decides where one transaction ends; the
// single UploadAck after the stream ends carries, per run, the highest contiguous stored seq.
//
// The Domain must outlive the services. Thread-safe (the sync gRPC server calls methods from
// many threads).
#pragma once

#include "medprof/v1/service.grpc.pb.h"
#include "server/domain/domain.h"
#include "server/rpc/auth.h"

namespace medprof::server::rpc {

class MedprofServiceImpl final : public v1::MedprofService::Service {
 public:
  MedprofServiceImpl(Domain& domain, Authenticator& auth) : domain_(domain), auth_(auth) {}

  grpc::Status SubmitStudy(grpc::ServerContext* ctx, const v1::SubmitStudyRequest* req,
                           v1::SubmitStudyResponse* resp) override;
  grpc::Status GetStudy(grpc::ServerContext* ctx, const v1::GetStudyRequest* req, v1::Study* resp) override;
  grpc::Status ListStudies(grpc::ServerContext* ctx, const v1::ListStudiesRequest* req,
                           v1::ListStudiesResponse* resp) override;
  grpc::Status WatchStudy(grpc::ServerContext* ctx, const v1::WatchStudyRequest* req,
                          grpc::ServerWriter<v1::StudyEvent>* writer) override;
  grpc::Status CancelStudy(grpc::ServerContext* ctx, const v1::CancelStudyRequest* req,
                           v1::CancelStudyResponse* resp) override;
  grpc::Status ListRuns(grpc::ServerContext* ctx, const v1::ListRunsRequest* req, v1::ListRunsResponse* resp) override;
  grpc::Status GetRun(grpc::ServerContext* ctx, const v1::GetRunRequest* req, v1::Run* resp) override;
  grpc::Status Compare(grpc::ServerContext* ctx, const v1::CompareRequest* req, v1::CompareResponse* resp) override;
  grpc::Status ListKernels(grpc::ServerContext* ctx, const v1::ListKernelsRequest* req,
                           v1::ListKernelsResponse* resp) override;
  grpc::Status DiffRuns(grpc::ServerContext* ctx, const v1::DiffRunsRequest* req, v1::DiffRunsResponse* resp) override;
  grpc::Status GetTimeline(grpc::ServerContext* ctx, const v1::GetTimelineRequest* req,
                           v1::GetTimelineResponse* resp) override;
  grpc::Status ListAgents(grpc::ServerContext* ctx, const v1::ListAgentsRequest* req,
                          v1::ListAgentsResponse* resp) override;
  grpc::Status ImportRun(grpc::ServerContext* ctx, const v1::ImportRunRequest* req,
                         v1::ImportRunResponse* resp) override;
  grpc::Status UploadRun(grpc::ServerContext* ctx, const v1::UploadRunRequest* req,
                         v1::UploadRunResponse* resp) override;

 private:
  Domain& domain_;
  Authenticator& auth_;
};

class AgentServiceImpl final : public v1::AgentService::Service {
 public:
  AgentServiceImpl(Domain& domain, Authenticator& auth) : domain_(domain), auth_(auth) {}

  grpc::Status Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req, v1::RegisterResponse* resp) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatResponse* resp) override;
  grpc::Status AcquireJob(grpc::ServerContext* ctx, const v1::AcquireJobRequest* req,
                          v1::AcquireJobResponse* resp) override;
  grpc::Status UploadResults(grpc::ServerContext* ctx, grpc::ServerReader<v1::ResultChunk>* reader,
                             v1::UploadAck* resp) override;
  grpc::Status FinishRun(grpc::ServerContext* ctx, const v1::FinishRunRequest* req,
                         v1::FinishRunResponse* resp) override;

 private:
  Domain& domain_;
  Authenticator& auth_;
};

}  // namespace medprof::server::rpc
