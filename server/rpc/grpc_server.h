// GrpcServer: medprof-server's network endpoint — both services, the gRPC health service,
// TLS (optionally mutual), message size limits and keepalive policy — with an explicit
// lifecycle: Create() -> Start(domain) -> Wait() -> Shutdown(deadline).
//
// Plaintext is allowed only on a loopback address (127.0.0.0/8, ::1, localhost); any other
// address needs --tls-cert and --tls-key, and Create() refuses it otherwise with a message
// saying what to pass. Port 0 picks a free port; port() then tells which.
//
// Shutdown() may be called from any thread (the signal
// thread); Wait() returns once it has drained.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/domain/domain.h"

namespace grpc {
class Server;
}

namespace medprof::server::rpc {

class MedprofServiceImpl;
class AgentServiceImpl;

struct GrpcServerOptions {
  // HOST:PORT to listen on ("127.0.0.1:7070", "[::1]:0", "0.0.0.0:7443"). Required.
  std::string listen;
  // PEM files: server certificate chain and private key (both or neither), and the CA that
  // client certificates must chain to (mutual TLS; needs the other two). Default: none.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // Largest request message accepted, bytes (default 16 MiB).
  int max_receive_message_bytes = 16 << 20;
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
  // Checks the options and reads the TLS files; binds nothing yet.
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Create(const GrpcServerOptions& options);
  ~GrpcServer();

  // Binds and starts serving `domain`, which must outlive the server. UNAVAILABLE when the
  // address cannot be bound.
  absl::Status Start(Domain* domain);
  // The bound port (after Start()).
  int port() const { return port_; }
  // "host:port" actually listened on (after Start()).
  std::string address() const;
  // True when connections are TLS.
  bool tls() const { return !cert_pem_.empty(); }
  bool mutual_tls() const { return !client_ca_pem_.empty(); }
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
  std::string cert_pem_, key_pem_, client_ca_pem_;
  std::unique_ptr<MedprofServiceImpl> medprof_service_;
  std::unique_ptr<AgentServiceImpl> agent_service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace medprof::server::rpc
