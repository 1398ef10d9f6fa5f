// Live progress of a study: per-job state from WatchStudy events, and its rendering.
//
// ProgressTracker folds StudyEvents into one JobProgress per job, keeping the jobs in the
// order they were registered (the study's job order) and ignoring events it has already seen
// (event_id not above the last one applied: the server replays a study's events from the
// start when a watch reconnects). States only move forward (queued -> running -> an end): the
// watch starts from a GetStudy snapshot and the server then replays the study's events from
// the first, so without that rule a running job went back to "queued" (its submission event)
// and forward again. The one way back is a requeue — a "queued" event naming the job's current
// run — which is shown as the state "requeued" with its reason.
//
// Times come from the events' unix_ms: a run's start (its "running" event), the end, and each
// measure-stage report, whose spacing over the steps it advanced is the last step's time. The
// agent is read from the lease event's message ("... on agent NAME (device ...)").
//
// ProgressView writes the tracker to a stream: on a terminal it redraws a fixed-width block in
// place (ANSI cursor movement): a summary line, a header, and one line per job with preset,
// target, state, phase, step i/N, last step time, elapsed, ETA and agent — column widths never
// change between frames, the step and bar appear only once measuring starts, and the block
// fits the width it is given (80 columns included). Otherwise it appends a plain line whenever
// a job's state or stage changes, a message arrives, or its step crosses a tenth of the stage.
//
// Neither class is thread-safe; the watch loop owns them on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "medprof/v1/service.pb.h"

namespace medprof::client {

struct JobProgress {
  std::string job_id;
  std::string preset;   // "?" for a job the study listing did not name
  std::string target;   // selector as submitted; "" = any agent
  int repeat = 0;
  v1::JobState state = v1::JOB_QUEUED;
  std::string run_id;
  std::string stage;    // "setup" | "warmup" | "measure" | "metrics" | "done" | ""
  int step = 0;
  int total = 0;
  std::string message;  // latest event message (e.g. the failure cause)
  bool requeued = false;  // queued again after a run was lost (shown as "requeued")
  std::string agent;      // from the lease event; "" until leased
  int64_t run_started_ms = 0;   // unix ms of the current run's "running" event; 0 = not started
  int64_t ended_ms = 0;         // unix ms of the job's end; 0 while not ended
  int64_t last_report_ms = 0;   // unix ms of the last measure report
  int64_t last_step_ms = -1;    // time of the last measured step; -1 = unknown
};

class ProgressTracker {
 public:
  // Registers jobs (in this order) before events arrive; a known job is updated in place.
  void AddJobs(const google::protobuf::RepeatedPtrField<v1::Job>& jobs);

  // Applies one event; false when it was already applied (duplicate after a reconnect).
  bool Apply(const v1::StudyEvent& event);

  const std::vector<JobProgress>& jobs() const { return jobs_; }
  const JobProgress* Find(const std::string& job_id) const;
  int Count(v1::JobState state) const;
  bool finished() const { return finished_; }
  int64_t last_event_id() const { return last_event_id_; }

 private:
  JobProgress* FindOrAdd(const std::string& job_id);
  void ApplyToJob(const v1::StudyEvent& event, JobProgress& j);
  void ApplyProgress(const v1::StudyEvent& event, JobProgress& j);

  std::vector<JobProgress> jobs_;
  int64_t last_event_id_ = 0;
  bool any_event_ = false;
  bool finished_ = false;
};

// "[#####---------------]" with `cells` cells; full for total <= 0 only when `done`.
std::string RenderBar(int step, int total, int cells, bool done);

// The terminal block: a summary line ("study <id>: 1 running, 2 queued, 1 succeeded"), then
// one aligned line per job. Each line is clipped to `width` code points (0 = no clipping).
// With more jobs than `max_job_lines` (0 = no limit), running, failed and queued jobs are
// shown first (in study order) and the last line counts the jobs left out, so the block
// never outgrows the terminal (a block taller than the screen cannot be redrawn in place).
// `now_ms` (unix ms) is the end of a running job's elapsed time. The header line counts as a
// job line for `max_job_lines`.
std::vector<std::string> RenderProgressLines(const std::string& study_id,
                                             const ProgressTracker& tracker, int width,
                                             int max_job_lines = 0, int64_t now_ms = 0);

// "812ms", "12.3s", "1m05s", "12m05s", "2h03m"; "-" for a negative duration. At most 6 columns.
std::string ShortDuration(int64_t ms);

// The agent named in a lease event's message ("attempt 1 of 3 on agent NAME (device 0: ...)");
// "" when the message does not name one.
std::string AgentFromLeaseMessage(const std::string& message);

// A line for logs: "job <id> <preset> <target|any>: <state>[ <stage> <step>/<total>][: message]".
std::string RenderPlainLine(const JobProgress& job);

class ProgressView {
 public:
  // `out` is borrowed and must outlive the view. `tty` selects in-place redraw; `width` is the
  // terminal width used to clip lines and `max_job_lines` the job lines that fit under the
  // summary line (0 = no limit).
  // `now_ms` returns the current unix time in ms (the system clock when null).
  ProgressView(std::ostream* out, bool tty, int width, int max_job_lines = 0,
               std::function<int64_t()> now_ms = nullptr);

  // Starts the view with the study's jobs (draws the first block on a terminal).
  void Start(const std::string& study_id,
             const google::protobuf::RepeatedPtrField<v1::Job>& jobs);
  // Applies an event and renders it; false when the event was a duplicate.
  bool OnEvent(const v1::StudyEvent& event);
  // Prints a note (e.g. "reconnecting") without breaking the live block.
  void Note(const std::string& text);
  // Ends the live block (the cursor stays below it).
  void Finish();

  const ProgressTracker& tracker() const { return tracker_; }

 private:
  void Redraw();

  std::ostream* out_;
  bool tty_;
  int width_;
  int max_job_lines_;
  std::string study_id_;
  ProgressTracker tracker_;
  std::function<int64_t()> now_ms_;
  int lines_drawn_ = 0;
};

}  // namespace medprof::client
