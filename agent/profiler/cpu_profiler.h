// CpuProfiler: the "cpu" backend — LibTorch op aggregates only, no GPU layers.
//
// Used when the workload runs on the CPU (no GPU, or --device cpu) and as the fallback when
// CUPTI cannot trace (the workload may then still run on the GPU). Collects per-(op, phase)
// counts, inclusive and self host time over measured steps through OpTracer, and the raw host
// timeline of the first measured steps (host_timeline.h; Results() sends it). Layers: "cpu"
// ran; "trace", "sampling" and "metrics" did not, with `no_gpu_reason` as the cause.
//
// Thread safety: as Profiler (profiler.h). One started OpTracer per process: do not Start
// two profilers at once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/profiler/host_timeline.h"
#include "agent/profiler/op_aggregator.h"
#include "agent/profiler/op_tracer.h"
#include "agent/profiler/phase_tracker.h"
#include "agent/profiler/profiler.h"

namespace medprof::profiler {

struct CpuProfilerOptions {
  // Why the GPU layers did not run; recorded as their LayerStatus.reason. Default "no GPU".
  std::string no_gpu_reason = "no GPU";
};

class CpuProfiler : public Profiler {
 public:
  static absl::StatusOr<std::unique_ptr<CpuProfiler>> Create(const CpuProfilerOptions& options);
  ~CpuProfiler() override;

  std::string backend() const override { return "cpu"; }
  absl::Status Start() override;
  absl::Status Stop() override;
  v1::OpAggregates Ops() const override;
  std::optional<v1::KernelAggregates> Kernels() const override { return std::nullopt; }
  std::vector<v1::LayerStatus> Layers() const override;
  void DescribeEnvironment(v1::Environment* env) const override;
  int measured_steps() const override { return tracker_.measured_steps(); }

  void OnStepBegin(int index, bool measured) override {
    tracker_.BeginStep(index, measured);
    timeline_.StepBegin();
  }
  void OnStepEnd(const workload::StepReport& report) override {
    timeline_.StepEnd();  // while the step still counts as measured
    tracker_.EndStep();
  }
  void OnPhaseBegin(std::string_view name) override {
    tracker_.BeginPhase(name);
    timeline_.PhaseBegin(name);
  }
  void OnPhaseEnd(std::string_view name) override {
    timeline_.PhaseEnd(name);
    tracker_.EndPhase(name);
  }
  // The host timeline (Timeline records), when any step was measured.
  std::vector<v1::WorkerMessage> Results() const override;

 private:
  explicit CpuProfiler(const CpuProfilerOptions& options) : options_(options) {}

  const CpuProfilerOptions options_;
  PhaseTracker tracker_;
  OpAggregator ops_;
  HostTimeline timeline_{&tracker_, &ops_};
  std::unique_ptr<OpTracer> tracer_;
};

}  // namespace medprof::profiler
