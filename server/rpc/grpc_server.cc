#include "server/rpc/grpc_server.h"

#include "common/net.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/rpc/model_service.h"
#include "server/rpc/services.h"
#include "server/rpc/tls_reloader.h"

namespace medprof::server::rpc {

std::string ListenAddress::ToString() const {
  return host.find(':') != std::string::npos ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

absl::StatusOr<ListenAddress> ParseListenAddress(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--listen '", text, "': ", why,
                                                   " (expected HOST:PORT, e.g. 127.0.0.1:7070 or [::1]:0)"));
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return bad("no port");
  ListenAddress a;
  a.host = text.substr(0, colon);
  if (a.host.size() >= 2 && a.host.front() == '[' && a.host.back() == ']') {
    a.host = a.host.substr(1, a.host.size() - 2);
  } else if (a.host.find(':') != std::string::npos) {
    return bad("an IPv6 host needs brackets");
  }
  if (a.host.empty()) return bad("no host");
  if (!absl::SimpleAtoi(text.substr(colon + 1), &a.port) || a.port < 0 || a.port > 65535) {
    return bad("the port must be 0..65535 (0 = any free port)");
  }
  return a;
}

bool IsLoopback(const std::string& host) { return net::IsLoopbackHost(host); }

absl::Status GrpcServer::CheckOptions(const GrpcServerOptions& options) {
  MEDPROF_ASSIGN_OR_RETURN(ListenAddress address, ParseListenAddress(options.listen));
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together: pass both, or neither (loopback only)");
  }
  if (!options.tls_client_ca_file.empty() && options.tls_cert_file.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key as well");
  }
  if (options.tls_cert_file.empty() && !IsLoopback(address.host)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to listen on ", address.ToString(),
        " without TLS: pass --tls-cert FILE --tls-key FILE (PEM; add --tls-client-ca FILE for mutual TLS), "
        "or listen on a loopback address such as 127.0.0.1 for development"));
  }
  if (options.auth == AuthMode::kOff && !IsLoopback(address.host)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing --auth off on ", address.ToString(),
        ": without tokens anyone who reaches the port may submit and read everything; use --auth tokens "
        "(create tokens with `medprof-server token create`), or listen on a loopback address"));
  }
  if (options.tls_reload_interval_s < 1 || options.tls_reload_interval_s > 86400) {
    return absl::InvalidArgumentError(absl::StrCat("tls_reload_interval_s: ", options.tls_reload_interval_s,
                                                   " is out of range (allowed 1..86400)"));
  }
  if (options.max_receive_message_bytes < (1 << 20) || options.max_receive_message_bytes > (1 << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("max_receive_message_bytes: ", options.max_receive_message_bytes,
                                                   " is out of range (allowed 1 MiB..1 GiB)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Create(const GrpcServerOptions& options) {
  MEDPROF_RETURN_IF_ERROR(CheckOptions(options));
  MEDPROF_ASSIGN_OR_RETURN(ListenAddress address, ParseListenAddress(options.listen));
  auto server = std::unique_ptr<GrpcServer>(new GrpcServer(options, address));
  server->auth_mode_ = options.auth.value_or(IsLoopback(address.host) ? AuthMode::kOff : AuthMode::kTokens);
  if (!options.tls_cert_file.empty()) {
    // Checked before anything listens: a key that does not match, an expired certificate or
    // a CA file that holds none refuses the start with the cause.
    MEDPROF_ASSIGN_OR_RETURN(server->tls_, TlsReloader::Create(TlsFiles{
                                               options.tls_cert_file, options.tls_key_file, options.tls_client_ca_file}));
  }
  return server;
}

GrpcServer::GrpcServer(GrpcServerOptions options, ListenAddress address)
    : options_(std::move(options)), address_(std::move(address)) {}

GrpcServer::~GrpcServer() {
  if (server_ != nullptr) {
    Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
}

absl::Status GrpcServer::Start(Domain* domain) {
  if (server_ != nullptr) return absl::FailedPreconditionError("GrpcServer::Start called twice");
  if (domain == nullptr) return absl::InvalidArgumentError("GrpcServer::Start: domain required");
  domain_ = domain;
  authenticator_ = std::make_unique<Authenticator>(auth_mode_, &domain->tokens());
  medprof_service_ = std::make_unique<MedprofServiceImpl>(*domain, *authenticator_);
  agent_service_ = std::make_unique<AgentServiceImpl>(*domain, *authenticator_);
  model_service_ = std::make_unique<ModelServiceImpl>(*domain, *authenticator_);
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (tls()) {
    // gRPC watches the reloader's checked copies (every second: local files); the reloader
    // installs renewed files only when they pass its checks.
    auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        tls_->key_path(), tls_->cert_path(), tls_->client_ca_path(), 1);
    tls_->Start(std::chrono::seconds(options_.tls_reload_interval_s));
    grpc::experimental::TlsServerCredentialsOptions tls_options(provider);
    tls_options.watch_identity_key_cert_pairs();
    if (mutual_tls()) {
      tls_options.watch_root_certs();
      tls_options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    } else {
      tls_options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    }
    creds = grpc::experimental::TlsServerCredentials(tls_options);
  } else {
    creds = grpc::InsecureServerCredentials();
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address_.ToString(), creds, &port_);
  builder.RegisterService(medprof_service_.get());
  builder.RegisterService(agent_service_.get());
  builder.RegisterService(model_service_.get());
  builder.SetMaxReceiveMessageSize(options_.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(64 << 20);
  // Agents behind NAT send keepalive pings on their long-lived calls; allow them.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  // gRPC sets SO_REUSEPORT by default, which lets a second server bind the same port and take
  // half the connections (to another database). One server per port: a port in use is refused.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address_.ToString(),
                                               ": the address is in use or not available on this host"));
  }
  return absl::OkStatus();
}

std::string GrpcServer::address() const {
  ListenAddress bound = address_;
  bound.port = port_;
  return bound.ToString();
}

void GrpcServer::Wait() {
  if (server_ != nullptr) server_->Wait();
}

void GrpcServer::Shutdown(std::chrono::system_clock::time_point deadline) {
  if (server_ == nullptr) return;
  domain_->Shutdown();
  if (auto* health = server_->GetHealthCheckService(); health != nullptr) health->Shutdown();
  server_->Shutdown(deadline);
}

}  // namespace medprof::server::rpc
