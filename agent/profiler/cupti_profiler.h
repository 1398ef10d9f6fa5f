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
// Sampling layer: PC sampling (continuous) is enabled when the CUDA context is created and
// drained at every measured step's end (warm-up samples are discarded) -> per-kernel stall
// shares; PM sampling runs in its own window of one step after the measured steps (the three
// counter users never overlap) -> a utilization timeline. Metrics layer (on request): the range
// profiler, auto range + kernel replay armed by launch callbacks around the first launch of
// each top-K kernel (by trace time) with its dominant grid — core counters in one extra step,
// stalls/throughputs/SASS mix in another — then user range + user replay around
// the phases (fwd, bwd, optim, sample_step), one extra step per pass. Trace overhead: pairs of
// extra steps with the activity trace on and paused, interleaved. Each layer that cannot run
// says why in Layers(); none of them fails the run.
//
// Thread safety: as Profiler (profiler.h). One per process (CUPTI state is process-wide).
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/profiler/counter_session.h"
#include "agent/profiler/cupti_host.h"
#include "agent/profiler/cupti_tracer.h"
#include "agent/profiler/gpu_probe.h"
#include "agent/profiler/kernel_aggregator.h"
#include "agent/profiler/metric_catalog.h"
#include "agent/profiler/op_aggregator.h"
#include "agent/profiler/op_tracer.h"
#include "agent/profiler/pc_sampler.h"
#include "agent/profiler/phase_tracker.h"
#include "agent/profiler/profiler.h"
#include "agent/profiler/stall_samples.h"

namespace medprof::profiler {

struct CuptiProfilerOptions {
  GpuInfo gpu;                       // the device the workload uses (limits -> occupancy)
  CuptiTracerOptions tracer;         // buffer pool and flush period
  int timeline_steps = 3;            // measured steps kept in the raw timeline
  bool sampling = true;              // PC sampling + PM sampling (need counter permission)
  uint32_t pc_period_exponent = 17;  // PC sampling every 2^N SM cycles
  bool metrics = false;              // run the metrics layer (range profiler)
  int metrics_top_k = 20;            // kernels the metrics layer profiles
  int metrics_launches = 3;          // launches of each profiled (median per metric; 1 = the first only)
  int overhead_pairs = 3;            // trace on/off step pairs for the overhead figure (0: not measured)
  std::string counter_api = "auto";  // "auto" (by compute capability) | "range" | "legacy"
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

  absl::Status AfterMeasurement(const StepRunner& run, const ProgressFn& progress) override;
  std::vector<v1::WorkerMessage> Results() const override;
  double trace_overhead_pct() const override { return trace_overhead_pct_; }
  int64_t metrics_wall_ms() const override { return metrics_wall_ms_; }

  // The raw timeline of the first measured steps (for Chrome-trace export).
  std::vector<TimelineEvent> Timeline() const { return kernels_->Timeline(); }
  KernelAggregatorCounters counters() const { return kernels_->counters(); }

 private:
  explicit CuptiProfiler(const CuptiProfilerOptions& options) : options_(options) {}
  void OnOpBegin(uint32_t op_id) override;
  void OnOpEnd(uint32_t op_id) override;
  void SynchronizeDevice(const char* where);
  void OnContextCreated(CUcontext ctx);
  absl::Status MeasureTraceOverhead(const StepRunner& run, const ProgressFn& progress);
  absl::Status RunPmWindow(const StepRunner& run, const ProgressFn& progress);
  absl::Status RunMetrics(const StepRunner& run, const ProgressFn& progress);
  // One kernel-replay session: `metrics` on `launches` steps' launch of each target (medians
  // kept). max_passes > 0: refused with ResourceExhausted when the configuration needs more.
  absl::Status ProfileKernels(const StepRunner& run, const CounterSessionOptions& base,
                              const std::vector<std::string>& targets, const std::vector<ResolvedMetric>& metrics,
                              const std::string& label, size_t launches, size_t max_passes = 0);
  absl::Status ProfilePhases(const StepRunner& run, const CounterSessionOptions& base,
                             const ResolvedCatalog& catalog);
  v1::MetricValues DerivedMetrics() const;

  // Sampling layer.
  std::unique_ptr<PcSampler> pc_;
  absl::Status pc_status_ = absl::UnavailableError("PC sampling: no CUDA context was created");
  StallSamples stalls_;
  bool pc_collected_ = false;
  absl::Status pm_status_ = absl::UnavailableError("PM sampling: not run");
  std::optional<v1::UtilizationTimeline> utilization_;
  // Metrics layer.
  absl::Status metrics_status_ = absl::FailedPreconditionError("not requested (submit with --metrics)");
  std::vector<std::string> metrics_notes_;                               // dropped metrics, dropped ranges...
  std::map<std::string, std::map<std::string, double>> kernel_metrics_;  // kernel -> medprof name -> value
  std::map<std::string, std::map<std::string, double>> phase_metrics_;   // phase -> medprof name -> value
  std::vector<std::string> dropped_metrics_;
  CounterApi counter_api_ = CounterApi::kRangeProfiler;
  int64_t metrics_wall_ms_ = 0;
  std::vector<int64_t> measured_wall_ns_;  // the measured steps' wall times
  // Trace overhead.
  double trace_overhead_pct_ = 0.0;
  std::string overhead_note_;

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
