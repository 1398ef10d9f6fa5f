#include "client/client.h"

#include "common/net.h"
#include "common/tls_files.h"
#include "common/token_text.h"

#include <arpa/inet.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/grpc_status.h"

namespace medprof::client {
namespace {

// Largest response accepted (GetRun carries every kernel aggregate of a run).
constexpr int kMaxReceiveBytes = 256 << 20;

// Host part of HOST:PORT / [v6]:PORT, without brackets.
absl::string_view HostOf(absl::string_view address) {
  const size_t colon = address.rfind(':');
  absl::string_view host = colon == absl::string_view::npos ? address : address.substr(0, colon);
  absl::ConsumePrefix(&host, "[");
  absl::ConsumeSuffix(&host, "]");
  return host;
}

}  // namespace

bool IsLoopbackAddress(absl::string_view server) {
  if (absl::StartsWith(server, "unix:")) return true;
  absl::ConsumePrefix(&server, "dns:///");
  absl::ConsumePrefix(&server, "ipv4:");
  absl::ConsumePrefix(&server, "ipv6:");
  const std::string host(HostOf(server));
  return net::IsLoopbackHost(host);
}

bool UsesTls(const ConnectionOptions& options) {
  return !options.tls_ca_file.empty() || !IsLoopbackAddress(options.server);
}

absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view server,
                            absl::string_view call, int timeout_s) {
  if (status.ok()) return absl::OkStatus();
  const absl::StatusCode code = ::medprof::FromGrpcStatus(status).code();
  const std::string code_name = absl::StatusCodeToString(code);
  std::string detail = status.error_message();
  if (detail.empty()) detail = "(no message)";
  std::string message;
  switch (code) {
    case absl::StatusCode::kUnavailable:
      message = absl::StrCat("server ", server, " unreachable (", code_name, "): ", detail);
      break;
    case absl::StatusCode::kDeadlineExceeded:
      message = absl::StrCat("server ", server, ": ", call, " got no answer within ", timeout_s,
                             " s (", code_name, "): ", detail, " (raise --timeout-s)");
      break;
    case absl::StatusCode::kUnauthenticated:
      message = absl::StrCat("server ", server, ": ", call, " refused (", code_name, "): ", detail,
                             " (set MEDPROF_TOKEN or MEDPROF_TOKEN_FILE)");
      break;
    default:
      message = absl::StrCat("server ", server, ": ", call, " failed (", code_name, "): ", detail);
  }
  return absl::Status(code, message);
}

absl::StatusOr<std::unique_ptr<MedprofClient>> MedprofClient::Connect(
    const ConnectionOptions& options) {
  ConnectionOptions opts = options;
  // Checked here too (not only by the CLI's parser): gRPC aborts on metadata it cannot send.
  if (!opts.token.empty()) {
    if (absl::Status s = token::CheckShape(opts.token, "MEDPROF_TOKEN"); !s.ok()) return s;
  } else if (!opts.token_file.empty()) {
    absl::StatusOr<std::string> token = token::ReadTokenFile(opts.token_file, "MEDPROF_TOKEN_FILE");
    if (!token.ok()) return token.status();
    opts.token = *std::move(token);
  }
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (!opts.tls_cert_file.empty() && !UsesTls(opts)) {
    return absl::InvalidArgumentError(
        "--tls-cert: a client certificate needs TLS; on a loopback address pass --tls-ca as well");
  }
  if (UsesTls(opts)) {
    // Read and checked: the CA has not expired; the key matches the certificate, valid now.
    absl::StatusOr<tls::ClientPems> pems = tls::LoadClientFiles(opts.tls_ca_file, opts.tls_cert_file, opts.tls_key_file);
    if (!pems.ok()) return absl::InvalidArgumentError(pems.status().message());
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pems->ca;  // "" = the system roots
    ssl.pem_cert_chain = pems->cert;
    ssl.pem_private_key = pems->key;
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  args.SetString(GRPC_ARG_PRIMARY_USER_AGENT_STRING, "medprof-cli");
  auto channel = grpc::CreateCustomChannel(opts.server, creds, args);
  return std::unique_ptr<MedprofClient>(new MedprofClient(std::move(channel), std::move(opts)));
}

std::unique_ptr<MedprofClient> MedprofClient::ForChannel(std::shared_ptr<grpc::Channel> channel,
                                                         const ConnectionOptions& options) {
  return std::unique_ptr<MedprofClient>(new MedprofClient(std::move(channel), options));
}

MedprofClient::MedprofClient(std::shared_ptr<grpc::Channel> channel, ConnectionOptions options)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(v1::MedprofService::NewStub(channel_)),
      model_stub_(v1::ModelService::NewStub(channel_)) {}

void MedprofClient::Prepare(grpc::ClientContext* context, bool with_deadline) const {
  if (with_deadline) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(options_.timeout_s));
  }
  if (!options_.token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options_.token);
  }
}

absl::Status MedprofClient::Map(const grpc::Status& status, absl::string_view call) const {
  return FromGrpcStatus(status, options_.server, call, options_.timeout_s);
}

absl::StatusOr<v1::SubmitStudyResponse> MedprofClient::SubmitStudy(
    const v1::SubmitStudyRequest& request) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::SubmitStudyResponse response;
  if (absl::Status s = Map(stub_->SubmitStudy(&ctx, request, &response), "SubmitStudy"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::Study> MedprofClient::GetStudy(const std::string& study_id) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::GetStudyRequest request;
  request.set_study_id(study_id);
  v1::Study response;
  if (absl::Status s = Map(stub_->GetStudy(&ctx, request, &response), "GetStudy"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::ListStudiesResponse> MedprofClient::ListStudies(
    const v1::ListStudiesRequest& request) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::ListStudiesResponse response;
  if (absl::Status s = Map(stub_->ListStudies(&ctx, request, &response), "ListStudies"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::CancelStudyResponse> MedprofClient::CancelStudy(
    const v1::CancelStudyRequest& request) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::CancelStudyResponse response;
  if (absl::Status s = Map(stub_->CancelStudy(&ctx, request, &response), "CancelStudy"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::ListRunsResponse> MedprofClient::ListRuns(const v1::ListRunsRequest& request) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::ListRunsResponse response;
  if (absl::Status s = Map(stub_->ListRuns(&ctx, request, &response), "ListRuns"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::Run> MedprofClient::GetRun(const std::string& run_id) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::GetRunRequest request;
  request.set_run_id(run_id);
  v1::Run response;
  if (absl::Status s = Map(stub_->GetRun(&ctx, request, &response), "GetRun"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::ImportRunResponse> MedprofClient::ImportRun(const v1::ImportRunRequest& request) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::ImportRunResponse response;
  if (absl::Status s = Map(stub_->ImportRun(&ctx, request, &response), "ImportRun"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::UploadRunResponse> MedprofClient::UploadRun(const v1::UploadRunRequest& request) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::UploadRunResponse response;
  if (absl::Status s = Map(stub_->UploadRun(&ctx, request, &response), "UploadRun"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::CompareResponse> MedprofClient::Compare(const v1::CompareRequest& request) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::CompareResponse response;
  if (absl::Status s = Map(stub_->Compare(&ctx, request, &response), "Compare"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::ListKernelsResponse> MedprofClient::ListKernels(const v1::ListKernelsRequest& request) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::ListKernelsResponse response;
  if (absl::Status s = Map(stub_->ListKernels(&ctx, request, &response), "ListKernels"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::DiffRunsResponse> MedprofClient::DiffRuns(const v1::DiffRunsRequest& request) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::DiffRunsResponse response;
  if (absl::Status s = Map(stub_->DiffRuns(&ctx, request, &response), "DiffRuns"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::GetTimelineResponse> MedprofClient::GetTimeline(const std::string& run_id) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::GetTimelineRequest request;
  request.set_run_id(run_id);
  v1::GetTimelineResponse response;
  if (absl::Status s = Map(stub_->GetTimeline(&ctx, request, &response), "GetTimeline"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::ListAgentsResponse> MedprofClient::ListAgents() {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::ListAgentsResponse response;
  if (absl::Status s = Map(stub_->ListAgents(&ctx, v1::ListAgentsRequest(), &response), "ListAgents"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::HasModelResponse> MedprofClient::HasModel(const std::string& sha256) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::HasModelRequest request;
  request.set_sha256(sha256);
  v1::HasModelResponse response;
  if (absl::Status s = Map(model_stub_->HasModel(&ctx, request, &response), "HasModel"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::UploadModelResponse> MedprofClient::UploadModel(const std::string& path, const v1::ModelRef& model,
                                                                   uint64_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in || !in.seekg(static_cast<std::streamoff>(offset))) {
    return absl::InvalidArgumentError(absl::StrCat("--model: cannot read '", path, "' from byte ", offset));
  }
  grpc::ClientContext ctx;
  Prepare(&ctx, false);
  v1::UploadModelResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::UploadModelChunk>> writer = model_stub_->UploadModel(&ctx, &response);
  v1::UploadModelChunk chunk;
  chunk.set_sha256(model.sha256());
  chunk.set_file_name(model.file_name());
  chunk.set_size_bytes(model.size_bytes());
  std::string buffer(size_t{1} << 20, '\0');
  for (uint64_t at = offset; at < model.size_bytes();) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto got = static_cast<size_t>(in.gcount());
    if (got == 0) break;  // the file shrank: the server says how many bytes it lacks
    chunk.set_offset(at);
    chunk.set_data(buffer.data(), got);
    if (!writer->Write(chunk)) break;  // the server ended the call: Finish() says why
    at += got;
  }
  writer->WritesDone();
  if (absl::Status s = Map(writer->Finish(), "UploadModel"); !s.ok()) return s;
  return response;
}

absl::StatusOr<v1::ListModelsResponse> MedprofClient::ListModels() {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::ListModelsResponse response;
  if (absl::Status s = Map(model_stub_->ListModels(&ctx, v1::ListModelsRequest(), &response), "ListModels"); !s.ok()) {
    return s;
  }
  return response;
}

absl::StatusOr<v1::DeleteModelResponse> MedprofClient::DeleteModel(const std::string& sha256) {
  grpc::ClientContext ctx;
  Prepare(&ctx, true);
  v1::DeleteModelRequest request;
  request.set_sha256(sha256);
  v1::DeleteModelResponse response;
  if (absl::Status s = Map(model_stub_->DeleteModel(&ctx, request, &response), "DeleteModel"); !s.ok()) return s;
  return response;
}

absl::Status MedprofClient::WatchStudy(
    const std::string& study_id, const std::function<void(const v1::StudyEvent&)>& on_event) {
  grpc::ClientContext ctx;
  Prepare(&ctx, false);
  v1::WatchStudyRequest request;
  request.set_study_id(study_id);
  std::unique_ptr<grpc::ClientReader<v1::StudyEvent>> reader = stub_->WatchStudy(&ctx, request);
  v1::StudyEvent event;
  bool finished = false;
  while (reader->Read(&event)) {
    on_event(event);
    if (event.study_finished()) {
      finished = true;
      ctx.TryCancel();  // the server ends the stream anyway; do not wait on it
      break;
    }
  }
  grpc::Status status = reader->Finish();
  if (finished) return absl::OkStatus();
  if (!status.ok()) return Map(status, "WatchStudy");
  return absl::UnavailableError(absl::StrCat(
      "server ", options_.server, ": WatchStudy stream ended before study ", study_id,
      " finished (UNAVAILABLE)"));
}

}  // namespace medprof::client
