// QueryEngine's single-run and two-run queries: Kernels, Diff, Timeline (see query_engine.h).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/kernel_taxonomy.h"
#include "common/request_limits.h"
#include "common/status.h"
#include "server/domain/codec.h"
#include "server/domain/query_engine.h"

namespace medprof::server {
namespace {

absl::Status CheckTop(int top) {
  if (top < 0 || top > limits::kMaxTopRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("top: ", top, " is out of range (allowed 1..", limits::kMaxTopRows, "; unset = all)"));
  }
  return absl::OkStatus();
}

// The median wall time of a run's measured steps, every phase pooled (0 without steps).
double MedianStepMs(const std::vector<StepRow>& steps) {
  std::vector<double> ms;
  for (const StepRow& s : steps) ms.push_back(static_cast<double>(s.wall_ns) / 1e6);
  return Quantile(std::move(ms), 0.5);
}

absl::StatusOr<RunRecord> LoadRun(StoreTx& tx, const std::string& run_id, const char* field) {
  MEDPROF_ASSIGN_OR_RETURN(std::optional<RunRecord> run, tx.GetRun(run_id));
  if (!run.has_value()) return absl::NotFoundError(absl::StrCat(field, ": no run '", run_id, "'"));
  return *std::move(run);
}

// A run's time rows: kernels when it has any, else op self times (CPU backend).
struct TimeRow {
  std::string name, op, phase, category;
  int64_t count = 0;
  int64_t total_ns = 0;
};

absl::StatusOr<std::vector<TimeRow>> KernelTimes(StoreTx& tx, const std::string& run_id) {
  MEDPROF_ASSIGN_OR_RETURN(std::vector<KernelRow> kernels, tx.ListKernels(run_id));
  std::vector<TimeRow> rows;
  for (const KernelRow& k : kernels) {
    const std::string cat = k.category.empty()
                                ? std::string(taxonomy::CategoryName(taxonomy::ClassifyKernel(k.name, k.op)))
                                : k.category;
    rows.push_back(TimeRow{k.name, k.op, k.phase, cat, k.count, k.total_ns});
  }
  return rows;
}

// Op self times; an op is its own "op" (the alignment key of diff).
absl::StatusOr<std::vector<TimeRow>> OpTimes(StoreTx& tx, const std::string& run_id) {
  MEDPROF_ASSIGN_OR_RETURN(std::vector<OpRow> ops, tx.ListOps(run_id));
  std::vector<TimeRow> rows;
  for (const OpRow& o : ops) {
    const std::string cat =
        o.category.empty() ? std::string(taxonomy::CategoryName(taxonomy::ClassifyOp(o.name))) : o.category;
    rows.push_back(TimeRow{o.name, o.name, o.phase, cat, o.count, o.self_ns});
  }
  return rows;
}

// Why a run has no stored timeline, for the error message.
std::string NoTimelineReason(const RunRecord& run) {
  if (run.state == RunState::kRunning) return "the run is still running (the timeline is sent at its end)";
  if (!run.summary_json.empty()) {
    v1::RunSummary s;
    if (FromJson(run.summary_json, &s, "summary").ok()) {
      for (const v1::LayerStatus& l : s.layers()) {
        if (l.layer() == "trace" && !l.ran()) {
          return absl::StrCat("the trace layer did not run (", l.reason().empty() ? "no reason given" : l.reason(),
                              ")");
        }
      }
    }
  }
  if (run.backend == "cpu") {
    return "it ran on the CPU profiler backend, which records no device timeline (export --format json or csv "
           "has its step, op and kernel tables)";
  }
  if (run.state != RunState::kSucceeded) return absl::StrCat("the run ", RunStateName(run.state), " before its end");
  return "the worker sent no Timeline record (a worker without the raw-timeline feature)";
}

// Per kernel name, the coverage_pct of its metrics-layer aggregate; the ids of measured signatures.
struct MeasuredFacts {
  std::map<std::string, double> coverage;
  std::set<std::string> signatures;
};

absl::StatusOr<MeasuredFacts> LoadMeasuredFacts(StoreTx& tx, const std::string& run_id) {
  constexpr std::string_view kKernel = "kernel:", kSignature = "signature:";
  MEDPROF_ASSIGN_OR_RETURN(std::vector<MetricRow> metrics, tx.ListMetrics(run_id));
  MeasuredFacts out;
  for (const MetricRow& m : metrics) {
    if (m.name == "coverage_pct" && m.scope.starts_with(kKernel)) {
      out.coverage[m.scope.substr(kKernel.size())] = m.value;
    } else if (m.scope.starts_with(kSignature)) {
      out.signatures.insert(m.scope.substr(kSignature.size()));
    }
  }
  return out;
}

// The signatures of the listed kernels, largest first, with their share of their kernel's time.
std::vector<SignatureShareRow> ListedSignatures(const std::vector<SignatureRow>& all,
                                                const std::vector<KernelShareRow>& listed,
                                                const MeasuredFacts& facts) {
  std::set<std::string> names;
  for (const KernelShareRow& k : listed) names.insert(k.name);
  std::map<std::string, int64_t> kernel_ns;
  for (const SignatureRow& s : all) kernel_ns[s.kernel] += s.total_ns;
  std::vector<SignatureShareRow> out;
  for (const SignatureRow& s : all) {
    if (!names.contains(s.kernel)) continue;
    const int64_t k = kernel_ns[s.kernel];
    out.push_back(SignatureShareRow{s, s.steps > 0 ? static_cast<double>(s.count) / static_cast<double>(s.steps) : 0,
                                    k > 0 ? static_cast<double>(s.total_ns) / static_cast<double>(k) : 0,
                                    facts.signatures.contains(s.id)});
  }
  return out;  // ListSignatures is largest first already
}

}  // namespace

absl::StatusOr<KernelsResult> QueryEngine::Kernels(const CallContext&, const KernelsRequest& r) {
  QueryTimer timer(core_, "kernels");
  return core_.query_pool.Call([&] { return DoKernels(r); });
}

absl::StatusOr<KernelsResult> QueryEngine::DoKernels(const KernelsRequest& r) {
  MEDPROF_RETURN_IF_ERROR(RequireId(r.run_id, "run_id"));
  MEDPROF_RETURN_IF_ERROR(CheckTop(r.top));
  KernelsResult out;
  out.run_id = r.run_id;
  MeasuredFacts facts;
  std::vector<SignatureRow> signatures;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(RunRecord run, LoadRun(tx, r.run_id, "run_id"));
    MEDPROF_ASSIGN_OR_RETURN(facts, LoadMeasuredFacts(tx, run.run_id));
    if (r.signatures) {
      MEDPROF_ASSIGN_OR_RETURN(signatures, tx.ListSignatures(run.run_id));
    }
    MEDPROF_ASSIGN_OR_RETURN(std::vector<TimeRow> rows, KernelTimes(tx, run.run_id));
    out.time_source = "kernels";
    if (rows.empty()) {
      MEDPROF_ASSIGN_OR_RETURN(rows, OpTimes(tx, run.run_id));
      out.time_source = "ops";
    }
    out.kernels.clear();
    out.total_ns = 0;
    for (const TimeRow& t : rows) {
      out.total_ns += t.total_ns;
      auto cov = facts.coverage.find(t.name);
      out.kernels.push_back(KernelShareRow{t.name, t.category, t.op, t.phase, t.count, t.total_ns, 0,
                                           cov == facts.coverage.end() ? -1.0 : cov->second});
    }
    return absl::OkStatus();
  }));
  out.total_rows = static_cast<int>(out.kernels.size());
  for (KernelShareRow& k : out.kernels) {
    k.share = out.total_ns > 0 ? static_cast<double>(k.total_ns) / static_cast<double>(out.total_ns) : 0;
  }
  std::stable_sort(out.kernels.begin(), out.kernels.end(),
                   [](const KernelShareRow& a, const KernelShareRow& b) { return a.total_ns > b.total_ns; });
  if (r.top > 0 && out.kernels.size() > static_cast<size_t>(r.top)) out.kernels.resize(r.top);
  if (r.signatures) out.signatures = ListedSignatures(signatures, out.kernels, facts);
  return out;
}

absl::StatusOr<DiffResult> QueryEngine::Diff(const CallContext&, const DiffRequest& r) {
  QueryTimer timer(core_, "diff");
  return core_.query_pool.Call([&] { return DoDiff(r); });
}

absl::StatusOr<DiffResult> QueryEngine::DoDiff(const DiffRequest& r) {
  MEDPROF_RETURN_IF_ERROR(RequireId(r.run_a, "run_a"));
  MEDPROF_RETURN_IF_ERROR(RequireId(r.run_b, "run_b"));
  MEDPROF_RETURN_IF_ERROR(CheckTop(r.top));
  DiffResult out;
  out.run_a = r.run_a;
  out.run_b = r.run_b;
  struct Side {
    std::vector<TimeRow> rows;
    std::string source;
    int steps = 0;
  };
  Side a, b;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(RunRecord ra, LoadRun(tx, r.run_a, "run_a"));
    MEDPROF_ASSIGN_OR_RETURN(RunRecord rb, LoadRun(tx, r.run_b, "run_b"));
    MEDPROF_ASSIGN_OR_RETURN(a.rows, KernelTimes(tx, ra.run_id));
    MEDPROF_ASSIGN_OR_RETURN(b.rows, KernelTimes(tx, rb.run_id));
    a.source = "kernels";
    if (a.rows.empty() || b.rows.empty()) {
      // Both sides must speak of the same time: op self times when either has no kernel rows.
      MEDPROF_ASSIGN_OR_RETURN(a.rows, OpTimes(tx, ra.run_id));
      MEDPROF_ASSIGN_OR_RETURN(b.rows, OpTimes(tx, rb.run_id));
      a.source = "ops";
    }
    for (const auto* side : {&a, &b}) {
      if (side->rows.empty()) {
        const RunRecord& run = side == &a ? ra : rb;
        return absl::FailedPreconditionError(absl::StrCat("run ", run.run_id, " (", RunStateName(run.state),
                                                          ") has no kernel or op times to compare"));
      }
    }
    MEDPROF_ASSIGN_OR_RETURN(std::vector<StepRow> sa, tx.ListSteps(ra.run_id));
    MEDPROF_ASSIGN_OR_RETURN(std::vector<StepRow> sb, tx.ListSteps(rb.run_id));
    a.steps = static_cast<int>(sa.size());
    b.steps = static_cast<int>(sb.size());
    out.a_step_ms_median = MedianStepMs(sa);
    out.b_step_ms_median = MedianStepMs(sb);
    return absl::OkStatus();
  }));
  out.time_source = a.source;
  out.a_steps = a.steps;
  out.b_steps = b.steps;

  struct Acc {
    int64_t ns = 0, count = 0;
    std::set<std::string> names;
  };
  std::map<std::pair<std::string, std::string>, std::pair<Acc, Acc>> rows;
  auto add = [&](const Side& s, bool is_a) {
    for (const TimeRow& t : s.rows) {
      auto& pair = rows[{t.op, t.category}];
      Acc& acc = is_a ? pair.first : pair.second;
      acc.ns += t.total_ns;
      acc.count += t.count;
      acc.names.insert(t.name);
    }
  };
  add(a, true);
  add(b, false);
  const int64_t sa = std::max(1, a.steps), sb = std::max(1, b.steps);
  for (const auto& [key, pair] : rows) {
    DiffRowView v;
    v.op = key.first;
    v.category = key.second;
    v.a_ns = pair.first.ns / sa;
    v.b_ns = pair.second.ns / sb;
    v.a_count = pair.first.count / sa;
    v.b_count = pair.second.count / sb;
    v.a_kernels = static_cast<int>(pair.first.names.size());
    v.b_kernels = static_cast<int>(pair.second.names.size());
    out.a_total_ns += v.a_ns;
    out.b_total_ns += v.b_ns;
    out.rows.push_back(std::move(v));
  }
  for (DiffRowView& v : out.rows) {
    v.delta_ns = v.b_ns - v.a_ns;
    v.ratio = v.a_ns > 0 ? static_cast<double>(v.b_ns) / static_cast<double>(v.a_ns) : 0;
    v.a_share = out.a_total_ns > 0 ? static_cast<double>(v.a_ns) / static_cast<double>(out.a_total_ns) : 0;
    v.b_share = out.b_total_ns > 0 ? static_cast<double>(v.b_ns) / static_cast<double>(out.b_total_ns) : 0;
  }
  std::stable_sort(out.rows.begin(), out.rows.end(), [](const DiffRowView& x, const DiffRowView& y) {
    return std::llabs(x.delta_ns) > std::llabs(y.delta_ns);
  });
  if (r.top > 0 && out.rows.size() > static_cast<size_t>(r.top)) out.rows.resize(r.top);
  return out;
}

absl::StatusOr<TimelineResult> QueryEngine::Timeline(const CallContext&, const std::string& run_id) {
  QueryTimer timer(core_, "timeline");
  return core_.query_pool.Call([&] { return DoTimeline(run_id); });
}

absl::StatusOr<TimelineResult> QueryEngine::DoTimeline(const std::string& run_id) {
  MEDPROF_RETURN_IF_ERROR(RequireId(run_id, "run_id"));
  TimelineResult out;
  out.run_id = run_id;
  std::vector<TimelinePart> parts, util;
  RunRecord run;
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(run, LoadRun(tx, run_id, "run_id"));
    MEDPROF_ASSIGN_OR_RETURN(parts, tx.ListTimelineParts(run_id, "timeline"));
    MEDPROF_ASSIGN_OR_RETURN(util, tx.ListTimelineParts(run_id, "utilization"));
    return absl::OkStatus();
  }));
  if (parts.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run_id, " has no stored timeline: ", NoTimelineReason(run)));
  }
  // Parts are merged onto the first part's origin.
  for (const TimelinePart& p : parts) {
    v1::Timeline t;
    MEDPROF_RETURN_IF_ERROR(FromJson(p.body_json, &t, absl::StrCat("timeline part ", p.part, " of run ", run_id)));
    if (p.part == 0 || out.timeline.origin_unix_ns() == 0) out.timeline.set_origin_unix_ns(t.origin_unix_ns());
    const int64_t shift = t.origin_unix_ns() - out.timeline.origin_unix_ns();
    for (v1::TimelineEvent& e : *t.mutable_events()) {
      e.set_start_ns(e.start_ns() + shift);
      *out.timeline.add_events() = std::move(e);
    }
    out.timeline.set_steps(std::max(out.timeline.steps(), t.steps()));
    out.timeline.set_truncated(out.timeline.truncated() || t.truncated());
  }
  for (const TimelinePart& p : util) {
    v1::UtilizationTimeline u;
    MEDPROF_RETURN_IF_ERROR(FromJson(p.body_json, &u, absl::StrCat("utilization part ", p.part, " of run ", run_id)));
    if (!out.utilization.has_value()) {
      out.utilization = std::move(u);
      continue;
    }
    if (u.metrics_size() != out.utilization->metrics_size()) continue;  // another column set: keep the first
    for (v1::UtilizationSample& s : *u.mutable_samples()) *out.utilization->add_samples() = std::move(s);
  }
  return out;
}

absl::StatusOr<std::map<std::string, int64_t>> QueryEngine::JobsByState() {
  std::map<std::string, int64_t> out;
  for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded, JobState::kFailed,
                     JobState::kCancelled}) {
    out[JobStateName(s)] = 0;
  }
  MEDPROF_RETURN_IF_ERROR(core_.store.Read([&](StoreTx& tx) -> absl::Status {
    MEDPROF_ASSIGN_OR_RETURN(auto counts, tx.CountJobsByState());
    for (const auto& [state, n] : counts) out[state] = n;
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace medprof::server
