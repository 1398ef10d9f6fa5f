// MetricsLayer: the profiler's on-demand hardware-counter layer (DESIGN.md layer 3), run after the
// measured steps on extra steps of the workload, with the activity trace paused.
//
// What it measures (docs/metrics.md has the names and formulas):
//   - per launch signature: for each of the top-K kernels by trace time, its launch signatures
//     (kernel + launch configuration + op + input shapes) in order of time until they cover the
//     requested share of the kernel's time or reach the per-kernel cap (launch_picker.h). Each
//     chosen signature's first launch is profiled in `launches` steps and the median per metric
//     kept: the core counters in one-pass sessions wherever the chip counts them in one pass (each
//     value from one unreplayed execution; a group of instruction counts only on one launch, the
//     same on every launch), the rest of the core set under kernel replay; the
//     roofline's work and traffic counters (MetricGroup::kWork) on one launch of every signature
//     of the kernel up to the cap (the work tier), in one-pass sessions as far as they pack and
//     the rest under kernel replay. The stalls, throughputs and SASS mix (many replayed passes)
//     are measured on one launch of the detail tier only: the
//     first signatures of the same order until they cover kDetailCoveragePct of the kernel's time
//     or reach kDetailMaxSignatures (never more than the core choice). A kernel's counter measured
//     on part of its signatures is extrapolated over the time they cover (kernel_aggregate.h).
//   - per kernel: the aggregate over all its launches (common/kernel_aggregate.h) with its coverage
//     (coverage_pct: core counters; coverage.work_pct: the work tier; coverage.detail_pct: the
//     detail tier).
//   - per phase: user ranges around fwd, bwd, optim, sample_step (user replay, one step per pass),
//     the core group, then the work group in a session of its own.
// The work group's sessions are optional: one that fails (a chip or driver that cannot count SASS
// or tensor-path metrics in that mode) leaves a note and the rest of the layer's values.
// The counter API: the range profiler from CC 7.5, the legacy Profiling API below (V100) unless the
// request names one; both give the same values through CounterSession.
//
// A failure of the layer (no counter permission, unsupported device, a CUPTI error) is recorded in
// status() and never fails the run; Run returns ABORTED only when the workload itself failed in one
// of the extra steps.
//
// Ownership: the hooks' observer (the profiler) must outlive Run. Not thread-safe: Run on the
// workload's thread; the launch hook runs on the threads that launch kernels (CUPTI callbacks) while
// Run waits in a step.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "agent/profiler/counter_session.h"
#include "agent/profiler/cupti_callbacks.h"
#include "agent/profiler/cupti_host.h"
#include "agent/profiler/gpu_probe.h"
#include "agent/profiler/launch_signature.h"
#include "agent/profiler/metric_catalog.h"
#include "agent/profiler/metrics_request.h"
#include "agent/profiler/profiler.h"
#include "medprof/v1/results.pb.h"

namespace medprof::profiler {

class LaunchPicker;
struct KernelTarget;

inline constexpr int kDetailCoveragePct = 80, kDetailMaxSignatures = 4;

class MetricsLayer {
 public:
  using Values = std::map<std::string, double>;  // medprof name -> value
  struct Hooks {
    workload::PhaseObserver* observer = nullptr;  // every extra step's hooks go through it
    // The signature of a launch at its API enter (the op and shapes on the launching thread); false
    // at once, before the op is looked up, when `wanted_kernel` refuses the demangled name.
    std::function<bool(const LaunchEvent&, const std::function<bool(const std::string&)>& wanted_kernel,
                       LaunchSignature*)>
        resolve;
    std::function<void(const char* where)> synchronize;  // cudaDeviceSynchronize, logged on failure
  };

  MetricsLayer(const GpuInfo& gpu, const MetricsRequest& request, Hooks hooks);

  absl::Status Run(const StepRunner& run, const ProgressFn& progress, const v1::KernelSignatures& signatures);

  const absl::Status& status() const { return status_; }
  const std::vector<std::string>& notes() const { return notes_; }
  const std::vector<std::string>& dropped() const { return dropped_; }  // medprof names invalid on the chip
  int64_t wall_ms() const { return wall_ms_; }
  // Kernel name -> its aggregate; signature id -> its values; phase -> its values.
  const std::map<std::string, Values>& kernels() const { return kernel_metrics_; }
  const std::map<std::string, Values>& signatures() const { return signature_metrics_; }
  const std::map<std::string, Values>& phases() const { return phase_metrics_; }

 private:
  struct Session {  // what every kernel session shares
    CounterSessionOptions base;
    std::vector<LaunchSignature> targets;
    std::vector<std::string> ids;  // signature id per target
  };
  absl::Status Measure(const StepRunner& run, const ProgressFn& progress, const v1::KernelSignatures& signatures);
  std::vector<KernelTarget> CoreChoice(const v1::KernelSignatures& signatures) const;
  std::vector<KernelTarget> DetailChoice(const v1::KernelSignatures& signatures) const;
  // Every signature of the top-K kernels up to the per-kernel cap: the work tier (the core choice is
  // its prefix). A count that is the same on every launch (GroupNorm's FP16 index math) is not
  // proportional to time, so extrapolating it from the core tier misses the many short launches.
  std::vector<KernelTarget> WorkChoice(const v1::KernelSignatures& signatures) const;
  static void AddTargets(const std::vector<KernelTarget>& kernels, Session* session);
  // The core counters on `session`'s signatures, the work counters on `work`'s, the detail groups
  // on `detail`'s.
  absl::Status ProfileSignatures(const StepRunner& run, const Session& session, const Session& work,
                                 const Session& detail, const ResolvedCatalog& catalog, CuptiHost* host);
  // `metrics` in one-pass sessions on `session`'s signatures as far as they pack (PackSinglePass):
  // each value from one execution of the kernel as the application ran it, no memory restore before
  // it; the rest in one kernel-replay session on the same signatures. Sessions are labelled
  // "<label>, one pass i/n" and "<label>, replayed".
  absl::Status ProfileOnePassFirst(const StepRunner& run, const Session& session,
                                   const std::vector<ResolvedMetric>& metrics, const std::string& label,
                                   size_t launches, CuptiHost* host);
  // One kernel-replay session: `metrics` on `launches` steps' launch of each target (medians kept).
  // max_passes > 0: RESOURCE_EXHAUSTED when the configuration needs more.
  absl::Status ProfileKernels(const StepRunner& run, const Session& session,
                              const std::vector<ResolvedMetric>& metrics, const std::string& label,
                              size_t launches, size_t max_passes = 0);
  absl::Status RunPicker(const StepRunner& run, CounterSession* target, LaunchPicker* picker);
  void StoreMedians(const Session& session, const LaunchPicker& picker, const std::vector<ResolvedMetric>& metrics,
                    const std::vector<RangeValues>& ranges, const std::string& label);
  // Each kernel's aggregate of its measured signatures (the work tier's, each metric extrapolated
  // over the signatures that have it), with its coverage of each tier.
  struct Tiers {
    const std::vector<KernelTarget>& core;
    const std::vector<KernelTarget>& work;
    const std::vector<KernelTarget>& detail;
  };
  void Aggregate(const v1::KernelSignatures& signatures, const Tiers& tiers, const ResolvedCatalog& catalog);
  // One user-replay session of `metrics` over the phase ranges; values merge into phase_metrics_.
  absl::Status ProfilePhases(const StepRunner& run, const CounterSessionOptions& base,
                             const std::vector<ResolvedMetric>& metrics, const std::string& label);
  // A roofline session (work group): its failure, unless the workload failed, is a note, not the
  // layer's failure — the core metrics stand without it.
  absl::Status OptionalSession(const absl::Status& s, const std::string& what);

  const GpuInfo gpu_;
  const MetricsRequest request_;
  const Hooks hooks_;
  CounterApi api_ = CounterApi::kRangeProfiler;
  // The legacy Profiling API on a step with a backward pass: kernel-replay sessions of more than
  // one pass are left out (with a note), since CUPTI's kernel replay does not finish there; the
  // one-pass sessions run as one user-replay pass (legacy_profiler.cc) and are measured.
  bool one_pass_only_ = false;
  absl::Status status_ = absl::FailedPreconditionError("not requested (submit with --metrics)");
  std::vector<std::string> notes_;
  std::vector<std::string> dropped_;
  int64_t wall_ms_ = 0;
  std::map<std::string, Values> kernel_metrics_, signature_metrics_, phase_metrics_;
};

}  // namespace medprof::profiler
