// Moves spooled results to the server and finishes runs there, surviving server restarts,
// network loss and agent restarts (the spool is the source of truth).
//
// One thread. For every run it holds, it streams the chunks after the acknowledged seq
// through UploadResults (at most max_chunks / max_bytes per stream), records the server's
// committed_through_seq durably in the spool, and — once the run has an outcome and every
// chunk is acknowledged — calls FinishRun, then deletes the run directory. Failures are
// retried with per-run capped exponential backoff.
//
// What the server's answers are taken to mean:
//   UploadResults NOT_FOUND, FAILED_PRECONDITION or PERMISSION_DENIED (no such run, it is no
//       longer running there, or it is leased to another agent id): the run is no longer
//       active there (requeued, or already finished): the spool is dropped (after its worker
//       stops — on_run_rejected asks for that) and this is logged;
//   FinishRun FAILED_PRECONDITION / NOT_FOUND / PERMISSION_DENIED / OUT_OF_RANGE (e.g. "seq
//       5..7 missing, resend"): every chunk is sent again from seq 1 (the server stores
//       resends once, so one full resend closes any gap), then FinishRun is retried; refused
//       again (the run is lost or already finished there), the run is dropped as above;
//   UploadResults INVALID_ARGUMENT / RESOURCE_EXHAUSTED (a chunk the server will never take):
//       the worker is stopped and the run finished FAILED with the server's reason, with
//       last_seq = the last acknowledged chunk;
//   anything else (UNAVAILABLE, DEADLINE_EXCEEDED, ...): retried with backoff.
//
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "agent/agent/backoff.h"
#include "agent/agent/spool.h"
#include "agent/agent/uplink.h"

namespace medprof::agent {

struct UploaderOptions {
  // Chunks per UploadResults stream, 1..10000 (default 256).
  size_t max_chunks = 256;
  // Bytes per stream (a single larger chunk still goes alone), default 4 MiB.
  size_t max_bytes = 4 << 20;
  // Least time between two uploads of a run whose worker still runs, in ms (default 500),
  // so a chatty worker does not cost one stream per record.
  int64_t live_interval_ms = 500;
  // Refused FinishRun calls, each followed by a full resend, before the run is dropped
  // (default 1: a full resend closes every gap, so a second refusal has another cause).
  int max_finish_refusals = 1;
  BackoffOptions backoff;
};

struct UploaderHooks {
  // The current agent id; "" while the agent is not registered (nothing is sent then).
  std::function<std::string()> agent_id;
  // A call failed in a way that says "the server is unreachable" (UNAVAILABLE, deadline...).
  std::function<void(const absl::Status&)> on_transport_error;
  // A call succeeded.
  std::function<void()> on_server_ok;
  // The server no longer accepts this run (or refuses its results): stop its worker if it
  // still runs. `reason` is the server's answer.
  std::function<void(const std::string& run_id, const std::string& reason)> on_run_rejected;
};

class Uploader {
 public:
  Uploader(Uplink* uplink, UploaderOptions options, UploaderHooks hooks);
  ~Uploader();
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  void Start();
  // Ends the thread; pending runs stay in their spool directories.
  void Stop();
  // Takes charge of a run directory (a new run, or one found at start).
  void Add(std::shared_ptr<RunSpool> spool);
  // Something changed (a chunk, an outcome, the agent registered): look again now.
  void Notify();
  // Runs still held (not finished on the server, not dropped), sorted.
  std::vector<std::string> RunIds() const;
  // Waits until no run is held or `deadline_ns` (MonotonicNs) passes; returns RunIds().
  std::vector<std::string> WaitIdle(int64_t deadline_ns);

 private:
  struct Entry {
    std::shared_ptr<RunSpool> spool;
    Backoff backoff;
    int64_t next_attempt_ns = 0;
    bool throttled = false;  // next_attempt_ns paces a live run (not a retry backoff)
    int64_t last_upload_ns = 0;
    uint64_t resend_from = 0;  // 0: from acked+1
    int finish_refusals = 0;
    bool rejected = false;       // drop once the worker is done
    std::string refused_reason;  // the server refuses a chunk: finish FAILED with this
  };

  void Loop();
  // One pass over a run. *done: the run is finished on the server (or dropped) and its
  // directory gone. An error is retried after the entry's backoff.
  absl::Status Process(Entry& entry, const std::string& agent_id, bool* done);
  absl::Status UploadPending(Entry& entry, const std::string& agent_id);
  absl::Status Finish(Entry& entry, const std::string& agent_id, bool* done);
  void Reject(Entry& entry, const std::string& reason);
  void ReportError(const std::string& run_id, const absl::Status& s, int64_t delay_ms);

  Uplink* const uplink_;
  const UploaderOptions options_;
  const UploaderHooks hooks_;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // wakes the loop
  std::condition_variable idle_cv_;  // wakes WaitIdle
  bool stop_ = false;
  bool notified_ = false;
  std::map<std::string, std::shared_ptr<Entry>> entries_;
  std::thread thread_;
};

// True for statuses that mean "could not talk to the server" rather than an answer from it.
bool IsTransportError(const absl::Status& s);

}  // namespace medprof::agent
