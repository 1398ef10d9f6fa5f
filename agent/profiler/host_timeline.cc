#include "agent/profiler/host_timeline.h"

#include <algorithm>
#include <chrono>

#include "common/clock.h"

namespace medprof::profiler {
namespace {

int64_t UnixNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Start times of the ops open on this thread, innermost last, with the timeline they belong to.
struct OpenOp {
  const HostTimeline* owner;
  uint32_t op_id;
  int64_t start_ns;
};
thread_local std::vector<OpenOp> t_open;

}  // namespace

HostTimeline::HostTimeline(const PhaseTracker* tracker, const OpAggregator* ops, int steps, size_t max_events)
    : tracker_(tracker),
      ops_(ops),
      steps_(steps),
      max_events_(max_events),
      unix_minus_monotonic_ns_(UnixNs() - MonotonicNs()) {}

int HostTimeline::KeptStep() const {
  if (!tracker_->measuring()) return -1;
  const int step = tracker_->measured_steps();  // completed measured steps = this one's index
  return step < steps_ ? step : -1;
}

void HostTimeline::OnOpBegin(uint32_t op_id, uint32_t /*shape_id*/) {
  if (KeptStep() < 0) return;
  t_open.push_back(OpenOp{this, op_id, MonotonicNs()});
}

void HostTimeline::OnOpEnd(uint32_t op_id) {
  // Pops this op's entry; entries above it are children that never ended (dropped).
  for (size_t i = t_open.size(); i-- > 0;) {
    if (t_open[i].owner != this || t_open[i].op_id != op_id) continue;
    const int64_t start = t_open[i].start_ns;
    t_open.resize(i);
    const int step = KeptStep();
    OpKey key;
    if (step < 0 || !ops_->Lookup(op_id, &key)) return;
    Add(Event{key.name, "op", key.phase, step, start, MonotonicNs() - start});
    return;
  }
}

void HostTimeline::PhaseBegin(std::string_view name) {
  if (KeptStep() >= 0) open_phases_.emplace_back(std::string(name), MonotonicNs());
}

void HostTimeline::PhaseEnd(std::string_view name) {
  for (size_t i = open_phases_.size(); i-- > 0;) {
    if (open_phases_[i].first != name) continue;
    const int64_t start = open_phases_[i].second;
    open_phases_.resize(i);
    const int step = KeptStep();
    if (step >= 0) Add(Event{std::string(name), "phase", std::string(name), step, start, MonotonicNs() - start});
    return;
  }
}

void HostTimeline::StepBegin() { step_start_ns_ = KeptStep() >= 0 ? MonotonicNs() : -1; }

void HostTimeline::StepEnd() {
  const int step = KeptStep();
  if (step >= 0 && step_start_ns_ >= 0) Add(Event{"step", "phase", "", step, step_start_ns_, MonotonicNs() - step_start_ns_});
  step_start_ns_ = -1;
  open_phases_.clear();
}

void HostTimeline::Add(Event e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= max_events_) {
    truncated_ = true;
    return;
  }
  events_.push_back(std::move(e));
}

std::vector<v1::Timeline> HostTimeline::Records(size_t chunk) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::Timeline> out;
  if (events_.empty()) return out;
  int64_t origin = events_[0].start_ns;
  int steps = 0;
  for (const Event& e : events_) {
    origin = std::min(origin, e.start_ns);
    steps = std::max(steps, e.step + 1);
  }
  chunk = std::max<size_t>(chunk, 1);
  for (size_t begin = 0; begin < events_.size(); begin += chunk) {
    v1::Timeline& t = out.emplace_back();
    t.set_origin_unix_ns(origin + unix_minus_monotonic_ns_);
    t.set_steps(steps);
    t.set_truncated(truncated_);
    for (size_t i = begin; i < std::min(events_.size(), begin + chunk); ++i) {
      const Event& e = events_[i];
      v1::TimelineEvent* o = t.add_events();
      o->set_name(e.name);
      o->set_kind(e.kind);
      o->set_start_ns(e.start_ns - origin);
      o->set_duration_ns(e.duration_ns);
      o->set_stream(-1);
      o->set_phase(e.phase);
      o->set_step(e.step);
    }
  }
  return out;
}

}  // namespace medprof::profiler
