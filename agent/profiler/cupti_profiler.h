// CuptiProfiler: the "cupti" backend — op aggregates plus the CUPTI activity trace layer.
//
// Create() starts CUPTI activity tracing at once (before the workload creates its CUDA
// context, so nothing is missed) and fails with the CUPTI call's status when tracing is not
// possible (no driver: CUPTI_ERROR_UNKNOWN; another profiler attached:
// MULTIPLE_SUBSCRIBERS) — backend.h then falls back to the CPU backend. Start() installs the
// op observer, which pushes `op id + 1` as a CUSTOM0 external correlation id around every
// LibTorch op (and the phase-only id around every sub-phase), so each kernel is attributed
// to its innermost op and phase. Step windows are timestamped in the records' clock after a
// cudaDeviceSynchronize, so GPU work counts for the step that launched it and warm-up work is
// left out. Kernel aggregation and the raw timeline are KernelAggregator's.
//
// Layers: "cpu" and "trace" ran; "sampling" (PC/PM sampling) and "metrics" (range profiler)
// are reported as not run: "not implemented in this build".
//
// Thread safety: as Profiler (profiler.h). One per process (CUPTI state is process-wide).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/profiler/cupti_tracer.h"
#include "agent/profiler/gpu_probe.h"
#include "agent/profiler/kernel_aggregator.h"
#include "agent/profiler/op_aggregator.h"
#include "agent/profiler/op_tracer.h"
#include "agent/profiler/phase_tracker.h"
#include "agent/profiler/profiler.h"

namespace medprof::profiler {

struct CuptiProfilerOptions {
  GpuInfo gpu;                 // the device the workload uses (limits -> occupancy)
  CuptiTracerOptions tracer;   // buffer pool and flush period
  int timeline_steps = 3;      // measured steps kept in the raw timeline
};

class CuptiProfiler : public Profiler, private OpListener {
 public:
  static absl::StatusOr<std::unique_ptr<CuptiProfiler>> Create(const CuptiProfilerOptions& options);
  ~CuptiProfiler() override;

  std::string backend() const override { return "cupti"; }
  absl::Status Start() override;
  absl::Status Stop() override;
  v1::OpAggregates Ops() const override;
  std::optional<v1::KernelAggregates> Kernels() const override;
  std::vector<v1::LayerStatus> Layers() const override;
  void DescribeEnvironment(v1::Environment* env) const override;
  int measured_steps() const override { return tracker_.measured_steps(); }

  void OnStepBegin(int index, bool measured) override;
  void OnStepEnd(const meddpm::StepReport& report) override;
  void OnPhaseBegin(std::string_view name) override;
  void OnPhaseEnd(std::string_view name) override;

  // The raw timeline of the first measured steps (for Chrome-trace export).
  std::vector<TimelineEvent> Timeline() const { return kernels_->Timeline(); }
  KernelAggregatorCounters counters() const { return kernels_->counters(); }

 private:
  explicit CuptiProfiler(const CuptiProfilerOptions& options) : options_(options) {}
  void OnOpBegin(uint32_t op_id) override;
  void OnOpEnd(uint32_t op_id) override;
  void SynchronizeDevice(const char* where);

  const CuptiProfilerOptions options_;
  PhaseTracker tracker_;
  OpAggregator ops_;
  std::unique_ptr<KernelAggregator> kernels_;
  std::unique_ptr<CuptiTracer> cupti_;
  std::unique_ptr<OpTracer> op_tracer_;
  int phase_pushes_ = 0;  // external ids pushed by OnPhaseBegin and not yet popped
  bool stopped_ = false;
};

}  // namespace medprof::profiler
