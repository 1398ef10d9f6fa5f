// The agent's durable record of one run: <work-dir>/spool/<run_id>/.
//
//   assignment.pb  the Assignment (binary), written before the worker starts
//   job.pb         its WorkloadConfig (binary): what the worker reads (--job)
//   results.log    the worker's records as length-delimited ResultChunk (seq 1, 2, 3, ...;
//                  agent_id left empty, filled at upload), each fsync'ed before it counts
//   acked          the highest seq the server acknowledged (decimal), replaced atomically
//   outcome.pb     the FinishRunRequest (binary) once the run ended, replaced atomically
//   worker.stderr, worker.stdout   the worker's output (never parsed; stderr's tail is kept)
//
// A chunk exists (last_seq counts it, the uploader may send it) only after it is on disk.
// Open() resumes a spool left by an earlier agent process: a record cut short at the end of
// results.log (the agent died mid-write) is dropped and the file truncated to the complete
// ones; such a record was never acknowledged to anyone.
//
// Thread-safe: the job runner appends while the uploader reads and records acks.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "medprof/v1/service.pb.h"

namespace medprof::agent {

// Run ids name directories: 1..128 of [A-Za-z0-9._-], not "." or "..".
absl::Status ValidateRunId(const std::string& run_id);

class RunSpool {
 public:
  // Creates <dir> (which must not exist) and writes assignment.pb and job.pb durably.
  static absl::StatusOr<std::unique_ptr<RunSpool>> Create(const std::string& dir,
                                                          const v1::Assignment& assignment);
  // Opens an existing run directory; the run id is the directory's name.
  static absl::StatusOr<std::unique_ptr<RunSpool>> Open(const std::string& dir);
  ~RunSpool();
  RunSpool(const RunSpool&) = delete;
  RunSpool& operator=(const RunSpool&) = delete;

  const std::string& run_id() const { return run_id_; }
  const std::string& dir() const { return dir_; }
  std::string job_path() const { return dir_ + "/job.pb"; }
  std::string stderr_path() const { return dir_ + "/worker.stderr"; }
  std::string stdout_path() const { return dir_ + "/worker.stdout"; }
  // The assignment, when assignment.pb was readable.
  const std::optional<v1::Assignment>& assignment() const { return assignment_; }

  // Appends `message` as chunk last_seq()+1 and fsyncs it. On error nothing is appended
  // (a partial write is cut off again) and the status names the file and the cause
  // (RESOURCE_EXHAUSTED for a full disk).
  absl::Status Append(const v1::WorkerMessage& message);
  // Chunks from_seq.. (at most max_chunks, and no more than max_bytes unless the first
  // alone is larger), as stored.
  absl::StatusOr<std::vector<v1::ResultChunk>> ReadChunks(uint64_t from_seq, size_t max_chunks,
                                                          size_t max_bytes) const;

  uint64_t last_seq() const;
  uint64_t acked_seq() const;
  // Records (durably) that the server holds every chunk <= seq. seq must be <= last_seq().
  absl::Status SetAcked(uint64_t seq);

  // Records the run's end: the last write to the directory by its runner. The request is
  // kept in memory even if the write fails (a full disk), so the uploader can still finish
  // the run; the status reports the write. outcome() is set only after the write returned.
  absl::Status WriteOutcome(const v1::FinishRunRequest& outcome);
  std::optional<v1::FinishRunRequest> outcome() const;

  // What Open() had to repair ("" when nothing): e.g. "dropped a record cut short at byte 812".
  const std::string& repair_note() const { return repair_note_; }

  // Deletes the run directory. The object must not be used afterwards.
  absl::Status Remove();

 private:
  RunSpool(std::string dir, std::string run_id, int fd);
  absl::Status Scan();

  const std::string dir_;
  const std::string run_id_;
  const int fd_;  // results.log, O_RDWR | O_APPEND
  std::optional<v1::Assignment> assignment_;
  std::string repair_note_;

  mutable std::mutex mu_;
  std::vector<uint64_t> offsets_;  // offsets_[i]: byte offset of chunk seq i+1
  uint64_t end_ = 0;               // bytes of complete chunks
  uint64_t acked_ = 0;
  std::optional<v1::FinishRunRequest> outcome_;
  absl::Status broken_;  // set when a failed append could not be cut off: no more appends
};

// The run directories under a spool root, sorted by name.
absl::StatusOr<std::vector<std::string>> ListRunDirs(const std::string& spool_root);

}  // namespace medprof::agent
