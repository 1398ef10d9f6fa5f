// proto <-> domain conversion of the queries (compare, kernels, diff, timeline); declared in
// convert.h with the rest.
#include "server/rpc/convert.h"

namespace medprof::server::rpc {
namespace {

void SetOptional(const std::optional<double>& v, void (v1::CellMetrics::*set)(double), v1::CellMetrics* m) {
  if (v.has_value()) (m->*set)(*v);
}

v1::KernelFinding ToProto(const FindingRow& f) {
  v1::KernelFinding p;
  p.set_kernel(f.kernel);
  p.set_op(f.op);
  p.set_phase(f.phase);
  p.set_category(f.category);
  p.set_share(f.share);
  p.set_speedup(f.speedup);
  p.set_priority(f.priority);
  p.set_rule(f.rule);
  p.set_finding(f.finding);
  return p;
}

void SetSpeedupInterval(const SpeedupInterval& i, v1::SpeedupInterval* p) {
  p->set_lo(i.lo);
  p->set_hi(i.hi);
  p->set_significant(i.significant);
}

}  // namespace

CompareRequest FromProto(const v1::CompareRequest& p) {
  CompareRequest r;
  r.study_id = p.study_id();
  r.run_ids.assign(p.run_ids().begin(), p.run_ids().end());
  r.more_study_ids.assign(p.more_study_ids().begin(), p.more_study_ids().end());
  r.baseline_preset = p.baseline_preset();
  r.baseline_gpu = p.baseline_gpu();
  r.phase = p.phase();
  r.top_categories = p.top_categories();
  r.top_kernels = p.top_kernels();
  return r;
}

v1::CompareResponse ToProto(const CompareResult& r) {
  v1::CompareResponse p;
  p.set_study_id(r.study_id);
  p.set_baseline_preset(r.baseline_preset);
  p.set_baseline_gpu(r.baseline_gpu);
  p.set_runs_compared(r.runs_compared);
  for (const std::string& s : r.study_ids) p.add_study_ids(s);
  for (const CompareCell& c : r.cells) {
    v1::CompareCell* pc = p.add_cells();
    pc->set_gpu(c.gpu);
    pc->set_preset(c.preset);
    pc->set_model_sha256(c.model_sha256);
    pc->set_model_file_name(c.model_file_name);
    pc->set_phase(c.phase);
    pc->set_n(c.n);
    pc->set_steps(c.steps);
    pc->set_step_ms_median(c.step_ms_median);
    pc->set_step_ms_p10(c.step_ms_p10);
    pc->set_step_ms_p90(c.step_ms_p90);
    pc->set_has_baseline(c.has_baseline);
    pc->set_speedup_vs_baseline(c.speedup_vs_baseline);
    for (const auto& [category, share] : c.categories) {
      v1::CategoryShare* s = pc->add_categories();
      s->set_category(category);
      s->set_share(share);
    }
    pc->set_time_source(c.time_source);
    for (const std::string& n : c.notes) pc->add_notes(n);

    v1::CellMetrics* m = pc->mutable_metrics();
    m->set_collected(c.metrics.collected);
    m->set_not_collected(c.metrics.not_collected);
    m->set_source(c.metrics.source);
    m->set_runs_with_metrics(c.metrics.runs_with_metrics);
    SetOptional(c.metrics.sm_cycles, &v1::CellMetrics::set_sm_cycles, m);
    SetOptional(c.metrics.warp_instructions, &v1::CellMetrics::set_warp_instructions, m);
    SetOptional(c.metrics.sm_cycles_ratio, &v1::CellMetrics::set_sm_cycles_ratio, m);
    SetOptional(c.metrics.warp_instructions_ratio, &v1::CellMetrics::set_warp_instructions_ratio, m);
    SetOptional(c.metrics.tensor_pipe_pct, &v1::CellMetrics::set_tensor_pipe_pct, m);
    SetOptional(c.metrics.fma_pipe_pct, &v1::CellMetrics::set_fma_pipe_pct, m);
    SetOptional(c.metrics.achieved_occupancy_pct, &v1::CellMetrics::set_achieved_occupancy_pct, m);
    SetOptional(c.metrics.l1_hit_pct, &v1::CellMetrics::set_l1_hit_pct, m);
    SetOptional(c.metrics.l2_hit_pct, &v1::CellMetrics::set_l2_hit_pct, m);
    SetOptional(c.metrics.dram_throughput_pct, &v1::CellMetrics::set_dram_throughput_pct, m);
    SetOptional(c.metrics.roof_pct, &v1::CellMetrics::set_roof_pct, m);
    SetOptional(c.metrics.memory_bound_share, &v1::CellMetrics::set_memory_bound_share, m);
    SetOptional(c.metrics.compute_bound_share, &v1::CellMetrics::set_compute_bound_share, m);
    SetOptional(c.metrics.latency_bound_share, &v1::CellMetrics::set_latency_bound_share, m);

    v1::CellStalls* st = pc->mutable_stalls();
    st->set_collected(c.stalls.collected);
    st->set_not_collected(c.stalls.not_collected);
    st->set_source(c.stalls.source);
    for (const auto& [reason, share] : c.stalls.shares) {
      v1::NamedShare* s = st->add_shares();
      s->set_name(reason);
      s->set_share(share);
    }
    for (const TopKernel& k : c.top_kernels) {
      v1::TopKernel* pk = pc->add_top_kernels();
      pk->set_name(k.name);
      pk->set_op(k.op);
      pk->set_category(k.category);
      pk->set_total_ns(k.total_ns);
      pk->set_share(k.share);
      pk->set_priority(k.priority);
      pk->set_speedup(k.speedup);
      if (k.coverage_pct >= 0) pk->set_coverage_pct(k.coverage_pct);
      for (const FindingRow& f : k.findings) *pk->add_findings() = ToProto(f);
    }
    pc->set_findings_note(c.findings_note);
    pc->set_has_gpu_baseline(c.has_gpu_baseline);
    pc->set_speedup_vs_baseline_gpu(c.speedup_vs_baseline_gpu);
    pc->set_step_ms_ci_lo(c.step_ms_ci_lo);
    pc->set_step_ms_ci_hi(c.step_ms_ci_hi);
    pc->set_interval_method(c.interval_method);
    if (c.speedup_ci) SetSpeedupInterval(*c.speedup_ci, pc->mutable_speedup_ci());
    if (c.speedup_gpu_ci) SetSpeedupInterval(*c.speedup_gpu_ci, pc->mutable_speedup_gpu_ci());
    pc->set_study_id(c.study_id);
    pc->set_has_study_baseline(c.has_study_baseline);
    pc->set_speedup_vs_first_study(c.speedup_vs_first_study);
    if (c.speedup_study_ci) SetSpeedupInterval(*c.speedup_study_ci, pc->mutable_speedup_study_ci());
  }
  return p;
}

KernelsRequest FromProto(const v1::ListKernelsRequest& p) {
  KernelsRequest r;
  r.run_id = p.run_id();
  r.top = p.top();
  r.signatures = p.signatures();
  return r;
}

v1::ListKernelsResponse ToProto(const KernelsResult& r) {
  v1::ListKernelsResponse p;
  p.set_run_id(r.run_id);
  p.set_total_ns(r.total_ns);
  p.set_total_rows(r.total_rows);
  p.set_time_source(r.time_source);
  for (const KernelShareRow& k : r.kernels) {
    v1::KernelShare* pk = p.add_kernels();
    pk->set_name(k.name);
    pk->set_category(k.category);
    pk->set_op(k.op);
    pk->set_phase(k.phase);
    pk->set_count(k.count);
    pk->set_total_ns(k.total_ns);
    pk->set_share(k.share);
    if (k.coverage_pct >= 0) pk->set_coverage_pct(k.coverage_pct);
  }
  for (const SignatureShareRow& s : r.signatures) {
    v1::SignatureShare* ps = p.add_signatures();
    ps->set_id(s.row.id);
    ps->set_kernel(s.row.kernel);
    ps->set_op(s.row.op);
    ps->set_phase(s.row.phase);
    ps->set_shapes(s.row.shapes);
    for (int g : s.row.grid) ps->add_grid(g);
    for (int b : s.row.block) ps->add_block(b);
    ps->set_dynamic_shared_bytes(static_cast<int32_t>(s.row.dynamic_shared_bytes));
    ps->set_launches_per_step(s.launches_per_step);
    ps->set_total_ns(s.row.total_ns);
    ps->set_mean_ns(s.row.count > 0 ? s.row.total_ns / s.row.count : 0);
    ps->set_share_of_kernel(s.share_of_kernel);
    ps->set_measured(s.measured);
  }
  return p;
}

DiffRequest FromProto(const v1::DiffRunsRequest& p) {
  DiffRequest r;
  r.run_a = p.run_a();
  r.run_b = p.run_b();
  r.top = p.top();
  return r;
}

v1::DiffRunsResponse ToProto(const DiffResult& r) {
  v1::DiffRunsResponse p;
  p.set_run_a(r.run_a);
  p.set_run_b(r.run_b);
  p.set_a_total_ns(r.a_total_ns);
  p.set_b_total_ns(r.b_total_ns);
  p.set_a_steps(r.a_steps);
  p.set_a_step_ms_median(r.a_step_ms_median);
  p.set_b_step_ms_median(r.b_step_ms_median);
  p.set_b_steps(r.b_steps);
  p.set_time_source(r.time_source);
  for (const DiffRowView& v : r.rows) {
    v1::DiffRow* row = p.add_rows();
    row->set_op(v.op);
    row->set_category(v.category);
    row->set_a_ns(v.a_ns);
    row->set_b_ns(v.b_ns);
    row->set_delta_ns(v.delta_ns);
    row->set_ratio(v.ratio);
    row->set_a_share(v.a_share);
    row->set_b_share(v.b_share);
    row->set_a_kernels(v.a_kernels);
    row->set_b_kernels(v.b_kernels);
    row->set_a_count(v.a_count);
    row->set_b_count(v.b_count);
  }
  return p;
}

v1::GetTimelineResponse ToProto(const TimelineResult& r) {
  v1::GetTimelineResponse p;
  p.set_run_id(r.run_id);
  *p.mutable_timeline() = r.timeline;
  if (r.utilization.has_value()) *p.mutable_utilization() = *r.utilization;
  return p;
}

}  // namespace medprof::server::rpc
