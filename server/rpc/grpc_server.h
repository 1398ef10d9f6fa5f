// GrpcServer: medprof-server's network endpoint — both services, the gRPC health service,
// TLS (optionally mutual), message size limits and keepalive policy — with an explicit
// lifecycle: Create() -> Start(domain) -> Wait() -> Shutdown(deadline).
//
// Plaintext is allowed only on a loopback address (127.0.0.0/8, ::1, localhost); any other
// address needs --tls-cert and --tls-key, and Create() refuses it otherwise with a message
// saying what to pass. Likewise authentication (auth.h) may be off only on loopback; unset, it
// is off on loopback and tokens elsewhere. Port 0 picks a free port; port() then tells which.
//
// With TLS, the certificate, key and client CA files are checked before the server listens
// (parse, key matches certificate, not expired: tls_reloader.h) and re-read every
// tls_reload_interval_s: replacing them (e.g. a renewed certificate) takes effect for new
// connections without a restart when the new files pass the same checks; otherwise the
// server keeps its current credentials and logs why.
//
// Shutdown() may be called from any thread (the signal
// thread); Wait() returns once it has drained.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <optional>

#include "absl/status/statusor.h"
#include "server/domain/domain.h"
#include "server/rpc/auth.h"

namespace grpc {
class Server;
}

namespace medprof::server::rpc {

class MedprofServiceImpl;
class AgentServiceImpl;
class ModelServiceImpl;
class TlsReloader;

struct GrpcServerOptions {
  // HOST:PORT to listen on ("127.0.0.1:7070", "[::1]:0", "0.0.0.0:7443"). Required.
  std::string listen;
  // PEM files: server certificate chain and private key (both or neither), and the CA that
  // client certificates must chain to (mutual TLS; needs the other two). Default: none.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // Largest request message accepted, bytes (default limits::kMaxRequestBytes, 16 MiB).
  int max_receive_message_bytes = 16 << 20;
  // Bearer tokens required (kTokens) or not (kOff, loopback only). Unset: off on a loopback
  // address, tokens elsewhere.
  std::optional<AuthMode> auth;
  // Seconds between checks of the TLS files for a new certificate (1..86400; default 60).
  int tls_reload_interval_s = 60;
};

// A parsed HOST:PORT.
struct ListenAddress {
  std::string host;  // without brackets
  int port = 0;
  // "host:port", with brackets around an IPv6 host.
  std::string ToString() const;
};
absl::StatusOr<ListenAddress> ParseListenAddress(const std::string& text);
// 127.0.0.0/8, ::1 and "localhost".
bool IsLoopback(const std::string& host);

class GrpcServer {
 public:
  // Checks the options without touching files or the network (the listen address, the TLS
  // flag combinations, plaintext only on loopback).
  static absl::Status CheckOptions(const GrpcServerOptions& options);
  // Checks the options and reads and checks the TLS files (FAILED_PRECONDITION naming the
  // file and the cause); binds nothing yet.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Create(const GrpcServerOptions& options);
  ~GrpcServer();

  // Binds and starts serving `domain`, which must outlive the server. UNAVAILABLE when the
  // address cannot be bound — also when another process listens on the port: SO_REUSEPORT is
  // off, so two servers never split one port's connections.
  absl::Status Start(Domain* domain);
  // The bound port (after Start()).
  int port() const { return port_; }
  // "host:port" actually listened on (after Start()).
  std::string address() const;
  // True when connections are TLS.
  bool tls() const { return tls_ != nullptr; }
  bool mutual_tls() const { return tls_ != nullptr && !options_.tls_client_ca_file.empty(); }
  // The TLS files' reloader (nullptr without TLS); tests call its ReloadOnce().
  TlsReloader* tls_reloader() const { return tls_.get(); }
  // The authentication mode in force.
  AuthMode auth_mode() const { return auth_mode_; }
  // Blocks until the server has shut down.
  void Wait();
  // Wakes long-polls and watches, stops accepting calls, and waits for in-flight calls until
  // `deadline`, after which they are cancelled.
  void Shutdown(std::chrono::system_clock::time_point deadline);

 private:
  GrpcServer(GrpcServerOptions options, ListenAddress address);

  const GrpcServerOptions options_;
  const ListenAddress address_;
  Domain* domain_ = nullptr;
  std::unique_ptr<TlsReloader> tls_;
  AuthMode auth_mode_ = AuthMode::kOff;
  std::unique_ptr<Authenticator> authenticator_;
  std::unique_ptr<MedprofServiceImpl> medprof_service_;
  std::unique_ptr<AgentServiceImpl> agent_service_;
  std::unique_ptr<ModelServiceImpl> model_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace medprof::server::rpc
