// MedprofClient: typed calls to a medprof server's MedprofService (and its ModelService, on the
// same channel), returning absl::Status.
//
// Connect() decides the transport from the address: plaintext only to loopback (localhost,
// 127.0.0.0/8, [::1], unix:PATH) without --tls-ca; TLS otherwise, verified against --tls-ca
// or the system roots. A bearer token (ConnectionOptions::token / token_file) travels as
// `authorization: Bearer <token>` metadata on every call. Unary calls carry the
// ConnectionOptions deadline; WatchStudy has none.
//
// Every failed call keeps the gRPC code (absl and gRPC share the numbering) and reads
//   server 127.0.0.1:7000 unreachable (UNAVAILABLE): <gRPC's message>
//   server 127.0.0.1:7000: GetRun failed (NOT_FOUND): <the server's message>
// so the CLI can print it as is.
//
// A MedprofClient may be used from several threads at once (the gRPC stub is thread-safe);
// it owns its channel.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/cli.h"
#include "medprof/v1/models.grpc.pb.h"
#include "medprof/v1/service.grpc.pb.h"

namespace medprof::client {

// True for addresses that never leave the host: localhost, 127.0.0.0/8, [::1], unix:PATH
// (an optional gRPC "dns:///" / "ipv4:" / "ipv6:" scheme is ignored).
bool IsLoopbackAddress(absl::string_view server);

// Whether Connect() will use TLS for these options (see the header comment).
bool UsesTls(const ConnectionOptions& options);

// Converts a failed gRPC status into the message format above; OK stays OK.
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view server,
                            absl::string_view call, int timeout_s);

class MedprofClient {
 public:
  // Builds the channel (does not dial yet: an unreachable server shows on the first call).
  // INVALID_ARGUMENT when the CA or token file cannot be read, or the token does not have the
  // documented shape (common/token_text.h; the message never shows the token).
  static absl::StatusOr<std::unique_ptr<MedprofClient>> Connect(const ConnectionOptions& options);
  // Uses an existing channel (tests, in-process servers). `options` supplies the address
  // shown in messages, the deadline and the token.
  static std::unique_ptr<MedprofClient> ForChannel(std::shared_ptr<grpc::Channel> channel,
                                                   const ConnectionOptions& options);

  absl::StatusOr<v1::SubmitStudyResponse> SubmitStudy(const v1::SubmitStudyRequest& request);
  absl::StatusOr<v1::Study> GetStudy(const std::string& study_id);
  absl::StatusOr<v1::ListStudiesResponse> ListStudies(const v1::ListStudiesRequest& request);
  absl::StatusOr<v1::CancelStudyResponse> CancelStudy(const v1::CancelStudyRequest& request);
  absl::StatusOr<v1::ListRunsResponse> ListRuns(const v1::ListRunsRequest& request);
  absl::StatusOr<v1::Run> GetRun(const std::string& run_id);
  absl::StatusOr<v1::CompareResponse> Compare(const v1::CompareRequest& request);
  absl::StatusOr<v1::ListKernelsResponse> ListKernels(const v1::ListKernelsRequest& request);
  absl::StatusOr<v1::DiffRunsResponse> DiffRuns(const v1::DiffRunsRequest& request);
  absl::StatusOr<v1::GetTimelineResponse> GetTimeline(const std::string& run_id);
  absl::StatusOr<v1::ListAgentsResponse> ListAgents();
  // Stores an imported run (`medprof import-ncu`).
  absl::StatusOr<v1::ImportRunResponse> ImportRun(const v1::ImportRunRequest& request);
  absl::StatusOr<v1::UploadRunResponse> UploadRun(const v1::UploadRunRequest& request);

  // User models (proto/medprof/v1/models.proto).
  absl::StatusOr<v1::HasModelResponse> HasModel(const std::string& sha256);
  // Streams `path` from `offset` in 1 MiB chunks naming `model` (no deadline: files are large).
  // INVALID_ARGUMENT when the file cannot be read.
  absl::StatusOr<v1::UploadModelResponse> UploadModel(const std::string& path, const v1::ModelRef& model,
                                                      uint64_t offset);
  absl::StatusOr<v1::ListModelsResponse> ListModels();
  absl::StatusOr<v1::DeleteModelResponse> DeleteModel(const std::string& sha256);

  // Streams the study's events in order to `on_event` (called on this thread). Returns OK
  // after the event with study_finished; UNAVAILABLE when the stream ends before it (server
  // restart, network loss) — the caller may call again: the server replays from the start.
  absl::Status WatchStudy(const std::string& study_id,
                          const std::function<void(const v1::StudyEvent&)>& on_event);

  const std::string& server() const { return options_.server; }

 private:
  MedprofClient(std::shared_ptr<grpc::Channel> channel, ConnectionOptions options);
  void Prepare(grpc::ClientContext* context, bool with_deadline) const;
  absl::Status Map(const grpc::Status& status, absl::string_view call) const;

  ConnectionOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::MedprofService::Stub> stub_;
  std::unique_ptr<v1::ModelService::Stub> model_stub_;
};

}  // namespace medprof::client
