#include "server/rpc/tls_reloader.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/tls_files.h"

namespace medprof::server::rpc {
namespace {

const Logger kLog("tls");

// Writes `text` to dir/name through a temporary file and rename(2), mode 0600.
absl::Status WriteAtomically(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string tmp = absl::StrCat(dir, "/.", name, ".tmp");
  const std::string path = absl::StrCat(dir, "/", name);
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("TLS copy ", tmp, ": open: ", std::strerror(errno)));
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool closed = close(fd) == 0;
  if (!written || !closed || rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("TLS copy ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

struct ReadFiles {
  tls::PemFile cert, key, ca;
};

// Reads and checks the operator's files.
absl::StatusOr<ReadFiles> ReadAndCheck(const TlsFiles& files) {
  ReadFiles r;
  MEDPROF_ASSIGN_OR_RETURN(r.cert, tls::ReadPemFile("--tls-cert", files.cert));
  MEDPROF_ASSIGN_OR_RETURN(r.key, tls::ReadPemFile("--tls-key", files.key));
  MEDPROF_RETURN_IF_ERROR(tls::CheckKeyCert(r.cert, r.key, nullptr));
  if (!files.client_ca.empty()) {
    MEDPROF_ASSIGN_OR_RETURN(r.ca, tls::ReadPemFile("--tls-client-ca", files.client_ca));
    MEDPROF_RETURN_IF_ERROR(tls::CheckCaBundle(r.ca));
  }
  return r;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsReloader>> TlsReloader::Create(const TlsFiles& files) {
  MEDPROF_ASSIGN_OR_RETURN(ReadFiles r, ReadAndCheck(files));
  std::string tmpl = (std::filesystem::temp_directory_path() / "medprof-server-tls-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("TLS copies: mkdtemp ", tmpl, ": ", std::strerror(errno)));
  }
  auto reloader = std::unique_ptr<TlsReloader>(new TlsReloader(files, tmpl));
  MEDPROF_RETURN_IF_ERROR(reloader->Install(r.cert.pem, r.key.pem, r.ca.pem));
  return reloader;
}

TlsReloader::~TlsReloader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string TlsReloader::cert_path() const { return dir_ + "/cert.pem"; }
std::string TlsReloader::key_path() const { return dir_ + "/key.pem"; }
std::string TlsReloader::client_ca_path() const { return files_.client_ca.empty() ? "" : dir_ + "/ca.pem"; }

absl::Status TlsReloader::Install(const std::string& cert, const std::string& key, const std::string& ca) {
  // Key first: gRPC's watcher re-reads when a file changes between its reads of the pair.
  MEDPROF_RETURN_IF_ERROR(WriteAtomically(dir_, "key.pem", key));
  MEDPROF_RETURN_IF_ERROR(WriteAtomically(dir_, "cert.pem", cert));
  if (!files_.client_ca.empty()) MEDPROF_RETURN_IF_ERROR(WriteAtomically(dir_, "ca.pem", ca));
  installed_ = cert + key + ca;
  return absl::OkStatus();
}

absl::Status TlsReloader::ReloadOnce() {
  std::lock_guard<std::mutex> lock(mu_);
  absl::StatusOr<ReadFiles> r = ReadAndCheck(files_);
  // What was read, for "unchanged" and "already refused" (a read error counts by its message).
  const std::string version = r.ok() ? r->cert.pem + r->key.pem + r->ca.pem : std::string(r.status().message());
  if (r.ok() && version == installed_) return absl::OkStatus();
  if (!r.ok()) {
    if (version != rejected_) {
      kLog.Warn("renewed TLS files refused, keeping the current certificate: {}", std::string(r.status().message()));
    }
    rejected_ = version;
    return r.status();
  }
  MEDPROF_RETURN_IF_ERROR(Install(r->cert.pem, r->key.pem, r->ca.pem));
  rejected_.clear();
  kLog.Info("TLS files renewed: {}", tls::DescribeLeaf(r->cert.pem));
  return absl::OkStatus();
}

void TlsReloader::Start(std::chrono::seconds interval) {
  thread_ = std::thread([this, interval] { Loop(interval); });
}

void TlsReloader::Loop(std::chrono::seconds interval) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval, [this] { return stop_; })) {
    lock.unlock();
    (void)ReloadOnce();  // logs its own refusals
    lock.lock();
  }
}

}  // namespace medprof::server::rpc
