// medprof-server's ModelService (proto/medprof/v1/models.proto): thin handlers over the
// Domain's ModelLibrary (server/domain/model_library.h), like services.h: authenticate and check
// the role (auth.h), check the objects named (AccessControl), convert, call one domain method,
// map the status in one place.
//
// The Domain must outlive the service. Thread-safe.
#pragma once

#include "medprof/v1/models.grpc.pb.h"
#include "server/domain/domain.h"
#include "server/rpc/auth.h"

namespace medprof::server::rpc {

class ModelServiceImpl final : public v1::ModelService::Service {
 public:
  ModelServiceImpl(Domain& domain, Authenticator& auth) : domain_(domain), auth_(auth) {}

  grpc::Status HasModel(grpc::ServerContext* ctx, const v1::HasModelRequest* req, v1::HasModelResponse* resp) override;
  grpc::Status UploadModel(grpc::ServerContext* ctx, grpc::ServerReader<v1::UploadModelChunk>* reader,
                           v1::UploadModelResponse* resp) override;
  grpc::Status ListModels(grpc::ServerContext* ctx, const v1::ListModelsRequest* req,
                          v1::ListModelsResponse* resp) override;
  grpc::Status DeleteModel(grpc::ServerContext* ctx, const v1::DeleteModelRequest* req,
                           v1::DeleteModelResponse* resp) override;
  grpc::Status FetchModel(grpc::ServerContext* ctx, const v1::FetchModelRequest* req,
                          grpc::ServerWriter<v1::ModelChunk>* writer) override;

 private:
  Domain& domain_;
  Authenticator& auth_;
};

}  // namespace medprof::server::rpc
