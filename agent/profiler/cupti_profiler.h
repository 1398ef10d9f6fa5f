// CuptiProfiler: the "cupti" backend — op aggregates plus the CUPTI activity trace layer, the
// sampling layer and, on request, the metrics layer.
//
// Create() starts CUPTI activity tracing at once and must run before anything creates the
// process's CUDA context (the workload, the worker's ceilings probe): on a context that already
// existed PC sampling never starts and no kernel gets its op, nor then a signature the metrics
// layer could measure. It fails with the CUPTI call's status when tracing is not possible (no
// driver: CUPTI_ERROR_UNKNOWN; another profiler attached: MULTIPLE_SUBSCRIBERS) — backend.h then
// falls back to the CPU backend. Start() installs the op observer with input shapes on: around
// every LibTorch op the profiler pushes EncodeExternalId(op slot, shape id) as a CUSTOM0 external
// correlation id (and a phase-only id around every sub-phase), so each kernel is attributed to its
// innermost op, phase and the op's input shapes — its launch signature. Step windows are
// timestamped in the records' clock after a cudaDeviceSynchronize, so GPU work counts for the step
// that launched it and warm-up work is left out. Kernel and signature aggregation and the raw
// timeline are KernelAggregator's.
//
// After the measured steps (AfterMeasurement, on extra steps): trace on/off step pairs give the trace
// overhead; PM sampling runs a window of one step (PC sampling, on since context creation and
// drained at every measured step's end, is off by then: the counter users never overlap); the
// metrics layer (metrics_layer.h) runs with the activity trace paused. Each layer that cannot run
// says why in Layers(); none of them fails the run.
//
// Thread safety: as Profiler (profiler.h). One per process (CUPTI state is process-wide).
#pragma once

#include <cuda.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/profiler/cupti_callbacks.h"
#include "agent/profiler/cupti_tracer.h"
#include "agent/profiler/gpu_probe.h"
#include "agent/profiler/kernel_aggregator.h"
#include "agent/profiler/launch_signature.h"
#include "agent/profiler/metrics_layer.h"
#include "agent/profiler/metrics_request.h"
#include "agent/profiler/op_aggregator.h"
#include "agent/profiler/op_tracer.h"
#include "agent/profiler/pc_sampler.h"
#include "agent/profiler/phase_tracker.h"
#include "agent/profiler/profiler.h"
#include "agent/profiler/shape_table.h"
#include "agent/profiler/stall_samples.h"
#include "common/roofline.h"

namespace medprof::profiler {

struct CuptiProfilerOptions {
  GpuInfo gpu;                       // the device the workload uses (limits -> occupancy)
  CuptiTracerOptions tracer;         // buffer pool and flush period
  int timeline_steps = 3;            // measured steps kept in the raw timeline
  bool sampling = true;              // PC sampling + PM sampling (need counter permission)
  uint32_t pc_period_exponent = 17;  // PC sampling every 2^N SM cycles
  MetricsRequest metrics;            // the metrics layer (off unless enabled)
  int overhead_pairs = 3;            // trace on/off step pairs for the overhead figure (0: not measured)
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
  void OnStepEnd(const workload::StepReport& report) override;
  void OnPhaseBegin(std::string_view name) override;
  void OnPhaseEnd(std::string_view name) override;

  absl::Status AfterMeasurement(const StepRunner& run, const ProgressFn& progress) override;
  std::vector<v1::WorkerMessage> Results() const override;
  double trace_overhead_pct() const override { return trace_overhead_pct_; }
  int64_t metrics_wall_ms() const override { return metrics_->wall_ms(); }
  void SetRoofs(roofline::Roofs roofs) override { roofs_ = std::move(roofs); }

  // The raw timeline of the first measured steps (for Chrome-trace export).
  std::vector<TimelineEvent> Timeline() const { return kernels_->Timeline(); }
  KernelAggregatorCounters counters() const { return kernels_->counters(); }

 private:
  explicit CuptiProfiler(const CuptiProfilerOptions& options) : options_(options) {}
  void OnOpBegin(uint32_t op_id, uint32_t shape_id) override;
  void OnOpEnd(uint32_t op_id) override;
  void PushExternalId(uint64_t id);
  void PopExternalId();
  // The op (name, phase, shapes) an external correlation id stands for; false for none.
  bool ResolveExternalId(uint64_t external_id, OpKey* out) const;
  // The signature of a launch seen by the metrics layer's launch callback, on the launching thread.
  bool ResolveLaunch(const LaunchEvent& e, const std::function<bool(const std::string&)>& wanted_kernel,
                     LaunchSignature* out);
  void SynchronizeDevice(const char* where);
  void OnContextCreated(CUcontext ctx);
  absl::Status MeasureTraceOverhead(const StepRunner& run, const ProgressFn& progress);
  absl::Status RunPmWindow(const StepRunner& run, const ProgressFn& progress);
  v1::MetricValues DerivedMetrics() const;
  std::vector<v1::KernelFinding> Findings() const;

  // Sampling layer.
  std::unique_ptr<PcSampler> pc_;
  absl::Status pc_status_ = absl::UnavailableError("PC sampling: no CUDA context was created");
  StallSamples stalls_;
  bool pc_collected_ = false;
  absl::Status pm_status_ = absl::UnavailableError("PM sampling: not run");
  std::optional<v1::UtilizationTimeline> utilization_;
  // Metrics layer.
  std::unique_ptr<MetricsLayer> metrics_;
  std::mutex demangled_mu_;
  std::unordered_map<std::string, std::string> demangled_;  // CUPTI symbol name -> demangled
  std::vector<int64_t> measured_wall_ns_;  // the measured steps' wall times
  // Trace overhead.
  double trace_overhead_pct_ = 0.0;
  std::string overhead_note_;
  roofline::Roofs roofs_;  // the run's ceilings (SetRoofs), for the findings

  const CuptiProfilerOptions options_;
  PhaseTracker tracker_;
  OpAggregator ops_;
  ShapeTable shapes_;
  std::unique_ptr<KernelAggregator> kernels_;
  std::unique_ptr<CuptiTracer> cupti_;
  std::unique_ptr<OpTracer> op_tracer_;
  int phase_pushes_ = 0;  // external ids pushed by OnPhaseBegin and not yet popped
  bool stopped_ = false;
};

}  // namespace medprof::profiler
