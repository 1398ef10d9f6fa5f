#include "client/progress.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/strings/str_join.h"
#include "client/format.h"
#include "client/text_table.h"

namespace medprof::client {
namespace {

constexpr int kBarCells = 20;

bool Terminal(v1::JobState s) {
  return s == v1::JOB_SUCCEEDED || s == v1::JOB_FAILED || s == v1::JOB_CANCELLED;
}

// queued 0 < running 1 < ended 2.
int StateRank(v1::JobState s) { return Terminal(s) ? 2 : s == v1::JOB_RUNNING ? 1 : 0; }

std::string JobLabel(const JobProgress& j) {
  std::string label = absl::StrCat(j.preset, " ", TargetLabel(j.target));
  if (j.repeat > 0) absl::StrAppend(&label, " r", j.repeat);
  return label;
}

// Tenths of the stage done; -1 when the stage has no total.
int Decile(const JobProgress& j) {
  if (j.total <= 0) return -1;
  return std::clamp(j.step * 10 / j.total, 0, 10);
}

}  // namespace

void ProgressTracker::AddJobs(const google::protobuf::RepeatedPtrField<v1::Job>& jobs) {
  for (const v1::Job& job : jobs) {
    JobProgress* p = FindOrAdd(job.job_id());
    p->preset = job.preset();
    p->target = job.target();
    p->repeat = job.repeat();
    if (job.state() != v1::JOB_STATE_UNSPECIFIED) p->state = job.state();
    if (!job.current_run_id().empty()) p->run_id = job.current_run_id();
    if (job.has_last_progress()) {
      p->stage = job.last_progress().stage();
      p->step = job.last_progress().step();
      p->total = job.last_progress().total();
    }
    if (!job.error().empty()) p->message = job.error();
  }
}

const JobProgress* ProgressTracker::Find(const std::string& job_id) const {
  for (const JobProgress& j : jobs_) {
    if (j.job_id == job_id) return &j;
  }
  return nullptr;
}

JobProgress* ProgressTracker::FindOrAdd(const std::string& job_id) {
  for (JobProgress& j : jobs_) {
    if (j.job_id == job_id) return &j;
  }
  JobProgress j;
  j.job_id = job_id;
  j.preset = "?";
  jobs_.push_back(std::move(j));
  return &jobs_.back();
}

int ProgressTracker::Count(v1::JobState state) const {
  return static_cast<int>(std::count_if(jobs_.begin(), jobs_.end(),
                                        [&](const JobProgress& j) { return j.state == state; }));
}

bool ProgressTracker::Apply(const v1::StudyEvent& event) {
  if (any_event_ && event.event_id() <= last_event_id_) return false;
  any_event_ = true;
  last_event_id_ = event.event_id();
  if (!event.job_id().empty()) ApplyToJob(event, *FindOrAdd(event.job_id()));
  if (event.study_finished()) finished_ = true;
  return true;
}

void ProgressTracker::ApplyToJob(const v1::StudyEvent& event, JobProgress& j) {
  const v1::JobState to = event.job_state();
  const bool requeue = to == v1::JOB_QUEUED && j.state == v1::JOB_RUNNING && !event.run_id().empty() &&
                       event.run_id() == j.run_id;
  // A replayed event older than the snapshot would move the job back: only a requeue may.
  const bool stale = to != v1::JOB_STATE_UNSPECIFIED && StateRank(to) < StateRank(j.state) && !requeue;
  if (stale) return;
  if (!event.run_id().empty() && event.run_id() != j.run_id) {
    // A new attempt starts from scratch.
    j.run_id = event.run_id();
    j.stage.clear();
    j.step = j.total = 0;
    j.message.clear();
    j.run_started_ms = j.last_report_ms = 0;
    j.last_step_ms = -1;
    j.agent.clear();
  }
  if (to != v1::JOB_STATE_UNSPECIFIED && to != j.state) {
    if (to == v1::JOB_QUEUED) {  // requeued: the progress of the lost run is void
      j.stage.clear();
      j.step = j.total = 0;
      j.last_step_ms = -1;
    }
    j.requeued = requeue || (j.requeued && to == v1::JOB_QUEUED);
    if (to == v1::JOB_RUNNING) j.run_started_ms = event.unix_ms();
    if (Terminal(to)) j.ended_ms = event.unix_ms();
    j.state = to;
    j.message.clear();  // a message belongs to the state it came with
  }
  if (to == v1::JOB_RUNNING && !event.has_progress()) {
    // The lease: its message names the agent (kept in its own column, not as the message).
    const std::string agent = AgentFromLeaseMessage(event.message());
    if (!agent.empty()) j.agent = agent;
    return;
  }
  if (event.has_progress()) ApplyProgress(event, j);
  if (!event.message().empty()) j.message = event.message();
}

void ProgressTracker::ApplyProgress(const v1::StudyEvent& event, JobProgress& j) {
  const v1::Progress& p = event.progress();
  if (p.stage() == "measure" && j.stage == "measure" && p.step() > j.step && j.last_report_ms > 0 &&
      event.unix_ms() >= j.last_report_ms) {
    j.last_step_ms = (event.unix_ms() - j.last_report_ms) / (p.step() - j.step);
  }
  if (p.stage() == "measure") j.last_report_ms = event.unix_ms();
  j.stage = p.stage();
  j.step = p.step();
  j.total = p.total();
  if (!p.message().empty()) j.message = p.message();
  // A progress report means a run is under way, whatever the last state event said.
  if (j.state == v1::JOB_QUEUED || j.state == v1::JOB_STATE_UNSPECIFIED) {
    j.state = v1::JOB_RUNNING;
    j.requeued = false;
    if (j.run_started_ms == 0) j.run_started_ms = event.unix_ms();
  }
}

std::string ShortDuration(int64_t ms) {
  if (ms < 0) return "-";
  if (ms < 1000) return absl::StrCat(ms, "ms");
  if (ms < 60'000) return absl::StrFormat("%.1fs", static_cast<double>(ms) / 1000.0);
  const int64_t s = ms / 1000;
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

std::string AgentFromLeaseMessage(const std::string& message) {
  const std::string kOn = " on agent ";
  const size_t at = message.find(kOn);
  if (at == std::string::npos) return "";
  const size_t from = at + kOn.size();
  const size_t end = message.find(" (", from);
  return message.substr(from, end == std::string::npos ? std::string::npos : end - from);
}

std::string RenderBar(int step, int total, int cells, bool done) {
  int filled = 0;
  if (done) {
    filled = cells;
  } else if (total > 0) {
    filled = std::clamp(step * cells / total, 0, cells);
  }
  return absl::StrCat("[", std::string(filled, '#'), std::string(cells - filled, '-'), "]");
}

namespace {

// The terminal block's columns: fixed widths, so a frame never shifts the one before it. The
// bar is a column only where the width leaves room for it (a wide terminal, or no limit).
struct Column {
  const char* title;
  int width;
  bool right;
};
constexpr Column kColumns[] = {{"PRESET", 8, false}, {"TARGET", 10, false}, {"STATE", 9, false},
                               {"PHASE", 7, false},  {"STEP", 7, true},     {"LAST", 6, true},
                               {"ELAPSED", 7, true}, {"ETA", 6, true}};
constexpr int kBarWidth = kBarCells + 2 + 5;  // "[####...] 100%"
constexpr int kWideEnoughForBar = 100;

std::string Fit(const std::string& text, const Column& c) {
  const std::string clipped = ClipToWidth(text, c.width);
  const size_t pad = static_cast<size_t>(c.width) - std::min<size_t>(DisplayWidth(clipped), c.width);
  return c.right ? std::string(pad, ' ') + clipped : clipped + std::string(pad, ' ');
}

std::string StateLabel(const JobProgress& j) {
  return j.state == v1::JOB_QUEUED && j.requeued ? std::string("requeued") : std::string(JobStateName(j.state));
}

// The cells of one job, in kColumns order, then the bar.
std::vector<std::string> JobCells(const JobProgress& j, int64_t now_ms) {
  const bool running = j.state == v1::JOB_RUNNING;
  const bool measuring = running && j.stage == "measure" && j.total > 0;
  std::string elapsed = "-", eta = "-", last = "-", step = "", bar = "";
  if (j.run_started_ms > 0 && (running || j.ended_ms > 0)) {
    elapsed = ShortDuration((running ? now_ms : j.ended_ms) - j.run_started_ms);
  }
  if (measuring) {
    step = absl::StrCat(j.step, "/", j.total);
    bar = absl::StrCat(RenderBar(j.step, j.total, kBarCells, false), " ",
                       std::clamp(j.step * 100 / j.total, 0, 100), "%");
    if (j.last_step_ms >= 0) eta = ShortDuration(j.last_step_ms * std::max(0, j.total - j.step));
  }
  if (j.last_step_ms >= 0 && (running || j.state == v1::JOB_SUCCEEDED)) last = ShortDuration(j.last_step_ms);
  const std::string target =
      j.repeat > 0 ? absl::StrCat(TargetLabel(j.target), " r", j.repeat) : TargetLabel(j.target);
  const std::string phase = running ? j.stage : j.state == v1::JOB_SUCCEEDED ? "done" : "";
  return {j.preset, target, StateLabel(j), phase, step, last, elapsed, eta, bar};
}

// The job lines to show: all, or (over the limit) running, failed, queued first, in study
// order, with the count of the others.
std::vector<size_t> ShownJobs(const std::vector<JobProgress>& all, int max_lines, size_t* hidden) {
  std::vector<size_t> shown(all.size());
  for (size_t i = 0; i < all.size(); ++i) shown[i] = i;
  *hidden = 0;
  if (max_lines <= 0 || all.size() <= static_cast<size_t>(max_lines)) return shown;
  auto rank = [](v1::JobState s) {
    switch (s) {
      case v1::JOB_RUNNING: return 0;
      case v1::JOB_FAILED: return 1;
      case v1::JOB_QUEUED: return 2;
      case v1::JOB_CANCELLED: return 3;
      default: return 4;
    }
  };
  std::stable_sort(shown.begin(), shown.end(), [&](size_t a, size_t b) { return rank(all[a].state) < rank(all[b].state); });
  const size_t keep = static_cast<size_t>(std::max(1, max_lines - 1));
  *hidden = shown.size() - keep;
  shown.resize(keep);
  std::sort(shown.begin(), shown.end());
  return shown;
}

// Cells joined at fixed widths; the agent (and a failure or requeue cause) after them.
std::string JoinRow(const std::vector<std::string>& cells, bool with_bar, const std::string& tail) {
  std::string line;
  for (size_t c = 0; c < std::size(kColumns); ++c) {
    if (c > 0) line += " ";
    line += Fit(cells[c], kColumns[c]);
  }
  if (with_bar) line += " " + Fit(cells.back(), Column{"", kBarWidth, false});
  line += " " + tail;
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

}  // namespace

std::vector<std::string> RenderProgressLines(const std::string& study_id, const ProgressTracker& tracker, int width,
                                             int max_job_lines, int64_t now_ms) {
  std::vector<std::string> parts;
  for (v1::JobState st : {v1::JOB_RUNNING, v1::JOB_QUEUED, v1::JOB_SUCCEEDED, v1::JOB_FAILED, v1::JOB_CANCELLED}) {
    const int n = tracker.Count(st);
    if (n > 0) parts.push_back(absl::StrCat(n, " ", JobStateName(st)));
  }
  std::vector<std::string> lines;
  lines.push_back(ClipToWidth(
      absl::StrCat("study ", study_id, ": ", parts.empty() ? "no jobs" : absl::StrJoin(parts, ", ")), width));
  const bool with_bar = width == 0 || width >= kWideEnoughForBar;
  std::vector<std::string> titles;
  for (const Column& c : kColumns) titles.push_back(c.title);
  titles.push_back("");
  lines.push_back(ClipToWidth(JoinRow(titles, with_bar, "AGENT"), width));
  size_t hidden = 0;
  const std::vector<JobProgress>& all = tracker.jobs();
  for (size_t index : ShownJobs(all, max_job_lines > 0 ? max_job_lines - 1 : 0, &hidden)) {
    const JobProgress& j = all[index];
    std::string tail = j.agent;
    const bool cause = j.state == v1::JOB_FAILED || j.state == v1::JOB_CANCELLED || j.requeued;
    if (cause && !j.message.empty()) tail = tail.empty() ? j.message : absl::StrCat(tail, ": ", j.message);
    lines.push_back(ClipToWidth(JoinRow(JobCells(j, now_ms), with_bar, tail), width));
  }
  if (hidden > 0) lines.push_back(ClipToWidth(absl::StrCat("\u2026 ", hidden, " more jobs not shown"), width));
  return lines;
}

std::string RenderPlainLine(const JobProgress& j) {
  std::string line = absl::StrCat("job ", j.job_id, " ", JobLabel(j), ": ", StateLabel(j));
  if (j.state == v1::JOB_RUNNING && !j.stage.empty()) {
    absl::StrAppend(&line, " ", j.stage);
    if (j.total > 0) absl::StrAppend(&line, " ", j.step, "/", j.total);
  }
  if (j.state == v1::JOB_RUNNING && !j.agent.empty()) absl::StrAppend(&line, " on ", j.agent);
  if (!j.message.empty() && (j.state != v1::JOB_SUCCEEDED)) absl::StrAppend(&line, ": ", j.message);
  return line;
}

ProgressView::ProgressView(std::ostream* out, bool tty, int width, int max_job_lines,
                           std::function<int64_t()> now_ms)
    : out_(out), tty_(tty), width_(width), max_job_lines_(max_job_lines), now_ms_(std::move(now_ms)) {
  if (!now_ms_) now_ms_ = [] { return absl::ToUnixMillis(absl::Now()); };
}

void ProgressView::Start(const std::string& study_id,
                         const google::protobuf::RepeatedPtrField<v1::Job>& jobs) {
  study_id_ = study_id;
  tracker_.AddJobs(jobs);
  if (tty_) {
    Redraw();
  } else {
    *out_ << "study " << study_id << ": watching " << tracker_.jobs().size()
          << (tracker_.jobs().size() == 1 ? " job" : " jobs") << "\n";
    out_->flush();
  }
}

bool ProgressView::OnEvent(const v1::StudyEvent& event) {
  const JobProgress* before_ptr = tracker_.Find(event.job_id());
  const std::optional<JobProgress> before =
      before_ptr ? std::optional<JobProgress>(*before_ptr) : std::nullopt;
  if (!tracker_.Apply(event)) return false;
  if (tty_) {
    Redraw();
    return true;
  }
  const JobProgress* after = tracker_.Find(event.job_id());
  if (after == nullptr) return true;  // a study-level event (e.g. the final one)
  const bool changed =
      !before || before->state != after->state || before->stage != after->stage ||
      (before->message != after->message && !after->message.empty()) ||
      Decile(*before) != Decile(*after) ||
      (after->total > 0 && after->step == after->total && before->step != after->step);
  if (changed) {
    *out_ << RenderPlainLine(*after) << "\n";
    out_->flush();
  }
  return true;
}

void ProgressView::Note(const std::string& text) {
  if (tty_ && lines_drawn_ > 0) {
    // Clear the block, print the note, draw the block again below it.
    *out_ << "\x1b[" << lines_drawn_ << "F\x1b[J";
    lines_drawn_ = 0;
    *out_ << text << "\n";
    Redraw();
    return;
  }
  *out_ << text << "\n";
  out_->flush();
}

void ProgressView::Finish() {
  if (tty_) Redraw();
  out_->flush();
}

void ProgressView::Redraw() {
  const std::vector<std::string> lines = RenderProgressLines(study_id_, tracker_, width_, max_job_lines_, now_ms_());
  std::string buf;
  if (lines_drawn_ > 0) buf += absl::StrCat("\x1b[", lines_drawn_, "F");
  for (const std::string& l : lines) buf += absl::StrCat("\x1b[2K", l, "\n");
  if (static_cast<int>(lines.size()) < lines_drawn_) buf += "\x1b[J";  // erase leftover lines
  *out_ << buf;
  out_->flush();
  lines_drawn_ = static_cast<int>(lines.size());
}

}  // namespace medprof::client
