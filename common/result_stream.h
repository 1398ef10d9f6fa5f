// The worker's result channel: length-delimited medprof.v1.WorkerMessage records on a file
// descriptor (protobuf's delimited format: varint size, then the message bytes).
//
// ResultWriter is used by medprof-worker (fd passed by the agent, or a file it opened);
// every Write is flushed to the fd so the agent sees progress as it happens. ResultReader is
// used by the agent and tests; it tells a clean end of stream from a record cut short (a
// worker killed mid-write), which it reports as DATA_LOSS.
//
// Neither class is thread-safe; each owns its buffer but not the fd unless `owns_fd`.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "medprof/v1/results.pb.h"

namespace medprof {

inline constexpr size_t kMaxWorkerMessageBytes = 64 << 20;  // one record, 64 MiB

class ResultWriter {
 public:
  // Writes to `fd`; closes it on destruction when owns_fd.
  ResultWriter(int fd, bool owns_fd);
  ~ResultWriter();
  ResultWriter(const ResultWriter&) = delete;
  ResultWriter& operator=(const ResultWriter&) = delete;

  // Opens (creates/truncates) a file for writing.
  static absl::StatusOr<std::unique_ptr<ResultWriter>> OpenFile(const std::string& path);

  absl::Status Write(const v1::WorkerMessage& message);
  int64_t messages_written() const { return written_; }

 private:
  int fd_;
  bool owns_fd_;
  int64_t written_ = 0;
};

class ResultReader {
 public:
  ResultReader(int fd, bool owns_fd);
  ~ResultReader();
  ResultReader(const ResultReader&) = delete;
  ResultReader& operator=(const ResultReader&) = delete;

  static absl::StatusOr<std::unique_ptr<ResultReader>> OpenFile(const std::string& path);

  // Reads the next record. Returns false at a clean end of stream, DATA_LOSS for a truncated
  // or oversized record, INVALID_ARGUMENT for bytes that do not parse.
  absl::StatusOr<bool> Next(v1::WorkerMessage* message);

 private:
  bool ReadFull(void* buf, size_t n, size_t* got);
  int fd_;
  bool owns_fd_;
  int64_t records_ = 0;
};

// Encodes one record as it appears on the channel (size prefix + bytes).
std::string EncodeDelimited(const v1::WorkerMessage& message);

}  // namespace medprof
