// CuptiProfiler: the work after the measured steps (trace overhead, PM sampling; the metrics layer is
// metrics_layer.h) and the results derived from every layer. See cupti_profiler.h for the contract.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/profiler/cuda_call.h"
#include "agent/profiler/cupti_profiler.h"
#include "agent/profiler/extra_step_observer.h"
#include "agent/profiler/findings.h"
#include "agent/profiler/pm_sampler.h"
#include "agent/profiler/range_profiler.h"
#include "common/clock.h"
#include "common/kernel_taxonomy.h"
#include "common/logging.h"
#include "common/status.h"

namespace medprof::profiler {
namespace {

const Logger kLog("profiler");

double Median(std::vector<int64_t> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? static_cast<double>(v[n / 2]) : (static_cast<double>(v[n / 2 - 1]) + v[n / 2]) / 2.0;
}

v1::MetricValue Row(const std::string& scope, const std::string& name, double value,
                    const std::string& unit) {
  v1::MetricValue m;
  m.set_scope(scope);
  m.set_name(name);
  m.set_value(std::isfinite(value) ? value : 0.0);
  m.set_unit(unit);
  return m;
}

bool IsDeviceKernel(const std::string& name) { return !name.empty() && name.front() != '['; }

// Per kernel name: time over every (op, phase) entry, and the facts of its largest entry.
struct NameTotals {
  int64_t total_ns = 0;
  int64_t largest_ns = -1;
  const v1::KernelStat* largest = nullptr;
};

std::map<std::string, NameTotals> TotalsByName(const v1::KernelAggregates& agg) {
  std::map<std::string, NameTotals> out;
  for (const v1::KernelStat& k : agg.kernels()) {
    NameTotals& t = out[k.name()];
    t.total_ns += k.total_ns();
    if (k.total_ns() > t.largest_ns) {
      t.largest_ns = k.total_ns();
      t.largest = &k;
    }
  }
  return out;
}

}  // namespace

absl::Status CuptiProfiler::AfterMeasurement(const StepRunner& run, const ProgressFn& progress) {
  // PC sampling shares the counters with PM sampling and the range profiler: off first.
  if (pc_ != nullptr && pc_->enabled()) {
    if (absl::Status s = pc_->Disable(nullptr, /*keep=*/false); !s.ok())
      kLog.Warn("PC sampling: {}", s.ToString());
    if (pc_->hardware_buffer_full()) {
      kLog.Warn("PC sampling: the hardware buffer filled up; some samples were lost");
    }
  }
  if (absl::Status s = cupti_->Flush(); !s.ok()) kLog.Warn("trace flush: {}", s.ToString());
  MEDPROF_RETURN_IF_ERROR(MeasureTraceOverhead(run, progress));
  MEDPROF_RETURN_IF_ERROR(RunPmWindow(run, progress));
  if (!options_.metrics.enabled) return absl::OkStatus();
  // The metrics layer's steps run without the activity trace, as Nsight Compute runs the worker
  // (--no-trace): the replayed kernels run with nothing else instrumenting them, and their
  // replays leave no records. Their launches are found by the callback API, which stays on.
  if (absl::Status s = cupti_->Pause(); !s.ok()) {
    kLog.Warn("trace pause before the metrics layer (it runs with the trace on): {}", s.ToString());
  }
  const absl::Status metrics = metrics_->Run(run, progress, kernels_->Signatures());
  if (absl::Status s = cupti_->Resume(); !s.ok())
    kLog.Warn("trace resume after the metrics layer: {}", s.ToString());
  return metrics;
}

absl::Status CuptiProfiler::MeasureTraceOverhead(const StepRunner& run, const ProgressFn& progress) {
  const int pairs = options_.overhead_pairs;
  if (pairs <= 0) {
    overhead_note_ = "trace overhead not measured (overhead pairs 0)";
    return absl::OkStatus();
  }
  std::vector<int64_t> on, off;
  for (int i = 0; i < pairs; ++i) {
    // Alternate the order inside each pair so drift does not favour one side.
    for (int half = 0; half < 2; ++half) {
      const bool traced = (half == 0) == (i % 2 == 0);
      absl::Status toggle = traced ? cupti_->Resume() : cupti_->Pause();
      if (!toggle.ok()) {
        (void)cupti_->Resume();
        overhead_note_ = absl::StrCat("trace overhead not measured: ", toggle.message());
        kLog.Warn("{}", overhead_note_);
        return absl::OkStatus();
      }
      ExtraStepObserver obs(this);
      MEDPROF_RETURN_IF_ERROR(run(1, &obs));
      (traced ? on : off).push_back(obs.wall_ns.empty() ? 0 : obs.wall_ns.front());
      progress("overhead", 2 * i + half + 1, 2 * pairs, "trace overhead: steps with and without the trace");
    }
  }
  MEDPROF_RETURN_IF_ERROR(cupti_->Resume());
  const double with = Median(on), without = Median(off);
  trace_overhead_pct_ = without > 0 ? 100.0 * (with - without) / without : 0.0;
  kLog.Info("trace overhead: median step {:.2f} ms with the trace, {:.2f} ms without ({} pairs): {:+.2f} %",
            with / 1e6, without / 1e6, pairs, trace_overhead_pct_);
  return absl::OkStatus();
}

absl::Status CuptiProfiler::RunPmWindow(const StepRunner& run, const ProgressFn& progress) {
  if (!options_.sampling) return absl::OkStatus();
  auto chip = ChipName(options_.gpu.index);
  if (!chip.ok()) {
    pm_status_ = chip.status();
    return absl::OkStatus();
  }
  if (absl::Status s = DeviceSupported(options_.gpu.index, CUPTI_PROFILER_PM_SAMPLING); !s.ok()) {
    pm_status_ = s;
    return absl::OkStatus();
  }
  auto host = CuptiHost::Create(CUPTI_PROFILER_TYPE_PM_SAMPLING, *chip, {});
  if (!host.ok()) {
    pm_status_ = host.status();
    return absl::OkStatus();
  }
  const ResolvedCatalog cat =
      ResolveCatalog(PmSamplingCatalog(), *chip, [&](const std::string& m) { return (*host)->Validity(m); });
  if (cat.metrics.empty()) {
    pm_status_ = absl::UnimplementedError(absl::StrCat("no PM-sampling metric is valid on ", *chip));
    return absl::OkStatus();
  }
  // About 1000 samples over one step: the step's median time decides the interval (>= 100 us).
  const std::vector<int64_t>& steps = measured_wall_ns_;
  const uint64_t step_ns = static_cast<uint64_t>(std::max(1.0, Median(steps)));
  const uint64_t interval_ns = std::max<uint64_t>(100'000, step_ns / 1000);
  auto pm = PmSampler::Enable(options_.gpu.index, *chip, cat.PerfworksNames({MetricGroup::kCore}),
                              interval_ns, 4000);
  if (!pm.ok()) {
    pm_status_ = pm.status();
    kLog.Warn("PM sampling unavailable: {}", pm_status_.ToString());
    return absl::OkStatus();
  }
  progress("sampling", 0, 1, "PM sampling: one step");
  if (absl::Status s = (*pm)->Start(); !s.ok()) {
    pm_status_ = s;
    return absl::OkStatus();
  }
  ExtraStepObserver obs(this);
  const absl::Status ran = run(1, &obs);
  if (absl::Status s = (*pm)->Stop(); !s.ok()) pm_status_ = s;
  MEDPROF_RETURN_IF_ERROR(ran);
  bool overflow = false;
  auto samples = (*pm)->Decode(&overflow);
  if (!samples.ok()) {
    pm_status_ = samples.status();
    return absl::OkStatus();
  }
  v1::UtilizationTimeline t;
  for (const ResolvedMetric& m : cat.metrics) t.add_metrics(m.name);
  t.set_interval_ns(static_cast<int64_t>(interval_ns));
  const uint64_t origin = samples->empty() ? 0 : samples->front().start_ns;
  t.set_origin_unix_ns(static_cast<int64_t>(origin));
  for (const PmSample& s : *samples) {
    v1::UtilizationSample* u = t.add_samples();
    u->set_t_ns(static_cast<int64_t>(s.start_ns - origin));
    for (size_t i = 0; i < s.values.size() && i < cat.metrics.size(); ++i) {
      double v = s.values[i];
      SanitizeMetricValue(cat.metrics[i], &v);
      u->add_values(v);
    }
  }
  kLog.Info("PM sampling: {} samples every {} us over one step{}", t.samples_size(), interval_ns / 1000,
            overflow ? " (hardware buffer overflowed)" : "");
  progress("sampling", 1, 1, absl::StrCat("PM sampling: ", t.samples_size(), " samples"));
  if (t.samples_size() == 0) {
    pm_status_ = absl::UnavailableError("PM sampling: no samples were decoded");
    return absl::OkStatus();
  }
  utilization_ = std::move(t);
  pm_status_ = absl::OkStatus();
  return absl::OkStatus();
}

v1::MetricValues CuptiProfiler::DerivedMetrics() const {
  v1::MetricValues out;
  const v1::KernelAggregates agg = kernels_->Snapshot();
  // Kernel time and category shares, per run and per phase.
  std::map<std::string, std::map<std::string, int64_t>> by_scope;  // scope -> category -> ns
  std::map<std::string, int64_t> scope_total;
  for (const v1::KernelStat& k : agg.kernels()) {
    for (const std::string& scope : {std::string("run"), absl::StrCat("phase:", k.phase())}) {
      if (scope == "phase:") continue;
      by_scope[scope][k.category()] += k.total_ns();
      scope_total[scope] += k.total_ns();
    }
  }
  for (const auto& [scope, cats] : by_scope) {
    const double total = static_cast<double>(scope_total[scope]);
    *out.add_values() = Row(scope, "gpu_time_ns", total, "ns");
    for (const auto& [cat, ns] : cats) {
      *out.add_values() = Row(scope, absl::StrCat("share.", cat), total > 0 ? ns / total : 0.0, "fraction");
    }
  }
  // Metrics layer: per kernel (aggregates), per signature, per phase, and time-weighted run averages
  // of percentages.
  const std::map<std::string, NameTotals> totals = TotalsByName(agg);
  std::map<std::string, std::pair<double, double>> weighted;  // name -> (sum value*w, sum w)
  for (const auto& [kernel, values] : metrics_->kernels()) {
    auto t = totals.find(kernel);
    const double w = t == totals.end() ? 0.0 : static_cast<double>(t->second.total_ns);
    for (const auto& [name, v] : values) {
      *out.add_values() = Row(absl::StrCat("kernel:", kernel), name, v, "");
      if (absl::EndsWith(name, "_pct") && !absl::StartsWith(name, "coverage")) {
        weighted[name].first += v * w;
        weighted[name].second += w;
      }
    }
  }
  for (const auto& [name, acc] : weighted) {
    if (acc.second > 0)
      *out.add_values() = Row("run", absl::StrCat(name, ".avg"), acc.first / acc.second, "%");
  }
  for (const auto& [id, values] : metrics_->signatures()) {
    for (const auto& [name, v] : values) *out.add_values() = Row(absl::StrCat("signature:", id), name, v, "");
  }
  for (const auto& [phase, values] : metrics_->phases()) {
    for (const auto& [name, v] : values) *out.add_values() = Row(absl::StrCat("phase:", phase), name, v, "");
  }
  if (options_.metrics.enabled) {
    *out.add_values() = Row("run", "metrics.wall_ms", static_cast<double>(metrics_->wall_ms()), "ms");
    *out.add_values() =
        Row("run", "metrics.kernels_profiled", static_cast<double>(metrics_->kernels().size()), "kernels");
    *out.add_values() = Row("run", "metrics.signatures_profiled",
                            static_cast<double>(metrics_->signatures().size()), "signatures");
    for (const std::string& d : metrics_->dropped())
      *out.add_values() = Row("run", absl::StrCat("metrics.dropped.", d), 1, "");
  }
  // Sampling layer: PC-sampling stall shares per kernel; PM means.
  if (pc_collected_) {
    for (const auto& [kernel, k] : stalls_.kernels()) {
      const std::string scope = absl::StrCat("kernel:", kernel);
      *out.add_values() = Row(scope, "pcsamp.samples", static_cast<double>(k.total), "samples");
      for (const auto& [reason, share] : stalls_.Shares(kernel)) {
        *out.add_values() = Row(scope, absl::StrCat("pcsamp.", reason), share, "fraction");
      }
    }
    *out.add_values() = Row("run", "pcsamp.samples", static_cast<double>(stalls_.total()), "samples");
    *out.add_values() = Row("run", "pcsamp.dropped", static_cast<double>(stalls_.dropped()), "samples");
  }
  if (utilization_.has_value() && utilization_->samples_size() > 0) {
    for (int i = 0; i < utilization_->metrics_size(); ++i) {
      double sum = 0;
      for (const v1::UtilizationSample& s : utilization_->samples())
        sum += i < s.values_size() ? s.values(i) : 0.0;
      *out.add_values() = Row("run", absl::StrCat("pm.", utilization_->metrics(i), ".mean"),
                              sum / utilization_->samples_size(), "");
    }
  }
  if (options_.overhead_pairs > 0 && overhead_note_.empty()) {
    *out.add_values() = Row("run", "trace.overhead_pct", trace_overhead_pct_, "%");
  }
  return out;
}

// Findings: every kernel with trace facts, plus its aggregate and measured signatures where the
// metrics layer ran.
std::vector<v1::KernelFinding> CuptiProfiler::Findings() const {
  const v1::KernelAggregates agg = kernels_->Snapshot();
  int64_t all_ns = 0;
  for (const v1::KernelStat& k : agg.kernels()) all_ns += k.total_ns();
  if (all_ns <= 0) return {};
  const auto blocks = [](const auto& grid) {
    int64_t n = 1;
    for (int32_t g : grid) n *= std::max(1, g);
    return n;
  };
  std::map<std::string, std::vector<SignatureFacts>> measured;  // kernel -> its measured signatures
  const v1::KernelSignatures signatures = kernels_->Signatures();  // (a temporary would die before the loop)
  for (const v1::KernelSignature& s : signatures.signatures()) {
    auto m = metrics_->signatures().find(s.id());
    if (m != metrics_->signatures().end())
      measured[s.kernel()].push_back({s.id(), s.op(), s.shapes(), blocks(s.grid()), m->second});
  }
  const std::map<std::string, std::array<int32_t, 3>> grids = kernels_->DominantGrids();
  std::vector<KernelFacts> facts;
  for (const auto& [name, t] : TotalsByName(agg)) {
    if (!IsDeviceKernel(name) || t.largest == nullptr) continue;
    KernelFacts f;
    f.name = name;
    f.op = t.largest->op();
    f.phase = t.largest->phase();
    f.category = t.largest->category();
    f.share = static_cast<double>(t.total_ns) / static_cast<double>(all_ns);
    if (auto g = grids.find(name); g != grids.end()) f.blocks = blocks(g->second);
    f.theoretical_occupancy = t.largest->theoretical_occupancy();
    if (auto it = metrics_->kernels().find(name); it != metrics_->kernels().end()) f.metrics = it->second;
    if (auto it = measured.find(name); it != measured.end()) f.signatures = std::move(it->second);
    facts.push_back(std::move(f));
  }
  FindingsOptions fo;
  fo.sm_count = options_.gpu.sm_count;
  fo.roofs = roofs_;
  return FindKernelFindings(facts, fo);
}

std::vector<v1::WorkerMessage> CuptiProfiler::Results() const {
  std::vector<v1::WorkerMessage> out;
  {
    v1::WorkerMessage m;
    *m.mutable_metrics() = DerivedMetrics();
    if (m.metrics().values_size() > 0) out.push_back(std::move(m));
  }
  kLog.Debug("results: findings");
  if (std::vector<v1::KernelFinding> found = Findings(); !found.empty()) {
    v1::WorkerMessage m;
    for (v1::KernelFinding& f : found) *m.mutable_findings()->add_findings() = std::move(f);
    out.push_back(std::move(m));
  }
  kLog.Debug("results: signatures");
  if (v1::KernelSignatures sigs = kernels_->Signatures(); sigs.signatures_size() > 0) {
    v1::WorkerMessage m;
    *m.mutable_signatures() = std::move(sigs);
    out.push_back(std::move(m));
  }
  {
    // The raw timeline, in records of at most kTimelineChunk events: one upload request of the
    // agent stays far below gRPC's 16 MiB message limit, and the server merges the records.
    constexpr size_t kTimelineChunk = 20000;
    kLog.Debug("results: timeline");
    const std::vector<TimelineEvent> events = kernels_->Timeline();
    if (!events.empty()) {
      uint64_t origin = UINT64_MAX;
      int steps = 0;
      for (const TimelineEvent& e : events) {
        origin = std::min(origin, e.start_ns);
        steps = std::max(steps, e.step + 1);
      }
      const KernelAggregatorCounters c = kernels_->counters();
      for (size_t begin = 0; begin < events.size(); begin += kTimelineChunk) {
        v1::WorkerMessage m;
        v1::Timeline* t = m.mutable_timeline();
        t->set_origin_unix_ns(static_cast<int64_t>(origin));
        t->set_steps(steps);
        t->set_truncated(c.timeline_truncated > 0);
        const size_t end = std::min(events.size(), begin + kTimelineChunk);
        for (size_t i = begin; i < end; ++i) {
          const TimelineEvent& e = events[i];
          v1::TimelineEvent* o = t->add_events();
          o->set_name(e.name);
          o->set_kind(e.kind == RecordKind::kMemcpy   ? "memcpy"
                      : e.kind == RecordKind::kMemset ? "memset"
                                                      : "kernel");
          o->set_start_ns(static_cast<int64_t>(e.start_ns - origin));
          o->set_duration_ns(static_cast<int64_t>(e.end_ns - e.start_ns));
          o->set_stream(static_cast<int32_t>(e.stream_id));
          o->set_op(e.op);
          o->set_phase(e.phase);
          o->set_step(e.step);
          o->set_category(std::string(taxonomy::CategoryName(taxonomy::ClassifyKernel(e.name, e.op))));
        }
        out.push_back(std::move(m));
      }
    }
  }
  if (utilization_.has_value()) {
    v1::WorkerMessage m;
    *m.mutable_utilization() = *utilization_;
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace medprof::profiler
