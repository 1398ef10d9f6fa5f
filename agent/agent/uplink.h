// The agent's connection to medprof-server: AgentService (and ModelService's FetchModel) calls
// over one gRPC channel.
//
// Plain text only to a loopback server; TLS (with the given CA) otherwise — the caller
// decides (options.h refuses plain text off loopback). Every call has a deadline; a bearer
// token, when set, travels as `authorization: Bearer <token>` metadata on every call. gRPC
// statuses become absl::Status with the same code and "<Method>: <server message>". gRPC
// types stay inside this file pair.
//
// Thread-safe: the control, heartbeat and upload threads call it concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/agent/model_cache.h"
#include "medprof/v1/models.pb.h"
#include "medprof/v1/service.pb.h"

namespace medprof::agent {

struct UplinkOptions {
  // gRPC target "host:port" (ServerAddress::Target()).
  std::string target;
  // TLS with this PEM root bundle when use_tls; plain text otherwise.
  bool use_tls = false;
  std::string tls_ca_pem;
  // Client certificate chain and key (PEM) for mutual TLS; both empty = none.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  // Bearer token ("" = none).
  std::string token;
  // Deadline of Register/Heartbeat/FinishRun, in ms (default 15000).
  int64_t call_timeout_ms = 15'000;
  // Deadline of one UploadResults stream, in ms (default 60000).
  int64_t upload_timeout_ms = 60'000;
};

class Uplink {
 public:
  static absl::StatusOr<std::unique_ptr<Uplink>> Create(const UplinkOptions& options);
  ~Uplink();

  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  // Long-poll (deadline: wait_ms + call_timeout_ms). Returns CANCELLED at once after
  // StopAcquiring(), and a pending call is cancelled by it.
  absl::StatusOr<v1::AcquireJobResponse> AcquireJob(const v1::AcquireJobRequest& request);
  void StopAcquiring();
  // One UploadResults stream with these chunks (in order); the server's acknowledgement.
  absl::StatusOr<v1::UploadAck> Upload(const std::vector<v1::ResultChunk>& chunks);
  absl::StatusOr<v1::FinishRunResponse> FinishRun(const v1::FinishRunRequest& request);
  // One FetchModel stream (ModelService): each chunk to `sink` in order; the sink's error ends
  // the stream. Deadline: upload_timeout_ms plus a second per MiB of the model.
  absl::Status FetchModel(const v1::FetchModelRequest& request, uint64_t size_bytes, const ModelSink& sink);

 private:
  struct Impl;  // the channel and stub (keeps gRPC headers out of this one)
  explicit Uplink(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace medprof::agent
