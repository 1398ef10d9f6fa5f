#include "agent/profiler/phase_tracker.h"

namespace medprof::profiler {

PhaseTracker::PhaseTracker() {
  names_.emplace_back();
  current_.store(&names_.front(), std::memory_order_release);
}

const std::string* PhaseTracker::Intern(std::string_view name) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& n : names_) {
    if (n == name) return &n;
  }
  names_.emplace_back(name);
  return &names_.back();
}

void PhaseTracker::BeginStep(int index, bool measured) {
  step_.store(index, std::memory_order_release);
  measuring_.store(measured, std::memory_order_release);
  // A step starts outside any sub-phase, whatever a previous step left open.
  stack_.clear();
  current_.store(Intern(""), std::memory_order_release);
}

void PhaseTracker::EndStep() {
  if (measuring_.load(std::memory_order_acquire)) {
    measured_steps_.fetch_add(1, std::memory_order_acq_rel);
  }
  measuring_.store(false, std::memory_order_release);
  step_.store(-1, std::memory_order_release);
  stack_.clear();
  current_.store(Intern(""), std::memory_order_release);
}

void PhaseTracker::BeginPhase(std::string_view name) {
  stack_.push_back(current_.load(std::memory_order_acquire));
  current_.store(Intern(name), std::memory_order_release);
}

void PhaseTracker::EndPhase(std::string_view name) {
  // Unbalanced EndPhase calls (a name that is not the current phase) are tolerated: the
  // tracker returns to the enclosing phase either way, so one bad pair cannot shift the rest.
  (void)name;
  if (stack_.empty()) {
    current_.store(Intern(""), std::memory_order_release);
    return;
  }
  current_.store(stack_.back(), std::memory_order_release);
  stack_.pop_back();
}

}  // namespace medprof::profiler
