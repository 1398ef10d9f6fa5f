#include "agent/profiler/cupti_profiler.h"

#include "absl/strings/str_cat.h"
#include "agent/profiler/cuda_call.h"
#include "common/logging.h"
#include "common/status.h"

namespace medprof::profiler {
namespace {
const Logger kLog("profiler");
}  // namespace

absl::StatusOr<std::unique_ptr<CuptiProfiler>> CuptiProfiler::Create(const CuptiProfilerOptions& options) {
  std::unique_ptr<CuptiProfiler> p(new CuptiProfiler(options));
  KernelAggregatorOptions agg;
  agg.device = options.gpu.limits;
  agg.timeline_steps = options.timeline_steps;
  OpAggregator* ops = &p->ops_;
  p->kernels_ = std::make_unique<KernelAggregator>(agg, [ops](uint64_t external_id, OpKey* out) {
    return external_id > 0 && ops->Lookup(static_cast<uint32_t>(external_id - 1), out);
  });
  KernelAggregator* kernels = p->kernels_.get();
  MEDPROF_ASSIGN_OR_RETURN(
      p->cupti_,
      CuptiTracer::Start(
          options.tracer, [kernels](const std::vector<TraceRecord>& batch) { kernels->Add(batch); },
          [kernels](uint64_t dropped) { kernels->AddDropped(dropped); }));
  MEDPROF_ASSIGN_OR_RETURN(p->op_tracer_, OpTracer::Create(&p->tracker_, &p->ops_, p.get()));
  return p;
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
  tracker_.BeginStep(index, measured);
  kernels_->BeginStep(index, measured, cupti_->NowNs());
}

void CuptiProfiler::OnStepEnd(const meddpm::StepReport& report) {
  (void)report;
  SynchronizeDevice("step end");  // the step's kernels have finished before its window closes
  kernels_->EndStep(cupti_->NowNs());
  while (phase_pushes_ > 0) {  // a sub-phase left open by the step
    cupti_->PopExternalId();
    --phase_pushes_;
  }
  tracker_.EndStep();
}

void CuptiProfiler::OnPhaseBegin(std::string_view name) {
  tracker_.BeginPhase(name);
  // Kernels launched inside the phase but outside any op still carry the phase.
  cupti_->PushExternalId(uint64_t{ops_.Intern("", tracker_.phase())} + 1);
  ++phase_pushes_;
}

void CuptiProfiler::OnPhaseEnd(std::string_view name) {
  if (phase_pushes_ > 0) {
    cupti_->PopExternalId();
    --phase_pushes_;
  }
  tracker_.EndPhase(name);
}

void CuptiProfiler::OnOpBegin(uint32_t op_id) { cupti_->PushExternalId(uint64_t{op_id} + 1); }
void CuptiProfiler::OnOpEnd(uint32_t op_id) {
  (void)op_id;
  cupti_->PopExternalId();
}

v1::OpAggregates CuptiProfiler::Ops() const { return ops_.Snapshot(tracker_.measured_steps()); }

std::optional<v1::KernelAggregates> CuptiProfiler::Kernels() const { return kernels_->Snapshot(); }

std::vector<v1::LayerStatus> CuptiProfiler::Layers() const {
  return {MakeLayer(kLayerCpu, true), MakeLayer(kLayerTrace, true),
          MakeLayer(kLayerSampling, false, kNotImplemented),
          MakeLayer(kLayerMetrics, false, kNotImplemented)};
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
  env->set_driver_version(g.driver_version);
  (*env->mutable_extra())["trace_clock"] = cupti_->monotonic_clock() ? "CLOCK_MONOTONIC" : "CUPTI";
}

}  // namespace medprof::profiler
