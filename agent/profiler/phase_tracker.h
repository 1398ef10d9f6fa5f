// PhaseTracker: where the workload is right now, as the profiler's hooks see it.
//
// The thread that runs the workload reports steps and named sub-phases ("fwd", "bwd", "optim",
// "sample_step") through the PhaseObserver hooks; the profiler forwards them here. Readers on
// any thread (RecordFunction callbacks also run on autograd and intra-op threads) ask for the
// current phase, whether the current step is measured, and the step index.
//
// Thread safety: Begin*/End* must be called from one thread (the workload's); the readers are
// lock-free and may be called from any thread. Phase names are interned: the reference that
// phase() returns stays valid for the tracker's lifetime.
#pragma once

#include <atomic>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace medprof::profiler {

class PhaseTracker {
 public:
  PhaseTracker();
  PhaseTracker(const PhaseTracker&) = delete;
  PhaseTracker& operator=(const PhaseTracker&) = delete;

  void BeginStep(int index, bool measured);
  // Ends the current step; counts it when it was measured.
  void EndStep();
  // Sub-phases may nest; EndPhase returns to the enclosing one (or "" outside all).
  void BeginPhase(std::string_view name);
  void EndPhase(std::string_view name);

  // True between BeginStep(measured=true) and EndStep.
  bool measuring() const { return measuring_.load(std::memory_order_acquire); }
  // Index of the current step (warm-up and measured steps count separately); -1 between steps.
  int step() const { return step_.load(std::memory_order_acquire); }
  // Current sub-phase name; "" outside sub-phases.
  const std::string& phase() const { return *current_.load(std::memory_order_acquire); }
  // Measured steps completed so far.
  int measured_steps() const { return measured_steps_.load(std::memory_order_acquire); }

 private:
  const std::string* Intern(std::string_view name);

  std::mutex mu_;                  // guards names_ (appends only; elements never move)
  std::deque<std::string> names_;  // interned phase names; names_[0] == ""
  std::atomic<const std::string*> current_;
  std::vector<const std::string*> stack_;  // workload thread only
  std::atomic<bool> measuring_{false};
  std::atomic<int> step_{-1};
  std::atomic<int> measured_steps_{0};
};

}  // namespace medprof::profiler
