#include "agent/worker/run.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/profiler/backend.h"
#include "agent/profiler/gpu_probe.h"
#include "agent/worker/ceilings_probe.h"
#include "agent/worker/exit_codes.h"
#include "agent/worker/gpu_clocks.h"
#include "agent/worker/host_info.h"
#include "agent/worker/workload_factory.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/roofline.h"
#include "common/workload_config.h"
#include "workloads/workload.h"

#if MEDPROF_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>  // header-only NVTX3: ranges that Nsight tools can filter on
#endif

namespace medprof::worker {
namespace {

const Logger kLog("worker");

v1::WorkerMessage Progress(const std::string& stage, int step, int total, const std::string& message = "") {
  v1::WorkerMessage m;
  v1::Progress* p = m.mutable_progress();
  p->set_stage(stage);
  p->set_step(step);
  p->set_total(total);
  p->set_message(message);
  return m;
}

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// The workload's observer: forwards to the profiler, writes the step records, stops on signal.
class StepObserver : public workload::PhaseObserver {
 public:
  StepObserver(const RunContext& ctx, profiler::Profiler* profiler)
      : ctx_(ctx), profiler_(profiler) {}

  void OnStepBegin(int index, bool measured) override {
#if MEDPROF_HAVE_CUDA
    // A start/end range, not push/pop: it spans every thread, so the backward kernels LibTorch
    // launches from its autograd thread fall inside it (ncu --nvtx-include medprof_measured_step).
    if (measured) nvtx_step_ = nvtxRangeStartA("medprof_measured_step");
#endif
    profiler_->OnStepBegin(index, measured);
  }
  void OnPhaseBegin(std::string_view name) override { profiler_->OnPhaseBegin(name); }
  void OnPhaseEnd(std::string_view name) override { profiler_->OnPhaseEnd(name); }

  void OnStepEnd(const workload::StepReport& report) override {
    profiler_->OnStepEnd(report);
#if MEDPROF_HAVE_CUDA
    if (report.measured) nvtxRangeEnd(nvtx_step_);
#endif
    const v1::WorkloadConfig& c = ctx_.effective;
    if (report.measured) {
      wall_ns_.push_back(report.wall_ns);
      final_loss_ = report.loss;
      v1::WorkerMessage m;
      v1::StepTiming* t = m.mutable_step();
      t->set_phase(c.phase());
      t->set_step(report.index);
      t->set_wall_ns(report.wall_ns);
      t->set_device_ns(report.device_ns);
      t->set_loss(std::isfinite(report.loss) ? report.loss : 0.0);
      for (const auto& [name, ns] : report.phase_ns) (*t->mutable_phase_ns())[name] = ns;
      Emit(m);
      Emit(Progress("measure", report.index + 1, c.steps(),
                    absl::StrCat("measured step ", report.index + 1, " of ", c.steps(), ": ",
                                 fmt::format("{:.1f}", Ms(report.wall_ns)), " ms")));
      kLog.Info("measured step {}/{}: {:.1f} ms{}", report.index + 1, c.steps(), Ms(report.wall_ns),
                c.phase() == v1::PHASE_TRAIN ? fmt::format(", loss {:.5f}", report.loss) : "");
    } else {
      Emit(Progress("warmup", report.index + 1, c.warmup(),
                    absl::StrCat("warm-up step ", report.index + 1, " of ", c.warmup(), ": ",
                                 fmt::format("{:.1f}", Ms(report.wall_ns)), " ms")));
      kLog.Info("warm-up step {}/{}: {:.1f} ms", report.index + 1, c.warmup(), Ms(report.wall_ns));
    }
    if (ctx_.stop_count != nullptr && ctx_.stop_count->load() > 0) {
      const std::string where = report.measured
                                    ? absl::StrCat("measured step ", report.index + 1, " of ", c.steps())
                                    : absl::StrCat("warm-up step ", report.index + 1, " of ", c.warmup());
      kLog.Warn("stop requested: stopping after {}", where);
      (void)ctx_.channel->WriteError("interrupted", absl::StrCat("stopped by signal after ", where));
      ctx_.terminate(kExitInterrupted);
    }
  }

  const std::vector<int64_t>& wall_ns() const { return wall_ns_; }
  double final_loss() const { return final_loss_; }

 private:
  void Emit(const v1::WorkerMessage& m) {
    if (absl::Status s = ctx_.channel->Write(m); !s.ok()) {
      // Nobody can receive the results any more (the agent closed the channel): end the run.
      kLog.Error("writing the result channel failed: {}; stopping", s.ToString());
      ctx_.terminate(kExitWorkloadFailed);
    }
  }

  const RunContext& ctx_;
  profiler::Profiler* profiler_;
  std::vector<int64_t> wall_ns_;
  double final_loss_ = 0.0;
#if MEDPROF_HAVE_CUDA
  nvtxRangeId_t nvtx_step_ = 0;  // the measured step's NVTX range
#endif
};

int Fail(const RunContext& ctx, const absl::Status& status, const std::string& context) {
  const Failure f = ClassifyFailure(status);
  const std::string message = absl::StrCat(context, ": ", status.message());
  kLog.Error("{} ({})", message, f.kind);
  if (absl::Status s = ctx.channel->WriteError(f.kind, message); !s.ok()) {
    kLog.Error("could not write the WorkerError record: {}", s.ToString());
  }
  return f.exit_code;
}

int Interrupted(const RunContext& ctx, const std::string& where) {
  kLog.Warn("stop requested {}", where);
  (void)ctx.channel->WriteError("interrupted", absl::StrCat("stopped by signal ", where));
  return kExitInterrupted;
}

bool StopRequested(const RunContext& ctx) {
  return ctx.stop_count != nullptr && ctx.stop_count->load() > 0;
}

// What setup produced for the rest of the run. Each step below returns kExitOk to go on, or the
// exit code after it wrote the WorkerError record.
struct Setup {
  profiler::GpuProbe probe;
  profiler::CudaLibraries libs;
  profiler::BackendChoice choice;
  v1::Ceilings ceilings;              // the roofline's, measured once the profiler exists
  profiler::CreatedProfiler created;  // the profiler and, if CUPTI could not start, why
  std::unique_ptr<workload::Workload> workload;
};

void LogDevice(const profiler::GpuProbe& probe, const profiler::CudaLibraries& libs) {
  if (probe.available) {
    kLog.Info("GPU: {} (CC {}, {} SMs, driver CUDA {})", probe.gpu.name, probe.gpu.compute_capability,
              probe.gpu.sm_count, probe.gpu.cuda_driver_version);
  } else {
    kLog.Info("{}", probe.reason);
  }
  if (libs.cuda_compiled) {
    kLog.Info("libcupti: {} (CUPTI API {}), libcudart: {}", libs.cupti_library, libs.cupti_version,
              libs.cudart_library);
  }
}

// The device and the profiler backend.
int ChooseDeviceAndProfiler(const RunContext& ctx, Setup* s) {
  s->probe = profiler::ProbeGpu();
  s->libs = profiler::DescribeCudaLibraries();
  LogDevice(s->probe, s->libs);
  auto choice = profiler::ChooseBackend(ctx.effective.device(), s->probe, profiler::TorchHasCuda());
  if (!choice.ok()) return Fail(ctx, choice.status(), "choosing the device");
  s->choice = *std::move(choice);
  auto request = profiler::ProfilerRequestFor(ctx.effective);
  if (!request.ok()) return Fail(ctx, request.status(), "reading the profiler request");
  auto created = profiler::CreateProfiler(s->choice, s->probe, *request);
  if (!created.ok()) return Fail(ctx, created.status(), "creating the profiler");
  s->created = *std::move(created);
  // After the profiler: CUPTI must be subscribed before the CUDA context exists (the probe
  // creates it), or PC sampling never starts and no kernel gets its op, so the metrics layer
  // finds no signatures. The probe's kernels run before the first step and count in no step.
  const char* cache_dir = std::getenv("MEDPROF_CACHE_DIR");
  s->ceilings = NodeCeilings(s->choice.device == v1::DEVICE_KIND_CUDA, s->probe.gpu, cache_dir ? cache_dir : "");
  s->created.profiler->SetRoofs(roofline::RoofsOf(s->ceilings));
  kLog.Info("device {}, profiler backend {}{}", s->choice.device == v1::DEVICE_KIND_CUDA ? "cuda" : "cpu",
            s->created.profiler->backend(), s->choice.reason.empty() ? "" : absl::StrCat(" (", s->choice.reason, ")"));
  return kExitOk;
}

// The job's workload (model, optimizer, inputs) on the chosen device.
int CreateTheWorkload(const RunContext& ctx, Setup* s) {
  const int64_t setup_begin = MonotonicNs();
  auto created = CreateWorkload(ctx.effective, s->choice.device);
  if (!created.ok()) return Fail(ctx, created.status(), "setting up the workload");
  s->workload = *std::move(created);
  const workload::EffectiveFlags& flags = s->workload->flags();
  kLog.Info("model ready in {:.0f} ms: {} parameters on {} (LibTorch {}{})", Ms(MonotonicNs() - setup_begin),
            s->workload->ParameterCount(), flags.device, flags.torch_version,
            flags.note.empty() ? "" : absl::StrCat("; ", flags.note));
  if (StopRequested(ctx)) return Interrupted(ctx, "during setup");
  return kExitOk;
}

// RunStarted.environment: host, GPU (on CUDA), profiler, and the flags read back from the workload.
void FillEnvironment(const Setup& s, v1::Environment* env) {
  FillHostEnvironment(env);
  if (s.choice.device == v1::DEVICE_KIND_CUDA) {
    env->set_gpu_name(s.probe.gpu.name);
    env->set_gpu_uuid(s.probe.gpu.uuid);
    env->set_compute_capability(s.probe.gpu.compute_capability);
    env->set_cuda_driver_version(s.probe.gpu.cuda_driver_version);
    // Clocks, power cap and throttle reasons of this GPU (by UUID: CUDA_VISIBLE_DEVICES
    // renumbers devices) through NVML; without NVML the fields stay empty and extra says why.
    FillGpuClockEnvironment(SampleGpuClocks(s.probe.gpu.uuid), "run start, model on the GPU", env);
  }
  s.created.profiler->DescribeEnvironment(env);
  *env->mutable_ceilings() = s.ceilings;
  const workload::EffectiveFlags& flags = s.workload->flags();
  env->set_torch_version(flags.torch_version);
  env->set_cudnn_version(flags.cudnn_version);
  env->set_tf32_cudnn(flags.tf32_cudnn);
  env->set_tf32_matmul(flags.tf32_matmul);
  env->set_channels_last(flags.channels_last);
  env->set_bf16(flags.bf16);
  env->set_fused(flags.fused);
  env->set_cudnn_benchmark(flags.cudnn_benchmark);
  env->set_device(flags.device);
  auto& extra = *env->mutable_extra();
  if (!flags.note.empty()) extra["workload_note"] = flags.note;
  if (!s.choice.reason.empty()) extra["gpu_unused_reason"] = s.choice.reason;
  if (!s.created.fallback_reason.empty()) extra["profiler_fallback"] = s.created.fallback_reason;
  if (!s.libs.cudart_library.empty()) extra["cudart_library"] = s.libs.cudart_library;
}

// RunStarted, then Progress setup 1/1.
int WriteRunStarted(const RunContext& ctx, const Setup& s, int64_t started_unix_ms) {
  const std::string& backend = s.created.profiler->backend();
  v1::WorkerMessage m;
  v1::RunStarted* rs = m.mutable_started();
  *rs->mutable_effective() = ctx.effective;
  // The run names its model by hash, name and size; where this machine keeps the file is not a
  // fact about the run (ModelRef.local_path: empty outside the worker's machine).
  if (rs->effective().has_model()) rs->mutable_effective()->mutable_model()->clear_local_path();
  FillEnvironment(s, rs->mutable_environment());
  rs->set_parameters(static_cast<uint64_t>(s.workload->ParameterCount()));
  rs->set_backend(backend);
  rs->set_started_unix_ms(started_unix_ms);
  if (absl::Status st = ctx.channel->Write(m); !st.ok()) return Fail(ctx, st, "writing RunStarted");
  const std::string ready = absl::StrCat("model ready: ", s.workload->ParameterCount(), " parameters on ",
                                         s.workload->flags().device, ", profiler ", backend);
  if (absl::Status st = ctx.channel->Write(Progress("setup", 1, 1, ready)); !st.ok()) {
    return Fail(ctx, st, "writing progress");
  }
  return kExitOk;
}

// The warm-up and measured steps, then the profiler's layers that need extra steps (trace
// overhead, PM sampling, the metrics layer); the profiler is stopped unless a stop was requested.
int RunSteps(const RunContext& ctx, const Setup& s, StepObserver* observer) {
  profiler::Profiler& prof = *s.created.profiler;
  if (absl::Status st = prof.Start(); !st.ok()) return Fail(ctx, st, "starting the profiler");
  absl::Status run = s.workload->Run(observer);
  if (run.ok() && !StopRequested(ctx)) {
    run = prof.AfterMeasurement(
        [&](int steps, workload::PhaseObserver* obs) {
          if (StopRequested(ctx)) return absl::CancelledError("stop requested");
          return s.workload->RunExtraSteps(steps, obs);
        },
        [&](const std::string& stage, int step, int total, const std::string& message) {
          (void)ctx.channel->Write(Progress(stage, step, total, message));
        });
    if (StopRequested(ctx)) return Interrupted(ctx, "after the measured steps");
  }
  const absl::Status stopped = prof.Stop();
  if (!run.ok()) return Fail(ctx, run, "running the workload");
  if (!stopped.ok()) kLog.Warn("stopping the profiler: {}", stopped.ToString());
  return kExitOk;
}

// OpAggregates, KernelAggregates (GPU backends), the profiler's derived results, Progress done.
int WriteResults(const RunContext& ctx, const profiler::Profiler& prof) {
  kLog.Debug("writing results: ops");
  {
    v1::WorkerMessage m;
    *m.mutable_ops() = prof.Ops();
    if (absl::Status s = ctx.channel->Write(m); !s.ok()) return Fail(ctx, s, "writing OpAggregates");
  }
  kLog.Debug("writing results: kernels");
  if (auto kernels = prof.Kernels(); kernels.has_value()) {
    v1::WorkerMessage m;
    *m.mutable_kernels() = *std::move(kernels);
    if (absl::Status s = ctx.channel->Write(m); !s.ok()) return Fail(ctx, s, "writing KernelAggregates");
  }
  kLog.Debug("writing results: the profiler's derived results");
  for (const v1::WorkerMessage& r : prof.Results()) {
    if (absl::Status s = ctx.channel->Write(r); !s.ok()) return Fail(ctx, s, "writing profiler results");
  }
  const int steps = ctx.effective.steps();
  if (absl::Status s = ctx.channel->Write(Progress("done", steps, steps, "results written")); !s.ok()) {
    return Fail(ctx, s, "writing progress");
  }
  return kExitOk;
}

// Median, mean, min and max of the measured steps' wall times, in ms.
void FillStepTimes(std::vector<int64_t> wall, v1::RunSummary* sum) {
  sum->set_measured_steps(static_cast<int32_t>(wall.size()));
  if (wall.empty()) return;
  std::sort(wall.begin(), wall.end());
  const size_t n = wall.size();
  const double median = n % 2 == 1 ? Ms(wall[n / 2]) : (Ms(wall[n / 2 - 1]) + Ms(wall[n / 2])) / 2.0;
  const double total = std::accumulate(wall.begin(), wall.end(), 0.0, [](double a, int64_t b) { return a + Ms(b); });
  sum->set_step_ms_median(median);
  sum->set_step_ms_mean(total / static_cast<double>(n));
  sum->set_step_ms_min(Ms(wall.front()));
  sum->set_step_ms_max(Ms(wall.back()));
}

// RunSummary, the run's last record.
int WriteSummary(const RunContext& ctx, const Setup& s, const StepObserver& observer) {
  const profiler::Profiler& prof = *s.created.profiler;
  v1::WorkerMessage m;
  v1::RunSummary* sum = m.mutable_summary();
  FillStepTimes(observer.wall_ns(), sum);
  sum->set_peak_memory_bytes(s.workload->PeakMemoryBytes());
  for (const v1::LayerStatus& l : prof.Layers()) *sum->add_layers() = l;
  sum->set_trace_overhead_pct(prof.trace_overhead_pct());
  sum->set_metrics_wall_ms(prof.metrics_wall_ms());
  sum->set_final_loss(std::isfinite(observer.final_loss()) ? observer.final_loss() : 0.0);
  sum->set_wall_ms((MonotonicNs() - ctx.process_start_ns) / 1'000'000);
  if (absl::Status st = ctx.channel->WriteTerminal(m); !st.ok()) return Fail(ctx, st, "writing RunSummary");
  kLog.Info("done: {} measured steps, median {:.1f} ms, peak memory {:.1f} MiB", sum->measured_steps(),
            sum->step_ms_median(), static_cast<double>(sum->peak_memory_bytes()) / (1 << 20));
  return kExitOk;
}

}  // namespace

Failure ClassifyFailure(const absl::Status& status) {
  const std::string m(status.message());
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted:
      return {"oom", kExitWorkloadFailed};
    case absl::StatusCode::kInvalidArgument:
      return {"invalid_config", kExitInvalidConfig};
    default:
      break;
  }
  if (absl::StrContains(m, "CUDA") || absl::StrContains(m, "cuda") || absl::StrContains(m, "cuDNN") ||
      absl::StrContains(m, "CUDNN") || absl::StrContains(m, "cuBLAS") || absl::StrContains(m, "CUBLAS")) {
    return {"cuda", kExitWorkloadFailed};
  }
  return {"internal", kExitWorkloadFailed};
}

int RunWorker(const RunContext& in) {
  RunContext ctx = in;
  if (!ctx.terminate) {
    ctx.terminate = [](int code) {
      logging::Write("worker", LogLevel::kWarn, absl::StrCat("exiting with code ", code));
      std::_Exit(code);
    };
  }
  const int64_t started_unix_ms = Clock::Real()->NowUnixMs();
  Setup setup;
  if (int code = ChooseDeviceAndProfiler(ctx, &setup); code != kExitOk) return code;
  if (int code = CreateTheWorkload(ctx, &setup); code != kExitOk) return code;
  if (int code = WriteRunStarted(ctx, setup, started_unix_ms); code != kExitOk) return code;
  StepObserver observer(ctx, setup.created.profiler.get());
  if (int code = RunSteps(ctx, setup, &observer); code != kExitOk) return code;
  if (int code = WriteResults(ctx, *setup.created.profiler); code != kExitOk) return code;
  if (int code = WriteSummary(ctx, setup, observer); code != kExitOk) return code;
  LogWorkloadCounters(ctx.effective, setup.workload->flags());
  return kExitOk;
}

}  // namespace medprof::worker
