#include "agent/profiler/cpu_profiler.h"

#include "agent/profiler/gpu_probe.h"
#include "common/status.h"

namespace medprof::profiler {

absl::StatusOr<std::unique_ptr<CpuProfiler>> CpuProfiler::Create(const CpuProfilerOptions& options) {
  std::unique_ptr<CpuProfiler> p(new CpuProfiler(options));
  MEDPROF_ASSIGN_OR_RETURN(p->tracer_, OpTracer::Create(&p->tracker_, &p->ops_, &p->timeline_));
  return p;
}

CpuProfiler::~CpuProfiler() { tracer_->Stop(); }

absl::Status CpuProfiler::Start() { return tracer_->Start(); }

absl::Status CpuProfiler::Stop() {
  tracer_->Stop();
  return absl::OkStatus();
}

v1::OpAggregates CpuProfiler::Ops() const { return ops_.Snapshot(tracker_.measured_steps()); }

std::vector<v1::WorkerMessage> CpuProfiler::Results() const {
  std::vector<v1::WorkerMessage> out;
  for (v1::Timeline& t : timeline_.Records()) *out.emplace_back().mutable_timeline() = std::move(t);
  return out;
}

std::vector<v1::LayerStatus> CpuProfiler::Layers() const {
  return {MakeLayer(kLayerCpu, true), MakeLayer(kLayerTrace, false, options_.no_gpu_reason),
          MakeLayer(kLayerSampling, false, options_.no_gpu_reason),
          MakeLayer(kLayerMetrics, false, options_.no_gpu_reason)};
}

void CpuProfiler::DescribeEnvironment(v1::Environment* env) const {
  const CudaLibraries libs = DescribeCudaLibraries();
  env->set_cupti_library(libs.cupti_library);
  env->set_cupti_version(libs.cupti_version);
  if (!libs.runtime_version.empty()) env->set_cuda_runtime_version(libs.runtime_version);
  if (env->gpu_name().empty()) env->set_gpu_name("cpu");
}

}  // namespace medprof::profiler
