#include "server/rpc/model_service.h"

#include <utility>

#include "common/status.h"
#include "server/rpc/handle.h"
#include "server/rpc/status_mapping.h"

namespace medprof::server::rpc {
namespace {

v1::ModelInfo ToProto(const ModelRecord& m) {
  v1::ModelInfo out;
  out.set_sha256(m.sha256);
  out.set_file_name(m.file_name);
  out.set_size_bytes(static_cast<uint64_t>(m.size_bytes));
  out.set_project(m.project);
  out.set_uploader(m.uploader);
  out.set_created_unix_ms(m.created_unix_ms);
  return out;
}

}  // namespace

grpc::Status ModelServiceImpl::HasModel(grpc::ServerContext* ctx, const v1::HasModelRequest* req,
                                        v1::HasModelResponse* resp) {
  return Handle(
      auth_, ctx, "HasModel", [&](const CallContext& call) { return domain_.models().Has(call, req->sha256()); },
      [](const HasModelResult& r) {
        v1::HasModelResponse out;
        out.set_present(r.present);
        out.set_resume_offset(r.resume_offset);
        if (r.model.has_value()) *out.mutable_model() = ToProto(*r.model);
        return out;
      },
      resp);
}

grpc::Status ModelServiceImpl::UploadModel(grpc::ServerContext* ctx, grpc::ServerReader<v1::UploadModelChunk>* reader,
                                           v1::UploadModelResponse* resp) {
  return Handle(
      auth_, ctx, "UploadModel",
      [&](const CallContext& call) {
        v1::UploadModelChunk chunk;
        return domain_.models().Upload(call, [&](ModelPiece& piece) {
          if (!reader->Read(&chunk)) return false;
          piece.sha256 = std::move(*chunk.mutable_sha256());
          piece.file_name = std::move(*chunk.mutable_file_name());
          piece.size_bytes = chunk.size_bytes();
          piece.offset = chunk.offset();
          piece.data = std::move(*chunk.mutable_data());
          return true;
        });
      },
      [](const UploadModelResult& r) {
        v1::UploadModelResponse out;
        *out.mutable_model() = ToProto(r.model);
        out.set_bytes_received(r.bytes_received);
        return out;
      },
      resp);
}

grpc::Status ModelServiceImpl::ListModels(grpc::ServerContext* ctx, const v1::ListModelsRequest*,
                                          v1::ListModelsResponse* resp) {
  return Handle(
      auth_, ctx, "ListModels", [&](const CallContext& call) { return domain_.models().List(call); },
      [](const std::vector<ModelRecord>& models) {
        v1::ListModelsResponse out;
        for (const ModelRecord& m : models) *out.add_models() = ToProto(m);
        return out;
      },
      resp);
}

grpc::Status ModelServiceImpl::DeleteModel(grpc::ServerContext* ctx, const v1::DeleteModelRequest* req,
                                           v1::DeleteModelResponse* resp) {
  return Handle(
      auth_, ctx, "DeleteModel", [&](const CallContext& call) { return domain_.models().Delete(call, req->sha256()); },
      [](bool file_removed) {
        v1::DeleteModelResponse out;
        out.set_file_removed(file_removed);
        return out;
      },
      resp);
}

grpc::Status ModelServiceImpl::FetchModel(grpc::ServerContext* ctx, const v1::FetchModelRequest* req,
                                          grpc::ServerWriter<v1::ModelChunk>* writer) {
  absl::StatusOr<CallContext> call = auth_.Authenticate(ctx, "FetchModel");
  if (!call.ok()) return ToGrpcStatus(call.status(), "FetchModel");
  absl::Status s = domain_.access().CheckAgentId(*call, req->agent_id());
  if (s.ok()) {
    const FetchModelRequest request{req->agent_id(), req->run_id(), req->sha256(), req->offset()};
    s = domain_.models().Fetch(*call, request, [writer](uint64_t offset, absl::string_view data, uint64_t size) {
      v1::ModelChunk chunk;
      chunk.set_offset(offset);
      chunk.set_data(data.data(), data.size());
      chunk.set_size_bytes(size);
      return writer->Write(chunk);
    });
  }
  return ToGrpcStatus(s, "FetchModel");
}

}  // namespace medprof::server::rpc
