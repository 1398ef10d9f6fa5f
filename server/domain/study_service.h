// StudyService: what people do with studies — submit, look, watch, cancel — and their runs.
//
// SubmitStudy turns presets x targets x repeats into jobs (repeat-major, so repeats of
// different presets interleave in the queue), each with the shared config plus its preset,
// defaults applied and validated (common/workload_config.h). Any refusal is INVALID_ARGUMENT
// naming the field and its allowed range, and leaves the store unchanged. CancelStudy marks
// queued and running jobs cancelled; agents learn it from their next heartbeat. WatchStudy
// sends the study's events from the first, then live, and ends after the event with
// study_finished = true.
//
// GetStudy, ListStudies, ListRuns and GetRun run on the domain's QueryPool (query_pool.h: lower CPU
// priority than writes).
//
// Thread-safe. Holds references into its DomainCore.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/domain/call_context.h"
#include "server/domain/core.h"
#include "server/domain/types.h"

namespace medprof::server {

class StudyService {
 public:
  explicit StudyService(DomainCore& core) : core_(core) {}

  absl::StatusOr<SubmitStudyResult> SubmitStudy(const CallContext& ctx, const SubmitStudyRequest& request);
  absl::StatusOr<StudyView> GetStudy(const CallContext& ctx, const std::string& study_id);
  absl::StatusOr<ListStudiesResult> ListStudies(const CallContext& ctx, const ListStudiesRequest& request);
  // Returns how many jobs were cancelled.
  absl::StatusOr<int> CancelStudy(const CallContext& ctx, const std::string& study_id, const std::string& reason);
  // Calls `sink` with each event in event_id order; `sink` returns false when the caller is
  // gone (the watch then ends with CANCELLED). OK after the study_finished event;
  // UNAVAILABLE when the server shuts down first; CANCELLED when the caller goes away.
  absl::Status WatchStudy(const CallContext& ctx, const std::string& study_id,
                          const std::function<bool(const StudyEvent&)>& sink);
  // Newest first.
  absl::StatusOr<std::vector<RunView>> ListRuns(const CallContext& ctx, const ListRunsRequest& request);
  // With steps, ops, kernels and metrics.
  absl::StatusOr<RunView> GetRun(const CallContext& ctx, const std::string& run_id);

 private:
  // The queries' bodies; the public methods run them on the query pool (query_pool.h).
  absl::StatusOr<StudyView> DoGetStudy(const std::string& study_id);
  absl::StatusOr<ListStudiesResult> DoListStudies(const CallContext& ctx, const ListStudiesRequest& request);
  absl::StatusOr<std::vector<RunView>> DoListRuns(const CallContext& ctx, const ListRunsRequest& request);
  absl::StatusOr<RunView> DoGetRun(const std::string& run_id);

  DomainCore& core_;
};

// The jobs a submission makes, validated, without touching the store (exposed for tests).
// `max_attempts_default` fills max_attempts = 0.
absl::StatusOr<std::vector<JobView>> PlanJobs(const SubmitStudyRequest& request, int max_attempts_default,
                                              int max_jobs_per_study);

}  // namespace medprof::server
