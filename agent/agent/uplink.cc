#include "agent/agent/uplink.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "medprof/v1/models.grpc.pb.h"
#include "medprof/v1/service.grpc.pb.h"

namespace medprof::agent {
namespace {

// common/grpc_status.h's conversion, the message prefixed with the method.
absl::Status FromGrpc(const grpc::Status& s, const char* method) {
  const absl::Status status = FromGrpcStatus(s);
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(method, ": ", status.message()));
}

}  // namespace

struct Uplink::Impl {
  UplinkOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::AgentService::Stub> stub;
  std::unique_ptr<v1::ModelService::Stub> models;

  std::mutex mu;
  bool acquiring_stopped = false;
  grpc::ClientContext* acquire_context = nullptr;

  void Prepare(grpc::ClientContext* context, int64_t timeout_ms) const {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    if (!options.token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", options.token));
  }
};

Uplink::Uplink(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Uplink::~Uplink() = default;

absl::StatusOr<std::unique_ptr<Uplink>> Uplink::Create(const UplinkOptions& options) {
  if (options.target.empty()) return absl::InvalidArgumentError("Uplink: empty server target");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options.use_tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_ca_pem;
    ssl.pem_cert_chain = options.tls_cert_pem;
    ssl.pem_private_key = options.tls_key_pem;
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  // Our own backoff paces retries; keep gRPC's reconnect backoff short so a restarted
  // server is found again within seconds.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5'000);
  args.SetMaxSendMessageSize(-1);
  impl->channel = grpc::CreateCustomChannel(options.target, creds, args);
  impl->stub = v1::AgentService::NewStub(impl->channel);
  impl->models = v1::ModelService::NewStub(impl->channel);
  return std::unique_ptr<Uplink>(new Uplink(std::move(impl)));
}

absl::StatusOr<v1::RegisterResponse> Uplink::Register(const v1::RegisterRequest& request) {
  grpc::ClientContext context;
  impl_->Prepare(&context, impl_->options.call_timeout_ms);
  v1::RegisterResponse response;
  absl::Status s = FromGrpc(impl_->stub->Register(&context, request, &response), "Register");
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::HeartbeatResponse> Uplink::Heartbeat(const v1::HeartbeatRequest& request) {
  grpc::ClientContext context;
  impl_->Prepare(&context, impl_->options.call_timeout_ms);
  v1::HeartbeatResponse response;
  absl::Status s = FromGrpc(impl_->stub->Heartbeat(&context, request, &response), "Heartbeat");
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::AcquireJobResponse> Uplink::AcquireJob(const v1::AcquireJobRequest& request) {
  grpc::ClientContext context;
  impl_->Prepare(&context, request.wait_ms() + impl_->options.call_timeout_ms);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->acquiring_stopped) return absl::CancelledError("AcquireJob: the agent is draining");
    impl_->acquire_context = &context;
  }
  v1::AcquireJobResponse response;
  const grpc::Status status = impl_->stub->AcquireJob(&context, request, &response);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->acquire_context = nullptr;
  }
  absl::Status s = FromGrpc(status, "AcquireJob");
  if (!s.ok()) return s;
  return response;
}

void Uplink::StopAcquiring() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->acquiring_stopped = true;
  if (impl_->acquire_context != nullptr) impl_->acquire_context->TryCancel();
}

absl::StatusOr<v1::UploadAck> Uplink::Upload(const std::vector<v1::ResultChunk>& chunks) {
  grpc::ClientContext context;
  impl_->Prepare(&context, impl_->options.upload_timeout_ms);
  v1::UploadAck ack;
  std::unique_ptr<grpc::ClientWriter<v1::ResultChunk>> writer = impl_->stub->UploadResults(&context, &ack);
  for (const v1::ResultChunk& chunk : chunks) {
    if (!writer->Write(chunk)) break;  // the stream broke; Finish() says why
  }
  writer->WritesDone();
  absl::Status s = FromGrpc(writer->Finish(), "UploadResults");
  if (!s.ok()) return s;
  return ack;
}

absl::StatusOr<v1::FinishRunResponse> Uplink::FinishRun(const v1::FinishRunRequest& request) {
  grpc::ClientContext context;
  impl_->Prepare(&context, impl_->options.call_timeout_ms);
  v1::FinishRunResponse response;
  absl::Status s = FromGrpc(impl_->stub->FinishRun(&context, request, &response), "FinishRun");
  if (!s.ok()) return s;
  return response;
}

absl::Status Uplink::FetchModel(const v1::FetchModelRequest& request, uint64_t size_bytes, const ModelSink& sink) {
  grpc::ClientContext context;
  impl_->Prepare(&context, impl_->options.upload_timeout_ms + static_cast<int64_t>(size_bytes >> 20) * 1000);
  std::unique_ptr<grpc::ClientReader<v1::ModelChunk>> reader = impl_->models->FetchModel(&context, request);
  v1::ModelChunk chunk;
  absl::Status sunk;
  while (sunk.ok() && reader->Read(&chunk)) sunk = sink(chunk.offset(), chunk.data());
  if (!sunk.ok()) context.TryCancel();
  const absl::Status streamed = FromGrpc(reader->Finish(), "FetchModel");
  return sunk.ok() ? streamed : sunk;
}

}  // namespace medprof::agent
