#include "agent/worker/result_channel.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace medprof::worker {
namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr int kMaxSignal = 65;

// Crash handler state: plain globals (async-signal-safe to read).
std::atomic<ResultChannel*> g_crash_channel{nullptr};
std::string* g_crash_records[kMaxSignal] = {};

void OnFatalSignal(int signo) {
  ResultChannel* c = g_crash_channel.load();
  if (c != nullptr && signo > 0 && signo < kMaxSignal && g_crash_records[signo] != nullptr &&
      !c->sealed() && !c->writing_.load()) {
    const std::string& rec = *g_crash_records[signo];
    const char* p = rec.data();
    size_t n = rec.size();
    while (n > 0) {
      const ssize_t w = ::write(c->fd(), p, n);
      if (w <= 0) break;
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  // SA_RESETHAND restored the default action: re-raise to die of the same signal.
  ::raise(signo);
}

}  // namespace

ResultChannel::ResultChannel(std::unique_ptr<ResultWriter> writer, int fd)
    : writer_(std::move(writer)), fd_(fd) {}

ResultChannel::~ResultChannel() {
  ResultChannel* self = this;
  g_crash_channel.compare_exchange_strong(self, nullptr);
}

absl::StatusOr<std::unique_ptr<ResultChannel>> ResultChannel::OpenFile(const std::string& path) {
  // Opened here (not ResultWriter::OpenFile) because the crash handler needs the fd.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--out: cannot open ", path, ": ", std::strerror(errno)));
  }
  return std::unique_ptr<ResultChannel>(
      new ResultChannel(std::make_unique<ResultWriter>(fd, /*owns_fd=*/true), fd));
}

absl::StatusOr<std::unique_ptr<ResultChannel>> ResultChannel::FromFd(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--result-fd: ", fd, " is not an open file descriptor (", std::strerror(errno), ")"));
  }
  if ((flags & O_ACCMODE) == O_RDONLY) {
    return absl::InvalidArgumentError(absl::StrCat("--result-fd: ", fd, " is open read-only"));
  }
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // children of the worker must not hold the channel open
  return std::unique_ptr<ResultChannel>(
      new ResultChannel(std::make_unique<ResultWriter>(fd, /*owns_fd=*/false), fd));
}

absl::Status ResultChannel::WriteLocked(const v1::WorkerMessage& message) {
  writing_.store(true);
  absl::Status s = writer_->Write(message);
  writing_.store(false);
  return s;
}

absl::Status ResultChannel::Write(const v1::WorkerMessage& message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sealed_.load()) {
    return absl::FailedPreconditionError("result channel: already ended by a RunSummary or WorkerError");
  }
  return WriteLocked(message);
}

absl::Status ResultChannel::WriteTerminal(const v1::WorkerMessage& message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sealed_.load()) {
    return absl::FailedPreconditionError("result channel: already ended by a RunSummary or WorkerError");
  }
  sealed_.store(true);
  return WriteLocked(message);
}

absl::Status ResultChannel::WriteError(const std::string& kind, const std::string& message) {
  v1::WorkerMessage m;
  m.mutable_error()->set_kind(kind);
  m.mutable_error()->set_message(message);
  return WriteTerminal(m);
}

int64_t ResultChannel::records() const {
  std::lock_guard<std::mutex> lock(mu_);
  return writer_->messages_written();
}

void ResultChannel::InstallCrashHandler() {
  for (int signo : kFatalSignals) {
    if (g_crash_records[signo] == nullptr) {
      v1::WorkerMessage m;
      m.mutable_error()->set_kind("crash");
      m.mutable_error()->set_message(
          absl::StrCat("medprof-worker crashed: fatal signal ", signo, " (", strsignal(signo), ")"));
      g_crash_records[signo] = new std::string(EncodeDelimited(m));  // lives for the process
    }
  }
  g_crash_channel.store(this);
  struct sigaction sa {};
  sa.sa_handler = &OnFatalSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  for (int signo : kFatalSignals) sigaction(signo, &sa, nullptr);
}

}  // namespace medprof::worker
