#include "client/progress.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/format.h"
#include "client/text_table.h"

namespace medprof::client {
namespace {

constexpr int kBarCells = 20;

bool Terminal(v1::JobState s) {
  return s == v1::JOB_SUCCEEDED || s == v1::JOB_FAILED || s == v1::JOB_CANCELLED;
}

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
  if (!event.job_id().empty()) {
    JobProgress* j = FindOrAdd(event.job_id());
    if (!event.run_id().empty() && event.run_id() != j->run_id) {
      // A new attempt starts from scratch.
      j->run_id = event.run_id();
      j->stage.clear();
      j->step = j->total = 0;
      j->message.clear();
    }
    if (event.job_state() != v1::JOB_STATE_UNSPECIFIED && event.job_state() != j->state) {
      if (event.job_state() == v1::JOB_QUEUED) {  // requeued: the progress of the lost run is void
        j->stage.clear();
        j->step = j->total = 0;
      }
      j->state = event.job_state();
      j->message.clear();  // a message belongs to the state it came with
    }
    if (event.has_progress()) {
      const v1::Progress& p = event.progress();
      j->stage = p.stage();
      j->step = p.step();
      j->total = p.total();
      if (!p.message().empty()) j->message = p.message();
      // A progress report means a run is under way, whatever the last state event said.
      if (j->state == v1::JOB_QUEUED || j->state == v1::JOB_STATE_UNSPECIFIED) j->state = v1::JOB_RUNNING;
    }
    if (!event.message().empty()) j->message = event.message();
  }
  if (event.study_finished()) finished_ = true;
  return true;
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

std::vector<std::string> RenderProgressLines(const std::string& study_id,
                                             const ProgressTracker& tracker, int width,
                                             int max_job_lines) {
  std::vector<std::string> parts;
  for (v1::JobState st : {v1::JOB_RUNNING, v1::JOB_QUEUED, v1::JOB_SUCCEEDED, v1::JOB_FAILED, v1::JOB_CANCELLED}) {
    const int n = tracker.Count(st);
    if (n > 0) parts.push_back(absl::StrCat(n, " ", JobStateName(st)));
  }
  std::vector<std::string> lines;
  lines.push_back(ClipToWidth(
      absl::StrCat("study ", study_id, ": ", parts.empty() ? "no jobs" : absl::StrJoin(parts, ", ")), width));

  // Cells per job, then pad each column to its widest cell.
  // Which jobs get a line.
  const std::vector<JobProgress>& all = tracker.jobs();
  std::vector<size_t> shown(all.size());
  for (size_t i = 0; i < all.size(); ++i) shown[i] = i;
  size_t hidden = 0;
  if (max_job_lines > 0 && all.size() > static_cast<size_t>(max_job_lines)) {
    auto rank = [](v1::JobState s) {
      switch (s) {
        case v1::JOB_RUNNING: return 0;
        case v1::JOB_FAILED: return 1;
        case v1::JOB_QUEUED: return 2;
        case v1::JOB_CANCELLED: return 3;
        default: return 4;
      }
    };
    std::stable_sort(shown.begin(), shown.end(),
                     [&](size_t a, size_t b) { return rank(all[a].state) < rank(all[b].state); });
    const size_t keep = static_cast<size_t>(std::max(1, max_job_lines - 1));
    hidden = shown.size() - keep;
    shown.resize(keep);
    std::sort(shown.begin(), shown.end());
  }

  constexpr int kCols = 7;
  std::vector<std::array<std::string, kCols>> rows;
  for (size_t index : shown) {
    const JobProgress& j = all[index];
    std::array<std::string, kCols> r;
    r[0] = j.preset;
    r[1] = j.repeat > 0 ? absl::StrCat(TargetLabel(j.target), " r", j.repeat) : TargetLabel(j.target);
    r[2] = JobStateName(j.state);
    if (j.state == v1::JOB_RUNNING) {
      r[3] = j.stage;
      if (j.total > 0) {
        r[4] = absl::StrCat(j.step, "/", j.total);
        r[5] = absl::StrCat(RenderBar(j.step, j.total, kBarCells, false), " ",
                            std::clamp(j.step * 100 / j.total, 0, 100), "%");
      }
    } else if (j.state == v1::JOB_SUCCEEDED) {
      r[3] = "done";
      r[5] = absl::StrCat(RenderBar(0, 0, kBarCells, true), " 100%");
    }
    if (j.state == v1::JOB_FAILED || j.state == v1::JOB_CANCELLED || j.state == v1::JOB_QUEUED) {
      r[6] = j.message;
    }
    rows.push_back(std::move(r));
  }
  std::array<size_t, kCols> w{};
  for (const auto& r : rows) {
    for (int c = 0; c < kCols - 1; ++c) w[c] = std::max(w[c], DisplayWidth(r[c]));
  }
  for (const auto& r : rows) {
    // Identity and state aligned; stage, step and bar aligned where the job has them; the
    // message (failure cause, requeue reason) follows whatever came last.
    const bool has_stage = !r[3].empty() || !r[4].empty() || !r[5].empty();
    std::string line;
    for (int c = 0; c < (has_stage ? kCols - 1 : 3); ++c) {
      if (w[c] == 0) continue;
      if (!line.empty()) line += "  ";
      const size_t pad = w[c] - DisplayWidth(r[c]);
      if (c == 4) line.append(pad, ' ');  // step/total right-aligned
      line += r[c];
      if (c != 4) line.append(pad, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (!r[6].empty()) line += "  " + r[6];
    lines.push_back(ClipToWidth(line, width));
  }
  if (hidden > 0) lines.push_back(ClipToWidth(absl::StrCat("\u2026 ", hidden, " more jobs not shown"), width));
  return lines;
}

std::string RenderPlainLine(const JobProgress& j) {
  std::string line = absl::StrCat("job ", j.job_id, " ", JobLabel(j), ": ", JobStateName(j.state));
  if (j.state == v1::JOB_RUNNING && !j.stage.empty()) {
    absl::StrAppend(&line, " ", j.stage);
    if (j.total > 0) absl::StrAppend(&line, " ", j.step, "/", j.total);
  }
  if (!j.message.empty() && (j.state != v1::JOB_SUCCEEDED)) absl::StrAppend(&line, ": ", j.message);
  return line;
}

ProgressView::ProgressView(std::ostream* out, bool tty, int width, int max_job_lines)
    : out_(out), tty_(tty), width_(width), max_job_lines_(max_job_lines) {}

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
  const std::vector<std::string> lines = RenderProgressLines(study_id_, tracker_, width_, max_job_lines_);
  std::string buf;
  if (lines_drawn_ > 0) buf += absl::StrCat("\x1b[", lines_drawn_, "F");
  for (const std::string& l : lines) buf += absl::StrCat("\x1b[2K", l, "\n");
  if (static_cast<int>(lines.size()) < lines_drawn_) buf += "\x1b[J";  // erase leftover lines
  *out_ << buf;
  out_->flush();
  lines_drawn_ = static_cast<int>(lines.size());
}

}  // namespace medprof::client
