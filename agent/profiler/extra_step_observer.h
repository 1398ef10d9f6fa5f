// ExtraStepObserver: the observer of the steps the profiler runs after the measured ones (trace
// overhead pairs, the PM-sampling window, the metrics layer's steps). It forwards every hook to the
// profiler, so the work is the same as in a measured step (ops and phases push their correlation
// ids), records each step's wall time, and lets the caller act at phase boundaries (the metrics
// layer's phase ranges). Used on the workload's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "workloads/workload.h"

namespace medprof::profiler {

class ExtraStepObserver : public workload::PhaseObserver {
 public:
  explicit ExtraStepObserver(workload::PhaseObserver* inner) : inner_(inner) {}
  void OnStepBegin(int index, bool measured) override { inner_->OnStepBegin(index, measured); }
  void OnStepEnd(const workload::StepReport& report) override {
    inner_->OnStepEnd(report);
    wall_ns.push_back(report.wall_ns);
  }
  void OnPhaseBegin(std::string_view name) override {
    inner_->OnPhaseBegin(name);
    if (phase_begin) phase_begin(name);
  }
  void OnPhaseEnd(std::string_view name) override {
    if (phase_end) phase_end(name);
    inner_->OnPhaseEnd(name);
  }

  std::vector<int64_t> wall_ns;                                  // each step's wall time
  std::function<void(std::string_view)> phase_begin, phase_end;  // after begin / before end

 private:
  workload::PhaseObserver* inner_;
};

}  // namespace medprof::profiler
