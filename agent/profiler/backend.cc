#include "agent/profiler/backend.h"

#include "absl/strings/str_cat.h"
#include "agent/profiler/cpu_profiler.h"
#include "common/logging.h"
#include "common/status.h"

#if MEDPROF_HAVE_CUDA
#include "agent/profiler/cupti_profiler.h"
#endif

namespace medprof::profiler {
namespace {
const Logger kLog("profiler");
}  // namespace

bool TorchHasCuda() {
#if MEDPROF_TORCH_HAS_CUDA
  return true;
#else
  return false;
#endif
}

absl::StatusOr<BackendChoice> ChooseBackend(v1::DeviceKind requested, const GpuProbe& probe,
                                            bool torch_has_cuda) {
  BackendChoice c;
  if (requested == v1::DEVICE_KIND_CPU) {
    c.reason = "device cpu requested";
    return c;
  }
  std::string why_not;
  if (!probe.available) {
    why_not = probe.reason.empty() ? "no GPU" : probe.reason;
  } else if (!torch_has_cuda) {
    why_not = absl::StrCat("no GPU support in this LibTorch build (CPU-only LibTorch; found ",
                           probe.gpu.name, ")");
  } else {
    c.device = v1::DEVICE_KIND_CUDA;
    c.backend = "cupti";
    return c;
  }
  if (requested == v1::DEVICE_KIND_CUDA) {
    return absl::FailedPreconditionError(absl::StrCat("device: cuda requested, but ", why_not));
  }
  c.reason = why_not;
  return c;
}

absl::StatusOr<ProfilerRequest> ProfilerRequestFor(const v1::WorkloadConfig& c) {
  ProfilerRequest r;
  r.trace = c.trace();
  r.sampling = c.sampling();
  r.overhead_pairs = c.overhead_pairs();
  r.metrics.enabled = c.metrics();
  r.metrics.top_k = c.metrics_top_k();
  r.metrics.launches = c.metrics_launches();
  r.metrics.coverage_pct = c.metrics_coverage_pct();
  r.metrics.max_signatures = c.metrics_max_signatures();
  MEDPROF_ASSIGN_OR_RETURN(r.metrics.counter_api, ParseCounterApiChoice(c.counter_api()));
  return r;
}

absl::StatusOr<CreatedProfiler> CreateProfiler(const BackendChoice& choice, const GpuProbe& probe,
                                               const ProfilerRequest& request) {
  CreatedProfiler out;
  CpuProfilerOptions cpu;
  cpu.no_gpu_reason = choice.reason.empty() ? "no GPU" : choice.reason;
  if (choice.backend == "cupti" && !request.trace) {
    out.fallback_reason = "trace off (requested): no CUPTI in this run";
    cpu.no_gpu_reason = out.fallback_reason;
  } else if (choice.backend == "cupti") {
#if MEDPROF_HAVE_CUDA
    CuptiProfilerOptions options;
    options.gpu = probe.gpu;
    options.sampling = request.sampling;
    options.metrics = request.metrics;
    options.overhead_pairs = request.overhead_pairs;
    auto cupti = CuptiProfiler::Create(options);
    if (cupti.ok()) {
      out.profiler = std::move(cupti).value();
      return out;
    }
    out.fallback_reason = absl::StrCat("CUPTI activity tracing unavailable: ", cupti.status().message());
#else
    (void)probe;
    out.fallback_reason = "CUPTI activity tracing unavailable: this worker was built without CUPTI";
#endif
    kLog.Warn("{}; profiling with the CPU backend (op aggregates only)", out.fallback_reason);
    cpu.no_gpu_reason = out.fallback_reason;
  } else {
    (void)probe;
  }
  MEDPROF_ASSIGN_OR_RETURN(out.profiler, CpuProfiler::Create(cpu));
  return out;
}

}  // namespace medprof::profiler
