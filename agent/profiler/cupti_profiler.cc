#include "agent/profiler/cupti_profiler.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/profiler/cuda_call.h"
#include "agent/profiler/cupti_callbacks.h"
#include "common/logging.h"
#include "common/status.h"

namespace medprof::profiler {
namespace {
const Logger kLog("profiler");
// The external ids this profiler pushed on this thread (CUPTI keeps one stack per thread): the
// innermost one is what CUPTI attributes a launch to, and what the metrics layer's launch
// callback reads to know a launch's op.
thread_local std::vector<uint64_t> t_pushed;
}  // namespace

absl::StatusOr<std::unique_ptr<CuptiProfiler>> CuptiProfiler::Create(const CuptiProfilerOptions& options) {
  std::unique_ptr<CuptiProfiler> p(new CuptiProfiler(options));
  KernelAggregatorOptions agg;
  agg.device = options.gpu.limits;
  agg.timeline_steps = options.timeline_steps;
  CuptiProfiler* self = p.get();
  p->kernels_ = std::make_unique<KernelAggregator>(
      agg, [self](uint64_t external_id, OpKey* out) { return self->ResolveExternalId(external_id, out); });
  KernelAggregator* kernels = p->kernels_.get();
  MEDPROF_ASSIGN_OR_RETURN(
      p->cupti_,
      CuptiTracer::Start(
          options.tracer, [kernels](const std::vector<TraceRecord>& batch) { kernels->Add(batch); },
          [kernels](uint64_t dropped) { kernels->AddDropped(dropped); }));
  MEDPROF_ASSIGN_OR_RETURN(p->op_tracer_, OpTracer::Create(&p->tracker_, &p->ops_, p.get(), &p->shapes_));
  MetricsLayer::Hooks hooks;
  hooks.observer = self;
  hooks.resolve = [self](const LaunchEvent& e, const std::function<bool(const std::string&)>& wanted,
                         LaunchSignature* out) { return self->ResolveLaunch(e, wanted, out); };
  hooks.synchronize = [self](const char* where) { self->SynchronizeDevice(where); };
  p->metrics_ = std::make_unique<MetricsLayer>(options.gpu, options.metrics, std::move(hooks));
  if (options.sampling) {
    // PC sampling must be enabled as the context is created, before any module loads.
    auto callbacks = CuptiCallbacks::Install();
    if (callbacks.ok()) {
      (*callbacks)->SetContextCreatedHook([self](CUcontext ctx) { self->OnContextCreated(ctx); });
    } else {
      p->pc_status_ = callbacks.status();
    }
  } else {
    p->pc_status_ = absl::FailedPreconditionError("not requested (sampling off)");
    p->pm_status_ = p->pc_status_;
  }
  return p;
}

void CuptiProfiler::OnContextCreated(CUcontext ctx) {
  if (pc_ != nullptr) return;  // one context: LibTorch's primary context
  PcSamplerOptions o;
  o.period_exponent = options_.pc_period_exponent;
  auto sampler = PcSampler::Enable(ctx, o);
  if (!sampler.ok()) {
    pc_status_ = sampler.status();
    kLog.Warn("PC sampling unavailable: {}", pc_status_.ToString());
    return;
  }
  pc_ = std::move(sampler).value();
  pc_status_ = absl::OkStatus();
  kLog.Info("PC sampling enabled (continuous, every 2^{} cycles)", o.period_exponent);
}

CuptiProfiler::~CuptiProfiler() {
  if (absl::Status s = Stop(); !s.ok()) kLog.Warn("stopping the CUPTI profiler: {}", s.ToString());
}

absl::Status CuptiProfiler::Start() { return op_tracer_->Start(); }

absl::Status CuptiProfiler::Stop() {
  if (stopped_ || cupti_ == nullptr || op_tracer_ == nullptr) return absl::OkStatus();
  stopped_ = true;
  op_tracer_->Stop();
  SynchronizeDevice("stop");
  absl::Status s = cupti_->Stop();  // forced flush: every record is in the aggregator now
  kernels_->Finish();
  const CuptiTracerStats st = cupti_->stats();
  const KernelAggregatorCounters c = kernels_->counters();
  kLog.Info(
      "trace: {} records in {} buffers; {} device records, {} in measured steps ({} without op), "
      "{} dropped, {} refused buffers, {} correlation errors",
      st.records, st.buffers_completed, c.device_records, c.counted, c.unattributed, c.dropped,
      st.buffers_refused, st.correlation_errors);
  return s;
}

void CuptiProfiler::SynchronizeDevice(const char* where) {
  if (absl::Status s = MEDPROF_CUDA_CALL(cudaDeviceSynchronize()); !s.ok()) {
    kLog.Warn("{}: {}", where, s.ToString());
  }
}

void CuptiProfiler::OnStepBegin(int index, bool measured) {
  SynchronizeDevice("step begin");  // work queued before the step belongs to no step window
  if (measured && index == 0 && pc_ != nullptr && pc_->enabled()) {
    if (absl::Status s = pc_->Drain(/*keep=*/false, nullptr); !s.ok()) {
      pc_status_ = s;
      kLog.Warn("PC sampling: {}", s.ToString());
    }
  }
  tracker_.BeginStep(index, measured);
  kernels_->BeginStep(index, measured, cupti_->NowNs());
}

void CuptiProfiler::OnStepEnd(const workload::StepReport& report) {
  SynchronizeDevice("step end");  // the step's kernels have finished before its window closes
  kernels_->EndStep(cupti_->NowNs());
  if (report.measured) measured_wall_ns_.push_back(report.wall_ns);
  if (report.measured && pc_ != nullptr && pc_->enabled() && pc_status_.ok()) {
    if (absl::Status s = pc_->Drain(/*keep=*/true, &stalls_); !s.ok()) {
      pc_status_ = s;
      kLog.Warn("PC sampling: {}", s.ToString());
    } else {
      pc_collected_ = true;
    }
  }
  while (phase_pushes_ > 0) {  // a sub-phase left open by the step
    PopExternalId();
    --phase_pushes_;
  }
  tracker_.EndStep();
}

void CuptiProfiler::OnPhaseBegin(std::string_view name) {
  tracker_.BeginPhase(name);
  // Kernels launched inside the phase but outside any op still carry the phase.
  PushExternalId(EncodeExternalId(ops_.Intern("", tracker_.phase()), 0));
  ++phase_pushes_;
}

void CuptiProfiler::OnPhaseEnd(std::string_view name) {
  if (phase_pushes_ > 0) {
    PopExternalId();
    --phase_pushes_;
  }
  tracker_.EndPhase(name);
}

void CuptiProfiler::OnOpBegin(uint32_t op_id, uint32_t shape_id) {
  PushExternalId(EncodeExternalId(op_id, shape_id));
}
void CuptiProfiler::OnOpEnd(uint32_t op_id) {
  (void)op_id;
  PopExternalId();
}

void CuptiProfiler::PushExternalId(uint64_t id) {
  cupti_->PushExternalId(id);
  t_pushed.push_back(id);
}

void CuptiProfiler::PopExternalId() {
  cupti_->PopExternalId();
  if (!t_pushed.empty()) t_pushed.pop_back();
}

bool CuptiProfiler::ResolveExternalId(uint64_t external_id, OpKey* out) const {
  uint32_t slot = 0;
  if (!DecodeOpSlot(external_id, &slot) || !ops_.Lookup(slot, out)) return false;
  out->shapes = shapes_.Lookup(DecodeShapeId(external_id));
  return true;
}

bool CuptiProfiler::ResolveLaunch(const LaunchEvent& e,
                                  const std::function<bool(const std::string&)>& wanted_kernel,
                                  LaunchSignature* out) {
  {
    std::lock_guard<std::mutex> lock(demangled_mu_);
    auto [it, fresh] = demangled_.try_emplace(e.symbol);
    if (fresh) it->second = KernelAggregator::Demangle(e.symbol);
    out->kernel = it->second;
  }
  if (!wanted_kernel(out->kernel)) return false;
  OpKey op;
  if (t_pushed.empty() || !ResolveExternalId(t_pushed.back(), &op)) op = OpKey{};
  out->op = std::move(op.name);
  out->phase = std::move(op.phase);
  out->shapes = std::move(op.shapes);
  for (int i = 0; i < 3; ++i) {
    out->grid[i] = static_cast<int32_t>(e.grid[i]);
    out->block[i] = static_cast<int32_t>(e.block[i]);
  }
  out->dynamic_shared_bytes = static_cast<int32_t>(e.dynamic_shared_bytes);
  return true;
}

v1::OpAggregates CuptiProfiler::Ops() const { return ops_.Snapshot(tracker_.measured_steps()); }

std::optional<v1::KernelAggregates> CuptiProfiler::Kernels() const { return kernels_->Snapshot(); }

std::vector<v1::LayerStatus> CuptiProfiler::Layers() const {
  // Sampling ran when either sampler produced data; the reason names both when one did not.
  const bool pc_ok = pc_collected_ && pc_status_.ok();
  const bool pm_ok = pm_status_.ok() && utilization_.has_value();
  std::string sampling_reason;
  if (!pc_ok)
    sampling_reason = absl::StrCat("PC sampling: ", pc_status_.ok() ? "no samples" : pc_status_.message());
  if (!pm_ok) {
    absl::StrAppend(&sampling_reason, sampling_reason.empty() ? "" : "; ",
                    "PM sampling: ", pm_status_.ok() ? "no samples" : pm_status_.message());
  }
  v1::LayerStatus sampling = MakeLayer(kLayerSampling, pc_ok || pm_ok, sampling_reason);
  if (pc_ok != pm_ok) sampling.set_reason(sampling_reason);  // partial: say which half is missing
  const absl::Status& status = metrics_->status();
  v1::LayerStatus metrics = MakeLayer(kLayerMetrics, status.ok(), std::string(status.message()));
  if (status.ok() && !metrics_->notes().empty()) metrics.set_reason(absl::StrJoin(metrics_->notes(), "; "));
  return {MakeLayer(kLayerCpu, true), MakeLayer(kLayerTrace, true), sampling, metrics};
}

void CuptiProfiler::DescribeEnvironment(v1::Environment* env) const {
  const CudaLibraries libs = DescribeCudaLibraries();
  env->set_cupti_library(libs.cupti_library);
  env->set_cupti_version(libs.cupti_version);
  env->set_cuda_runtime_version(libs.runtime_version);
  const GpuInfo& g = options_.gpu;
  env->set_gpu_name(g.name);
  env->set_gpu_uuid(g.uuid);
  env->set_compute_capability(g.compute_capability);
  env->set_cuda_driver_version(g.cuda_driver_version);
  (*env->mutable_extra())["trace_clock"] = cupti_->monotonic_clock() ? "CLOCK_MONOTONIC" : "CUPTI";
}

}  // namespace medprof::profiler
