// TlsReloader: the server's certificate, key and client CA, checked (common/tls_files.h)
// before gRPC ever reads them — at start-up and at every renewal.
//
// gRPC's FileWatcherCertificateProvider takes whatever the files hold, so a key that does not
// match the certificate would be served and every handshake would fail. The reloader therefore
// keeps checked copies in a private directory (mode 0700, removed by the destructor) and gRPC
// watches those: Create() checks the operator's files and installs them; every interval the
// reloader re-reads the operator's files and, when they changed, installs them only if they
// pass — otherwise it logs why (once per bad version) and the server keeps its current
// credentials.
//
// Owns the private directory and its polling thread. Thread-safe: ReloadOnce() may run
// beside the polling thread (one mutex).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace medprof::server::rpc {

struct TlsFiles {
  std::string cert;       // --tls-cert (required)
  std::string key;        // --tls-key (required)
  std::string client_ca;  // --tls-client-ca ("" = no mutual TLS)
};

class TlsReloader {
 public:
  // Reads and checks the files (FAILED_PRECONDITION naming the flag, file and cause) and
  // installs checked copies. Starts no thread.
  static absl::StatusOr<std::unique_ptr<TlsReloader>> Create(const TlsFiles& files);
  ~TlsReloader();
  TlsReloader(const TlsReloader&) = delete;
  TlsReloader& operator=(const TlsReloader&) = delete;

  // Paths of the checked copies, for gRPC's file watcher ("" for an absent client CA).
  std::string cert_path() const;
  std::string key_path() const;
  std::string client_ca_path() const;
  // Calls ReloadOnce() every `interval` until destroyed.
  void Start(std::chrono::seconds interval);
  // Re-reads the operator's files: OK when unchanged or renewed (installed, logged); else the
  // reason, logged once per bad version, and the installed copies stay as they were.
  absl::Status ReloadOnce();

 private:
  TlsReloader(TlsFiles files, std::string dir) : files_(std::move(files)), dir_(std::move(dir)) {}
  absl::Status Install(const std::string& cert, const std::string& key, const std::string& ca);
  void Loop(std::chrono::seconds interval);

  const TlsFiles files_;
  const std::string dir_;
  std::mutex mu_;
  std::string installed_;  // cert + key + ca as last installed
  std::string rejected_;   // the last version refused (not logged twice)
  bool stop_ = false;
  std::condition_variable cv_;
  std::thread thread_;
};

}  // namespace medprof::server::rpc
