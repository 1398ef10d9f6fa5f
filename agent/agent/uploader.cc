#include "agent/agent/uploader.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"

namespace medprof::agent {
namespace {

const Logger kLog("agent.upload");
constexpr int64_t kNsPerMs = 1'000'000;
constexpr int64_t kIdleWaitMs = 1'000;

// NOT_FOUND: no such run; FAILED_PRECONDITION: the run is no longer running there (lost,
// finished); PERMISSION_DENIED: the run is leased to another agent id.
bool MeansRunInactive(const absl::Status& s) {
  return absl::IsNotFound(s) || absl::IsFailedPrecondition(s) || absl::IsPermissionDenied(s);
}

}  // namespace

bool IsTransportError(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsCancelled(s) ||
         absl::IsAborted(s) || absl::IsUnknown(s);
}

Uploader::Uploader(Uplink* uplink, UploaderOptions options, UploaderHooks hooks)
    : uplink_(uplink), options_(options), hooks_(std::move(hooks)) {}

Uploader::~Uploader() { Stop(); }

void Uploader::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Uploader::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Uploader::Add(std::shared_ptr<RunSpool> spool) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto entry = std::make_shared<Entry>(Entry{std::move(spool), Backoff(options_.backoff)});
    const std::string run_id = entry->spool->run_id();
    entries_[run_id] = std::move(entry);
    notified_ = true;
  }
  cv_.notify_all();
}

void Uploader::Notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
  }
  cv_.notify_all();
}

std::vector<std::string> Uploader::RunIds() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [id, entry] : entries_) {
    if (!entry->rejected) out.push_back(id);
  }
  return out;
}

std::vector<std::string> Uploader::WaitIdle(int64_t deadline_ns) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!entries_.empty()) {
    const int64_t left_ns = deadline_ns - MonotonicNs();
    if (left_ns <= 0) break;
    idle_cv_.wait_for(lock, std::chrono::nanoseconds(left_ns));
  }
  std::vector<std::string> out;
  for (const auto& [id, entry] : entries_) out.push_back(id);
  return out;
}

void Uploader::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    // Sleep until a scheduled retry or throttled upload is due, something changed
    // (Notify), or a second passed. Runs with nothing to do are only looked at then.
    const int64_t now = MonotonicNs();
    int64_t wake = now + kIdleWaitMs * kNsPerMs;
    for (const auto& [id, entry] : entries_) {
      if (entry->next_attempt_ns > now) wake = std::min(wake, entry->next_attempt_ns);
    }
    if (!notified_) cv_.wait_for(lock, std::chrono::nanoseconds(wake - now));
    notified_ = false;
    if (stop_) break;
    std::vector<std::shared_ptr<Entry>> snapshot;
    for (const auto& [id, entry] : entries_) snapshot.push_back(entry);
    lock.unlock();

    const std::string agent_id = hooks_.agent_id ? hooks_.agent_id() : "";
    for (const std::shared_ptr<Entry>& entry : snapshot) {
      if (agent_id.empty()) break;  // not registered: the agent notifies once it is
      const int64_t t = MonotonicNs();
      // A run that just ended is not held back by the pacing of its live uploads.
      if (entry->next_attempt_ns > t && !(entry->throttled && entry->spool->outcome().has_value())) continue;
      entry->throttled = false;
      bool done = false;
      const absl::Status s = Process(*entry, agent_id, &done);
      if (done) {
        std::lock_guard<std::mutex> guard(mu_);
        entries_.erase(entry->spool->run_id());
        idle_cv_.notify_all();
        continue;
      }
      if (s.ok()) {
        entry->backoff.Reset();
      } else {
        const int64_t delay_ms = entry->backoff.NextDelayMs();
        entry->next_attempt_ns = MonotonicNs() + delay_ms * kNsPerMs;
        ReportError(entry->spool->run_id(), s, delay_ms);
      }
    }
    lock.lock();
  }
}

void Uploader::ReportError(const std::string& run_id, const absl::Status& s, int64_t delay_ms) {
  if (IsTransportError(s)) {
    if (hooks_.on_transport_error) hooks_.on_transport_error(s);
    kLog.Debug("run {}: {}; retrying in {} ms", run_id, s.ToString(), delay_ms);
  } else {
    kLog.Warn("run {}: {}; retrying in {} ms", run_id, s.ToString(), delay_ms);
  }
}

absl::Status Uploader::Process(Entry& entry, const std::string& agent_id, bool* done) {
  *done = false;
  RunSpool& spool = *entry.spool;
  std::optional<v1::FinishRunRequest> outcome = spool.outcome();
  if (entry.rejected) {
    if (!outcome.has_value()) return absl::OkStatus();  // its worker is still stopping
    if (absl::Status s = spool.Remove(); !s.ok())
      kLog.Error("run {}: removing its spool: {}", spool.run_id(), std::string(s.message()));
    *done = true;
    return absl::OkStatus();
  }
  if (entry.refused_reason.empty()) {
    if (!outcome.has_value()) {
      const int64_t next = entry.last_upload_ns + options_.live_interval_ms * kNsPerMs;
      if (entry.last_upload_ns != 0 && MonotonicNs() < next) {
        entry.next_attempt_ns = next;
        entry.throttled = true;
        return absl::OkStatus();
      }
    }
    MEDPROF_RETURN_IF_ERROR(UploadPending(entry, agent_id));
  }
  if (entry.rejected || !outcome.has_value()) return absl::OkStatus();
  return Finish(entry, agent_id, done);
}

absl::Status Uploader::UploadPending(Entry& entry, const std::string& agent_id) {
  RunSpool& spool = *entry.spool;
  const std::string& run_id = spool.run_id();
  int rounds_without_progress = 0;
  for (;;) {
    const uint64_t from = entry.resend_from != 0 ? entry.resend_from : spool.acked_seq() + 1;
    if (from > spool.last_seq()) {
      entry.resend_from = 0;
      return absl::OkStatus();
    }
    MEDPROF_ASSIGN_OR_RETURN(std::vector<v1::ResultChunk> chunks,
                             spool.ReadChunks(from, options_.max_chunks, options_.max_bytes));
    if (chunks.empty()) return absl::OkStatus();
    for (v1::ResultChunk& c : chunks) c.set_agent_id(agent_id);
    const uint64_t sent_through = chunks.back().seq();
    entry.last_upload_ns = MonotonicNs();
    absl::StatusOr<v1::UploadAck> ack = uplink_->Upload(chunks);
    if (!ack.ok()) {
      if (MeansRunInactive(ack.status())) {
        Reject(entry, std::string(ack.status().message()));
        return absl::OkStatus();
      }
      if (absl::IsInvalidArgument(ack.status()) || absl::IsResourceExhausted(ack.status())) {
        entry.refused_reason = absl::StrCat("the server refused results ", from, "..", sent_through, ": ",
                                            ack.status().message());
        kLog.Error("run {}: {}; stopping the run", run_id, entry.refused_reason);
        if (hooks_.on_run_rejected) hooks_.on_run_rejected(run_id, entry.refused_reason);
        return absl::OkStatus();
      }
      return ack.status();
    }
    if (hooks_.on_server_ok) hooks_.on_server_ok();
    const auto it = ack->committed_through_seq().find(run_id);
    uint64_t committed = it == ack->committed_through_seq().end() ? 0 : it->second;
    if (committed > spool.last_seq()) {
      kLog.Warn("run {}: the server acknowledged seq {} but the spool holds {}", run_id, committed,
                spool.last_seq());
      committed = spool.last_seq();
    }
    MEDPROF_RETURN_IF_ERROR(spool.SetAcked(committed));
    entry.resend_from = 0;
    kLog.Debug("run {}: sent {}..{}, server holds through {}", run_id, from, sent_through, committed);
    if (committed >= sent_through) {
      rounds_without_progress = 0;
      continue;
    }
    // The server holds fewer chunks than were sent (it lacks earlier ones): resend from there.
    if (++rounds_without_progress >= 3) {
      return absl::UnavailableError(absl::StrCat("UploadResults: the server acknowledged run ", run_id,
                                                 " only through seq ", committed, " after ", from, "..",
                                                 sent_through, " were sent"));
    }
  }
}

absl::Status Uploader::Finish(Entry& entry, const std::string& agent_id, bool* done) {
  RunSpool& spool = *entry.spool;
  const std::string& run_id = spool.run_id();
  v1::FinishRunRequest request = *spool.outcome();
  request.set_agent_id(agent_id);
  request.set_last_seq(spool.last_seq());
  if (!entry.refused_reason.empty()) {
    const std::string original = request.error();
    request.set_state(v1::RUN_FAILED);
    request.set_error(original.empty() ? entry.refused_reason
                                       : absl::StrCat(entry.refused_reason, "; ", original));
    request.set_last_seq(spool.acked_seq());
  } else if (spool.acked_seq() < spool.last_seq()) {
    return absl::OkStatus();  // not everything is acknowledged yet
  }
  absl::StatusOr<v1::FinishRunResponse> response = uplink_->FinishRun(request);
  if (response.ok()) {
    if (hooks_.on_server_ok) hooks_.on_server_ok();
    kLog.Info("run {}: finished on the server as {} ({} results){}{}; job is now {}", run_id,
              v1::RunState_Name(request.state()), request.last_seq(), request.error().empty() ? "" : ": ",
              request.error(), v1::JobState_Name(response->job_state()));
    if (absl::Status s = spool.Remove(); !s.ok())
      kLog.Error("run {}: removing its spool: {}", run_id, std::string(s.message()));
    *done = true;
    return absl::OkStatus();
  }
  const absl::Status& s = response.status();
  if (MeansRunInactive(s) || absl::IsOutOfRange(s)) {
    if (++entry.finish_refusals > options_.max_finish_refusals || spool.last_seq() == 0 ||
        !entry.refused_reason.empty()) {
      Reject(entry, std::string(s.message()));
      if (absl::Status r = spool.Remove(); !r.ok())
        kLog.Error("run {}: removing its spool: {}", run_id, std::string(r.message()));
      *done = true;
      return absl::OkStatus();
    }
    // Perhaps the server lacks some chunks (a gap): send everything again; its answer says
    // whether it still takes this run.
    kLog.Warn("run {}: {}; sending all {} results again", run_id, std::string(s.message()), spool.last_seq());
    entry.resend_from = 1;
    entry.next_attempt_ns = 0;
    Notify();
    return absl::OkStatus();
  }
  return s;
}

void Uploader::Reject(Entry& entry, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    entry.rejected = true;
  }
  kLog.Warn("run {}: the server no longer takes this run ({}); dropping its spool", entry.spool->run_id(),
            reason);
  if (hooks_.on_run_rejected) hooks_.on_run_rejected(entry.spool->run_id(), reason);
}

}  // namespace medprof::agent
