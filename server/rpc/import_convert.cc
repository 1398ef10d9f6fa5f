#include "server/rpc/import_convert.h"

namespace medprof::server::rpc {

ImportRunRequest FromProto(const v1::ImportRunRequest& p) {
  ImportRunRequest r;
  r.study_id = p.study_id();
  r.study_name = p.study_name();
  r.preset = p.preset();
  r.gpu = p.gpu();
  r.phase = p.phase();
  r.source = p.source();
  r.steps = p.steps();
  r.environment = p.environment();
  r.kernels.assign(p.kernels().begin(), p.kernels().end());
  r.metrics.assign(p.metrics().begin(), p.metrics().end());
  r.signatures.assign(p.signatures().begin(), p.signatures().end());
  return r;
}

v1::ImportRunResponse ToProto(const ImportRunResult& r) {
  v1::ImportRunResponse p;
  p.set_study_id(r.study_id);
  p.set_job_id(r.job_id);
  p.set_run_id(r.run_id);
  p.set_kernels(r.kernels);
  p.set_metrics(r.metrics);
  p.set_step_ms(r.step_ms);
  return p;
}

UploadRunRequest FromProto(const v1::UploadRunRequest& r) {
  UploadRunRequest out;
  out.study_id = r.study_id();
  out.messages.assign(r.messages().begin(), r.messages().end());
  return out;
}

v1::UploadRunResponse ToProto(const UploadRunResult& r) {
  v1::UploadRunResponse p;
  p.set_study_id(r.study_id);
  p.set_job_id(r.job_id);
  p.set_run_id(r.run_id);
  p.set_preset(r.preset);
  p.set_gpu(r.gpu);
  p.set_steps(r.steps);
  return p;
}

}  // namespace medprof::server::rpc
