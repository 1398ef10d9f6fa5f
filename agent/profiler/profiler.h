// Profiler: what medprof-worker runs next to the workload to measure it.
//
// A Profiler is the workload's PhaseObserver (workloads/workload.h: steps and named sub-phases,
// e.g. Med-DDPM's "fwd", "bwd", "optim", "sample_step"; the profiler knows no implementation's
// types) and watches LibTorch ops through a RecordFunction callback. It produces
// per-op aggregates, for GPU backends per-kernel aggregates, and the status of each profiler
// layer ("cpu", "trace", "sampling", "metrics"): which ran and, for each that did not, why —
// never silently missing. Only measured steps count.
//
// Backends (backend.h chooses): CpuProfiler ("cpu": op aggregates only) and CuptiProfiler
// ("cupti": op aggregates + CUPTI activity trace). Lifecycle: create -> Start() before
// Workload::Run -> hooks during Run -> Stop() -> read Ops()/Kernels()/Layers().
//
// Thread safety: the hooks come from the workload's thread (PhaseObserver contract); Start,
// Stop and the readers from one controlling thread (the worker's main thread, which is also
// the workload's). Internals that other threads touch (op callbacks, CUPTI buffers) lock.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/roofline.h"
#include "medprof/v1/results.pb.h"
#include "medprof/v1/workload.pb.h"
#include "workloads/workload.h"

namespace medprof::profiler {

// Layer names as stored in LayerStatus.layer.
inline constexpr char kLayerCpu[] = "cpu";
inline constexpr char kLayerTrace[] = "trace";
inline constexpr char kLayerSampling[] = "sampling";
inline constexpr char kLayerMetrics[] = "metrics";
// Reason for layers that a later issue adds (PC/PM sampling, range-profiler metrics).
inline constexpr char kNotImplemented[] = "not implemented in this build";

v1::LayerStatus MakeLayer(const std::string& layer, bool ran, const std::string& reason = "");

// Runs `steps` more steps of the workload after the measured ones (trace-overhead A/B steps,
// the PM-sampling window, the metrics layer's kernel pass and replays), reporting them to
// `observer` as unmeasured steps.
using StepRunner = std::function<absl::Status(int steps, workload::PhaseObserver* observer)>;
// Progress of the post-measurement work, for the run's Progress records.
using ProgressFn = std::function<void(const std::string& stage, int step, int total, const std::string& message)>;

class Profiler : public workload::PhaseObserver {
 public:
  ~Profiler() override = default;

  // "cpu" | "cupti" (RunStarted.backend).
  virtual std::string backend() const = 0;
  // Starts collecting (installs the op callback). Call before Workload::Run.
  virtual absl::Status Start() = 0;
  // Stops collecting and flushes every outstanding record. Idempotent.
  virtual absl::Status Stop() = 0;

  // Per-op aggregates over the measured steps.
  virtual v1::OpAggregates Ops() const = 0;
  // Per-kernel aggregates; nullopt for backends without a GPU trace.
  virtual std::optional<v1::KernelAggregates> Kernels() const = 0;
  // One entry per layer: cpu, trace, sampling, metrics.
  virtual std::vector<v1::LayerStatus> Layers() const = 0;
  // Adds what the profiler knows (GPU, CUPTI library and version) to `env`.
  virtual void DescribeEnvironment(v1::Environment* env) const = 0;
  // Measured steps seen so far.
  virtual int measured_steps() const = 0;

  // After the measured steps and before Stop(): the layers that need extra steps (trace
  // overhead, PM sampling, the metrics layer). A failure of one layer is recorded in Layers()
  // and does not fail the run; the returned status is for errors of the workload itself.
  virtual absl::Status AfterMeasurement(const StepRunner& run, const ProgressFn& progress) {
    (void)run;
    (void)progress;
    return absl::OkStatus();
  }
  // What the layers produced beyond ops and kernels (after Stop): MetricValues, KernelFindings,
  // Timeline and UtilizationTimeline records, each only when it has content.
  virtual std::vector<v1::WorkerMessage> Results() const { return {}; }
  // Trace-layer overhead in percent of the step time (0 when not measured) and the wall time
  // of the metrics layer.
  virtual double trace_overhead_pct() const { return 0.0; }
  virtual int64_t metrics_wall_ms() const { return 0; }
  // The run's roofline ceilings, for the findings (they place kernels on them). The worker
  // measures them after creating the profiler, so that CUPTI is subscribed before the probe
  // creates the CUDA context; call before Results(). Backends without a GPU trace ignore them.
  virtual void SetRoofs(roofline::Roofs /*roofs*/) {}
};

}  // namespace medprof::profiler
