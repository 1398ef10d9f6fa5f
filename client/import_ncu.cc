#include "client/import_ncu.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace medprof::client {

absl::StatusOr<ImportPlan> BuildImportRequest(const ncu::NcuRun& run, const ImportNcuCommand& c,
                                              const std::string& file_name) {
  ImportPlan plan;
  plan.warnings = run.warnings;
  v1::ImportRunRequest& r = plan.request;
  r.set_study_id(c.study_id);
  r.set_study_name(c.study_name.empty() && c.study_id.empty() ? absl::StrCat("ncu import: ", file_name) : c.study_name);
  r.set_preset(c.preset);
  r.set_gpu(c.gpu);
  r.set_phase(c.phase);
  r.set_source("ncu");
  r.set_steps(c.steps);
  v1::Environment* env = r.mutable_environment();
  env->set_host(run.host);
  env->set_compute_capability(run.compute_capability);
  env->set_device(run.device_name.empty() ? "cuda" : "cuda (" + run.device_name + ")");
  (*env->mutable_extra())["ncu.file"] = file_name;
  if (!run.process.empty()) (*env->mutable_extra())["ncu.process"] = run.process;
  if (!run.device_name.empty()) (*env->mutable_extra())["ncu.device"] = run.device_name;
  (*env->mutable_extra())["ncu.launches"] = absl::StrCat(run.launches);

  const std::string sub_phase = c.phase == v1::PHASE_FORWARD ? "fwd" : c.phase == v1::PHASE_SAMPLE ? "sample_step" : "";
  for (const ncu::NcuKernel& k : run.kernels) {
    v1::KernelStat* s = r.add_kernels();
    s->set_name(k.name);
    s->set_phase(sub_phase);
    s->set_category(k.category);
    s->set_count(k.count);
    s->set_total_ns(k.total_ns);
    s->set_min_ns(k.min_ns);
    s->set_max_ns(k.max_ns);
    for (int v : k.grid) s->add_grid(v);
    for (int v : k.block) s->add_block(v);
    s->set_registers(k.registers);
    s->set_shared_bytes(k.shared_bytes);
    s->set_theoretical_occupancy(k.theoretical_occupancy);
  }
  for (const ncu::NcuSignature& g : run.signatures) {
    v1::KernelSignature* s = r.add_signatures();
    s->set_id(g.id);
    s->set_kernel(g.kernel);
    s->set_phase(sub_phase);
    for (int v : g.grid) s->add_grid(v);
    for (int v : g.block) s->add_block(v);
    s->set_dynamic_shared_bytes(g.dynamic_shared_bytes);
    s->set_count(g.count);
    s->set_total_ns(g.total_ns);
    s->set_min_ns(g.min_ns);
    s->set_max_ns(g.max_ns);
  }
  auto add_metrics = [&](bool with_unknown) {
    r.clear_metrics();
    for (const ncu::NcuMetric& m : run.metrics) {
      if (!with_unknown && absl::StartsWith(m.name, "ncu.")) continue;
      v1::MetricValue* v = r.add_metrics();
      v->set_scope(m.scope);
      v->set_name(m.name);
      v->set_value(m.value);
      v->set_unit(m.unit);
    }
  };
  add_metrics(true);
  if (r.ByteSizeLong() > kMaxImportRequestBytes) {
    add_metrics(false);
    plan.warnings.push_back(absl::StrCat("the export is too large to send whole: its ncu.* (unmapped) metrics were left out"));
    if (r.ByteSizeLong() > kMaxImportRequestBytes) {
      return absl::InvalidArgumentError(absl::StrCat("the export of ", run.launches, " launches needs ", r.ByteSizeLong(),
                                                     " bytes even without unmapped metrics (allowed ",
                                                     kMaxImportRequestBytes, "): export fewer metrics or launches"));
    }
  }
  return plan;
}

}  // namespace medprof::client
