#include "agent/worker/run.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "agent/profiler/backend.h"
#include "agent/profiler/gpu_probe.h"
#include "agent/worker/exit_codes.h"
#include "agent/worker/gpu_clocks.h"
#include "agent/worker/host_info.h"
#include "agent/worker/workload_factory.h"
#include "common/clock.h"
#include "common/logging.h"
#include "common/workload_config.h"
#include "workloads/meddpm/fused_info.h"
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
    if (measured) nvtxRangePushA("medprof_measured_step");
#endif
    profiler_->OnStepBegin(index, measured);
  }
  void OnPhaseBegin(std::string_view name) override { profiler_->OnPhaseBegin(name); }
  void OnPhaseEnd(std::string_view name) override { profiler_->OnPhaseEnd(name); }

  void OnStepEnd(const workload::StepReport& report) override {
    profiler_->OnStepEnd(report);
#if MEDPROF_HAVE_CUDA
    if (report.measured) nvtxRangePop();
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
  const v1::WorkloadConfig& c = ctx.effective;

  // Device and profiler backend.
  const profiler::GpuProbe probe = profiler::ProbeGpu();
  if (probe.available) {
    kLog.Info("GPU: {} (CC {}, {} SMs, driver CUDA {})", probe.gpu.name, probe.gpu.compute_capability,
              probe.gpu.sm_count, probe.gpu.driver_version);
  } else {
    kLog.Info("{}", probe.reason);
  }
  const profiler::CudaLibraries libs = profiler::DescribeCudaLibraries();
  if (libs.cuda_compiled) {
    kLog.Info("libcupti: {} (CUPTI API {}), libcudart: {}", libs.cupti_library, libs.cupti_version,
              libs.cudart_library);
  }
  auto choice = profiler::ChooseBackend(c.device(), probe, profiler::TorchHasCuda());
  if (!choice.ok()) return Fail(ctx, choice.status(), "choosing the device");
  auto request = profiler::ProfilerRequestFor(c);
  if (!request.ok()) return Fail(ctx, request.status(), "reading the profiler request");
  auto created = profiler::CreateProfiler(*choice, probe, *request);
  if (!created.ok()) return Fail(ctx, created.status(), "creating the profiler");
  std::unique_ptr<profiler::Profiler> prof = std::move(created->profiler);
  kLog.Info("device {}, profiler backend {}{}", choice->device == v1::DEVICE_KIND_CUDA ? "cuda" : "cpu",
            prof->backend(), choice->reason.empty() ? "" : absl::StrCat(" (", choice->reason, ")"));

  // Setup: the model, optimizer, inputs.
  const int64_t setup_begin = MonotonicNs();
  auto workload = CreateWorkload(c, choice->device);
  if (!workload.ok()) return Fail(ctx, workload.status(), "setting up the workload");
  const workload::EffectiveFlags& flags = (*workload)->flags();
  kLog.Info("model ready in {:.0f} ms: {} parameters on {} (LibTorch {}{})", Ms(MonotonicNs() - setup_begin),
            (*workload)->ParameterCount(), flags.device, flags.torch_version,
            flags.note.empty() ? "" : absl::StrCat("; ", flags.note));
  if (StopRequested(ctx)) return Interrupted(ctx, "during setup");

  // RunStarted.
  {
    v1::WorkerMessage m;
    v1::RunStarted* rs = m.mutable_started();
    *rs->mutable_effective() = c;
    v1::Environment* env = rs->mutable_environment();
    FillHostEnvironment(env);
    if (choice->device == v1::DEVICE_KIND_CUDA) {
      env->set_gpu_name(probe.gpu.name);
      env->set_gpu_uuid(probe.gpu.uuid);
      env->set_compute_capability(probe.gpu.compute_capability);
      env->set_driver_version(probe.gpu.driver_version);
      // Clocks, power cap and throttle reasons of this GPU (by UUID: CUDA_VISIBLE_DEVICES
      // renumbers devices) through NVML; without NVML the fields stay empty and extra says why.
      FillGpuClockEnvironment(SampleGpuClocks(probe.gpu.uuid), "run start, model on the GPU", env);
    }
    prof->DescribeEnvironment(env);
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
    if (!choice->reason.empty()) extra["gpu_unused_reason"] = choice->reason;
    if (!created->fallback_reason.empty()) extra["profiler_fallback"] = created->fallback_reason;
    if (!libs.cudart_library.empty()) extra["cudart_library"] = libs.cudart_library;
    rs->set_parameters(static_cast<uint64_t>((*workload)->ParameterCount()));
    rs->set_backend(prof->backend());
    rs->set_started_unix_ms(started_unix_ms);
    if (absl::Status s = ctx.channel->Write(m); !s.ok()) return Fail(ctx, s, "writing RunStarted");
  }
  if (absl::Status s = ctx.channel->Write(Progress(
          "setup", 1, 1, absl::StrCat("model ready: ", (*workload)->ParameterCount(), " parameters on ",
                                      flags.device, ", profiler ", prof->backend())));
      !s.ok()) {
    return Fail(ctx, s, "writing progress");
  }

  // The steps.
  if (absl::Status s = prof->Start(); !s.ok()) return Fail(ctx, s, "starting the profiler");
  StepObserver observer(ctx, prof.get());
  absl::Status run = (*workload)->Run(&observer);
  if (run.ok() && !StopRequested(ctx)) {
    // Layers that need extra steps: trace overhead, PM sampling, the metrics layer.
    run = prof->AfterMeasurement(
        [&](int steps, workload::PhaseObserver* obs) {
          if (StopRequested(ctx)) return absl::CancelledError("stop requested");
          return (*workload)->RunExtraSteps(steps, obs);
        },
        [&](const std::string& stage, int step, int total, const std::string& message) {
          (void)ctx.channel->Write(Progress(stage, step, total, message));
        });
    if (StopRequested(ctx)) return Interrupted(ctx, "after the measured steps");
  }
  const absl::Status stopped = prof->Stop();
  if (!run.ok()) return Fail(ctx, run, "running the workload");
  if (!stopped.ok()) kLog.Warn("stopping the profiler: {}", stopped.ToString());

  // Aggregates and summary.
  kLog.Debug("writing results: ops");
  {
    v1::WorkerMessage m;
    *m.mutable_ops() = prof->Ops();
    if (absl::Status s = ctx.channel->Write(m); !s.ok()) return Fail(ctx, s, "writing OpAggregates");
  }
  kLog.Debug("writing results: kernels");
  if (auto kernels = prof->Kernels(); kernels.has_value()) {
    v1::WorkerMessage m;
    *m.mutable_kernels() = *std::move(kernels);
    if (absl::Status s = ctx.channel->Write(m); !s.ok()) return Fail(ctx, s, "writing KernelAggregates");
  }
  kLog.Debug("writing results: the profiler's derived results");
  for (const v1::WorkerMessage& r : prof->Results()) {
    if (absl::Status s = ctx.channel->Write(r); !s.ok()) return Fail(ctx, s, "writing profiler results");
  }
  if (absl::Status s = ctx.channel->Write(Progress("done", c.steps(), c.steps(), "results written"));
      !s.ok()) {
    return Fail(ctx, s, "writing progress");
  }
  v1::WorkerMessage m;
  v1::RunSummary* sum = m.mutable_summary();
  std::vector<int64_t> wall = observer.wall_ns();
  sum->set_measured_steps(static_cast<int32_t>(wall.size()));
  if (!wall.empty()) {
    std::sort(wall.begin(), wall.end());
    const size_t n = wall.size();
    const double median = n % 2 == 1 ? Ms(wall[n / 2]) : (Ms(wall[n / 2 - 1]) + Ms(wall[n / 2])) / 2.0;
    const double total = std::accumulate(wall.begin(), wall.end(), 0.0, [](double a, int64_t b) { return a + Ms(b); });
    sum->set_step_ms_median(median);
    sum->set_step_ms_mean(total / static_cast<double>(n));
    sum->set_step_ms_min(Ms(wall.front()));
    sum->set_step_ms_max(Ms(wall.back()));
  }
  sum->set_peak_memory_bytes((*workload)->PeakMemoryBytes());
  for (const v1::LayerStatus& l : prof->Layers()) *sum->add_layers() = l;
  sum->set_trace_overhead_pct(prof->trace_overhead_pct());
  sum->set_metrics_wall_ms(prof->metrics_wall_ms());
  sum->set_final_loss(std::isfinite(observer.final_loss()) ? observer.final_loss() : 0.0);
  sum->set_wall_ms((MonotonicNs() - ctx.process_start_ns) / 1'000'000);
  if (absl::Status s = ctx.channel->WriteTerminal(m); !s.ok()) return Fail(ctx, s, "writing RunSummary");
  kLog.Info("done: {} measured steps, median {:.1f} ms, peak memory {:.1f} MiB", wall.size(),
            sum->step_ms_median(), static_cast<double>(sum->peak_memory_bytes()) / (1 << 20));
  if (flags.fused) {  // requested and runnable (else the workload note says why not)
    for (const meddpm::fused::Op op :
         {meddpm::fused::Op::kGroupNorm, meddpm::fused::Op::kUpsample, meddpm::fused::Op::kSmallConv}) {
      const meddpm::fused::CallCounts n = meddpm::fused::Counts(op);
      if (n.fallback > 0) {
        kLog.Warn("fused {}: {} calls through medprof's kernels, {} through LibTorch's ops (last reason: {})",
                  meddpm::fused::OpName(op), n.fused, n.fallback, n.last_fallback_reason);
      } else {
        kLog.Info("fused {}: {} calls through medprof's kernels", meddpm::fused::OpName(op), n.fused);
      }
    }
  }
  return kExitOk;
}

}  // namespace medprof::worker
