// ResultChannel: the worker's side of the result stream, with the record-order rules enforced.
//
// Wraps common/result_stream.h's ResultWriter (length-delimited WorkerMessage records on an
// fd, each flushed as written). Exactly one terminal record — RunSummary or WorkerError — ends
// the stream: WriteTerminal seals the channel and every later write is refused, so a
// WorkerError is always the LAST record. Writes from several threads (the workload thread,
// the signal thread's hard stop) are serialized by a mutex, so records never interleave.
//
// InstallCrashHandler() pre-encodes a WorkerError{kind: "crash"} per fatal signal (SIGSEGV,
// SIGBUS, SIGILL, SIGFPE, SIGABRT) and installs handlers that write it with write(2) — unless
// the channel is sealed or a record is being written at that instant — and then re-raise the
// signal with the default action. One channel per process may install the handler.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/result_stream.h"
#include "medprof/v1/results.pb.h"

namespace medprof::worker {

class ResultChannel {
 public:
  // Creates/truncates `path`.
  static absl::StatusOr<std::unique_ptr<ResultChannel>> OpenFile(const std::string& path);
  // An fd the parent passed (not closed by the channel). INVALID_ARGUMENT if it is not open
  // for writing.
  static absl::StatusOr<std::unique_ptr<ResultChannel>> FromFd(int fd);
  ~ResultChannel();

  // Any non-terminal record. FAILED_PRECONDITION once sealed.
  absl::Status Write(const v1::WorkerMessage& message);
  // RunSummary or WorkerError; seals the channel. FAILED_PRECONDITION if already sealed.
  absl::Status WriteTerminal(const v1::WorkerMessage& message);
  absl::Status WriteError(const std::string& kind, const std::string& message);

  bool sealed() const { return sealed_.load(); }
  int64_t records() const;
  int fd() const { return fd_; }

  void InstallCrashHandler();

 private:
  ResultChannel(std::unique_ptr<ResultWriter> writer, int fd);
  absl::Status WriteLocked(const v1::WorkerMessage& message);

  mutable std::mutex mu_;
  std::unique_ptr<ResultWriter> writer_;
  const int fd_;
  std::atomic<bool> sealed_{false};

 public:
  // Read by the crash handler (async-signal-safe atomics).
  std::atomic<bool> writing_{false};
};

}  // namespace medprof::worker
