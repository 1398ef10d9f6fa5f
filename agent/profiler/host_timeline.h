// HostTimeline: the CPU backend's raw timeline — the op tracer's records of the first measured
// steps kept as host events (kind "op", one per finished LibTorch op; kind "phase", one per
// sub-phase and per measured step), so that `medprof export --format chrome-trace` has something
// to show for runs without a GPU trace.
//
// It hears ops as the tracer's OpListener: a per-thread stack of start times pairs each end with
// its begin; an op that ends on another thread than it began is dropped. Event names are the op
// or phase name alone; the step, phase and thread are fields of their own.
//
// Bounded: only the first `steps` measured steps and at most `max_events` events are kept (then
// truncated is set). Thread-safe: ops may end on any thread (a mutex guards the event list;
// the CPU backend's ops are coarse, so its cost does not show). Needs the tracker and aggregator
// it was given to outlive it.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "agent/profiler/op_aggregator.h"
#include "agent/profiler/op_tracer.h"
#include "agent/profiler/phase_tracker.h"
#include "medprof/v1/results.pb.h"

namespace medprof::profiler {

class HostTimeline : public OpListener {
 public:
  HostTimeline(const PhaseTracker* tracker, const OpAggregator* ops, int steps = 3, size_t max_events = 200000);

  void OnOpBegin(uint32_t op_id, uint32_t shape_id) override;
  void OnOpEnd(uint32_t op_id) override;
  // Sub-phases and measured steps, from the profiler's hooks (the workload's thread).
  void PhaseBegin(std::string_view name);
  void PhaseEnd(std::string_view name);
  void StepBegin();
  void StepEnd();

  // The kept events as Timeline records of at most `chunk` events each (ns since the earliest
  // event; origin_unix_ns = that event's wall time); empty when nothing was kept.
  std::vector<v1::Timeline> Records(size_t chunk = 20000) const;

 private:
  struct Event {
    std::string name;
    std::string kind;  // "op" | "phase"
    std::string phase;
    int step = 0;
    int64_t start_ns = 0;  // MonotonicNs
    int64_t duration_ns = 0;
  };
  // The measured step being kept, or -1 when none (not measuring, or past the kept steps).
  int KeptStep() const;
  void Add(Event e);

  const PhaseTracker* tracker_;
  const OpAggregator* ops_;
  const int steps_;
  const size_t max_events_;
  const int64_t unix_minus_monotonic_ns_;
  std::vector<std::pair<std::string, int64_t>> open_phases_;  // workload thread only
  int64_t step_start_ns_ = -1;                                // workload thread only
  mutable std::mutex mu_;
  std::vector<Event> events_;  // guarded by mu_
  bool truncated_ = false;     // guarded by mu_
};

}  // namespace medprof::profiler
