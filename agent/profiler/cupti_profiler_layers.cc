// CuptiProfiler, part 2: the work after the measured steps (trace overhead, PM sampling, the
// metrics layer) and the derived results. See cupti_profiler.h for the contract.
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
#include "agent/profiler/counter_session.h"
#include "agent/profiler/cuda_call.h"
#include "agent/profiler/cupti_callbacks.h"
#include "agent/profiler/cupti_profiler.h"
#include "agent/profiler/findings.h"
#include "agent/profiler/launch_picker.h"
#include "agent/profiler/pm_sampler.h"
#include "agent/profiler/range_profiler.h"
#include "common/clock.h"
#include "common/kernel_taxonomy.h"
#include "common/logging.h"
#include "common/status.h"

namespace medprof::profiler {
namespace {

const Logger kLog("profiler");

// Forwards the step hooks of extra steps to the profiler (so the work is the same as in a
// measured step: ops and phases push their correlation ids) and records each step's wall time.
class ExtraStepObserver : public meddpm::PhaseObserver {
 public:
  explicit ExtraStepObserver(meddpm::PhaseObserver* inner) : inner_(inner) {}
  void OnStepBegin(int index, bool measured) override { inner_->OnStepBegin(index, measured); }
  void OnStepEnd(const meddpm::StepReport& report) override {
    inner_->OnStepEnd(report);
    wall_ns.push_back(report.wall_ns);
  }
  void OnPhaseBegin(std::string_view name) override {
    inner_->OnPhaseBegin(name);
    if (phase_begin) phase_begin(name);
  }
  void OnPhaseEnd(std::string_view name) override {
    if (phase_end) phase_end(name);
    inner_->OnPhaseEnd(name);
  }
  std::vector<int64_t> wall_ns;
  std::function<void(std::string_view)> phase_begin, phase_end;

 private:
  meddpm::PhaseObserver* inner_;
};

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

// One range's values under their medprof names (sanitized; a non-finite value is left out), plus
// dram_bytes = read + write when both are there.
void StoreRangeValues(const std::vector<ResolvedMetric>& metrics, const std::vector<double>& values,
                      std::map<std::string, double>* out) {
  for (size_t i = 0; i < metrics.size() && i < values.size(); ++i) {
    double v = values[i];
    if (SanitizeMetricValue(metrics[i], &v)) (*out)[metrics[i].name] = v;
  }
  SumDramBytes(out);
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
  if (!options_.metrics) return absl::OkStatus();
  // The metrics layer's steps run without the activity trace, as Nsight Compute runs the worker
  // (--no-trace): the replayed kernels run with nothing else instrumenting them (on the H200 a
  // 58 us convolution read 3-13 % longer here, traced, than under Nsight Compute, untraced), and
  // their replays leave no records. Their launches are found by the callback API, which stays on.
  if (absl::Status s = cupti_->Pause(); !s.ok()) {
    kLog.Warn("trace pause before the metrics layer (it runs with the trace on): {}", s.ToString());
  }
  const absl::Status metrics = RunMetrics(run, progress);
  if (absl::Status s = cupti_->Resume(); !s.ok()) kLog.Warn("trace resume after the metrics layer: {}", s.ToString());
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

absl::Status CuptiProfiler::RunMetrics(const StepRunner& run, const ProgressFn& progress) {
  if (!options_.metrics) return absl::OkStatus();
  const int64_t begin = MonotonicNs();
  auto finish = [&](absl::Status s) {
    metrics_status_ = s;
    metrics_wall_ms_ = (MonotonicNs() - begin) / 1'000'000;
    if (!s.ok()) kLog.Warn("metrics layer: {}", s.ToString());
    return absl::OkStatus();
  };
  // The counter API: the range profiler from CC 7.5 on, the legacy Profiling API before (V100),
  // unless the job names one.
  int cc_major = 0, cc_minor = 0;
  (void)std::sscanf(options_.gpu.compute_capability.c_str(), "%d.%d", &cc_major, &cc_minor);
  counter_api_ = options_.counter_api == "legacy"  ? CounterApi::kLegacy
                 : options_.counter_api == "range" ? CounterApi::kRangeProfiler
                                                   : DefaultCounterApi(cc_major, cc_minor);
  metrics_notes_.push_back(absl::StrCat("counter API: ", CounterApiName(counter_api_)));
  if (counter_api_ == CounterApi::kLegacy && options_.counter_api == "auto") {
    // The legacy backend hung in its kernel pass when checked on the H200 (2026-12-02) and has
    // not run on a V100 yet: it runs only when asked for, so a V100 run is never stalled by it.
    return finish(absl::FailedPreconditionError(
        "the legacy Profiling API backend (CC < 7.5, e.g. V100) is not validated yet; submit with "
        "counter_api=legacy (worker --counter-api legacy) to try it"));
  }
  if (absl::Status s = DeviceSupported(options_.gpu.index, CUPTI_PROFILER_RANGE_PROFILING); !s.ok())
    return finish(s);
  auto ctx = CurrentContext();
  if (!ctx.ok()) return finish(ctx.status());
  auto chip = ChipName(options_.gpu.index);
  if (!chip.ok()) return finish(chip.status());
  auto availability = CounterAvailability(*ctx);
  if (!availability.ok()) return finish(availability.status());
  auto host = CuptiHost::Create(CUPTI_PROFILER_TYPE_RANGE_PROFILER, *chip, *availability);
  if (!host.ok()) return finish(host.status());
  const ResolvedCatalog cat =
      ResolveCatalog(MetricCatalog(), *chip, [&](const std::string& m) { return (*host)->Validity(m); });
  for (const DroppedMetric& d : cat.dropped) {
    dropped_metrics_.push_back(d.name);
    metrics_notes_.push_back(absl::StrCat("dropped ", d.name, ": ", d.reason));
  }
  // The top-K kernels by trace time.
  const v1::KernelAggregates agg = kernels_->Snapshot();
  std::vector<std::pair<int64_t, std::string>> by_time;
  for (const auto& [name, t] : TotalsByName(agg)) {
    if (IsDeviceKernel(name)) by_time.emplace_back(t.total_ns, name);
  }
  std::sort(by_time.rbegin(), by_time.rend());
  std::vector<std::string> targets;
  for (const auto& [ns, name] : by_time) {
    if (static_cast<int>(targets.size()) >= options_.metrics_top_k) break;
    targets.push_back(name);
  }
  CounterSessionOptions base;
  base.ctx = *ctx;
  base.chip = *chip;
  base.availability = *availability;
  progress("metrics", 0, 2,
           absl::StrCat("metrics layer: ", targets.size(), " kernels on ", *chip, " (",
                        CounterApiName(counter_api_), ")"));
  if (!targets.empty()) {
    // The core counters on the same launch in `metrics_launches` steps, medians kept (one
    // replayed launch of a 58 us convolution read 3-13 % long, or 2 points low on the tensor
    // pipe, in single-launch runs on the H200). Every core metric the chip can count in one pass
    // is measured in one-pass sessions (GH100: 24 of the 25 in 6 sessions), so each value comes
    // from one execution of the kernel as the application ran it — never stitched from passes of
    // different replays, and with no memory restore before it (under 6-pass replay the same
    // kernel's DRAM throughput read 8.1-8.6 % against Nsight Compute's 5.5 %; 6.5 % in one pass).
    // The rest (GH100: the L2 hit rate, 2 passes alone) in one replay session; then stalls,
    // throughputs and the SASS mix (ratios; the 16-pass session that costs most) on one launch.
    const size_t launches = static_cast<size_t>(std::max(1, options_.metrics_launches));
    const SinglePassPlan plan = PackSinglePass(
        cat.InGroups({MetricGroup::kCore}), [&](const std::vector<std::string>& perfworks) -> absl::StatusOr<size_t> {
          MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<CuptiHost::Config> config, (*host)->NewConfig(perfworks));
          return config->passes();
        });
    kLog.Info("metrics layer: core counters in {} one-pass sessions, {} replayed", plan.groups.size(),
              plan.rest.size());
    std::vector<ResolvedMetric> replayed = plan.rest;
    auto failed = [&](const absl::Status& s) {
      // The workload itself failed (Aborted) ends the run; a profiler error ends the layer.
      return s.code() == absl::StatusCode::kAborted ? s : finish(s);
    };
    for (size_t g = 0; g < plan.groups.size(); ++g) {
      const absl::Status s = ProfileKernels(run, base, targets, plan.groups[g],
                                            absl::StrCat("core, one pass ", g + 1, "/", plan.groups.size()),
                                            launches, /*max_passes=*/1);
      if (s.code() == absl::StatusCode::kResourceExhausted) {  // the device disagrees with the host's count
        kLog.Warn("metrics layer: {}; these metrics are replayed instead", std::string(s.message()));
        replayed.insert(replayed.end(), plan.groups[g].begin(), plan.groups[g].end());
        continue;
      }
      if (!s.ok()) return failed(s);
    }
    if (!replayed.empty()) {
      if (absl::Status s = ProfileKernels(run, base, targets, replayed, "core, replayed", launches); !s.ok())
        return failed(s);
    }
    if (absl::Status s = ProfileKernels(
            run, base, targets, cat.InGroups({MetricGroup::kStalls, MetricGroup::kThroughput, MetricGroup::kSass}),
            "stalls, throughput, sass", 1);
        !s.ok()) {
      return failed(s);
    }
    // DRAM bytes as the sum of the stored read and write medians, whichever sessions they came from.
    for (auto& [kernel, values] : kernel_metrics_) SumDramBytes(&values);
  }
  progress("metrics", 1, 2, "metrics layer: phase ranges");
  if (absl::Status s = ProfilePhases(run, base, cat); !s.ok()) {
    if (s.code() == absl::StatusCode::kAborted) return s;
    return finish(s);
  }
  progress("metrics", 2, 2,
           absl::StrCat("metrics layer: ", kernel_metrics_.size(), " kernels, ", phase_metrics_.size(),
                        " phases"));
  return finish(absl::OkStatus());
}

absl::Status CuptiProfiler::ProfileKernels(const StepRunner& run, const CounterSessionOptions& base,
                                           const std::vector<std::string>& targets,
                                           const std::vector<ResolvedMetric>& metrics, const std::string& label,
                                           size_t launches, size_t max_passes) {
  if (metrics.empty()) return absl::OkStatus();  // none of them valid on this chip (recorded as dropped)
  CounterSessionOptions o = base;
  o.metrics.clear();
  for (const ResolvedMetric& m : metrics) o.metrics.push_back(m.perfworks);
  o.range = CUPTI_AutoRange;
  o.replay = CUPTI_KernelReplay;
  o.max_ranges = targets.size() * launches;
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<CounterSession> target, NewCounterSession(counter_api_, o));
  if (max_passes > 0 && target->passes() > max_passes) {
    return absl::ResourceExhaustedError(absl::StrCat(metrics.size(), " metrics need ", target->passes(),
                                                     " passes, more than ", max_passes));
  }
  kLog.Info("metrics layer ({}, {}): {} metrics in {} passes per kernel (kernel replay), {} kernels x {} launches",
            CounterApiName(counter_api_), label, metrics.size(), target->passes(), targets.size(), launches);

  // Which launches: LaunchPicker (the first launch with the dominant grid of each target, one
  // per kernel per step, in `launches` steps, then one any-grid step). API enter -> Start,
  // exit -> Stop.
  LaunchPicker picker(targets, kernels_->DominantGrids(), launches);
  std::unordered_map<std::string, std::string> demangled;
  bool active = false;
  std::pair<std::string, LaunchPicker::Grid> current;
  absl::Status hook_status;
  MEDPROF_ASSIGN_OR_RETURN(CuptiCallbacks * callbacks, CuptiCallbacks::Install());
  MEDPROF_RETURN_IF_ERROR(callbacks->SetLaunchHook([&](const LaunchEvent& e) {
    if (!hook_status.ok() || e.symbol == nullptr) return;
    if (e.enter) {
      if (active) return;
      auto [it, fresh] = demangled.try_emplace(e.symbol);
      if (fresh) it->second = KernelAggregator::Demangle(e.symbol);
      const LaunchPicker::Grid grid = {e.grid[0], e.grid[1], e.grid[2]};
      if (!picker.Want(it->second, grid)) return;
      if (absl::Status s = target->Start(); !s.ok()) {
        hook_status = s;
        return;
      }
      active = true;
      current = {it->second, grid};
    } else if (active) {
      auto all = target->Stop();
      active = false;
      if (!all.ok()) {
        hook_status = all.status();
        return;
      }
      picker.Profiled(current.first, current.second);
    }
  }));
  absl::Status ran;
  for (size_t step = 0; step < picker.Steps() && !picker.Complete() && hook_status.ok(); ++step) {
    picker.BeginStep(step);
    ExtraStepObserver obs(this);
    ran = run(1, &obs);
    if (!ran.ok()) break;
  }
  MEDPROF_RETURN_IF_ERROR(callbacks->SetLaunchHook(nullptr));
  if (!ran.ok()) return absl::AbortedError(ran.message());
  MEDPROF_RETURN_IF_ERROR(hook_status);
  size_t dropped = 0;
  MEDPROF_ASSIGN_OR_RETURN(std::vector<RangeValues> ranges, target->Decode(&dropped));
  if (dropped > 0) metrics_notes_.push_back(absl::StrCat(dropped, " kernel ranges dropped by CUPTI"));
  const auto& order = picker.Order();
  if (ranges.size() < order.size()) {
    metrics_notes_.push_back(absl::StrCat("CUPTI decoded ", ranges.size(), " of ", order.size(),
                                          " profiled launches; the rest are missing"));
  }
  size_t profiled = 0;
  for (const std::string& t : targets) {
    auto it = picker.RangesOf().find(t);
    std::vector<std::map<std::string, double>> values;
    if (it != picker.RangesOf().end()) {
      for (size_t r : it->second) {
        if (r >= ranges.size()) continue;
        StoreRangeValues(metrics, ranges[r].values, &values.emplace_back());
      }
    }
    if (values.empty()) {
      metrics_notes_.push_back(absl::StrCat("kernel not launched in the metrics steps: ", t));
      continue;
    }
    ++profiled;
    if (values.size() < launches) {
      metrics_notes_.push_back(absl::StrCat(values.size(), " of ", launches, " launches profiled (", label, "): ", t));
    }
    std::map<std::string, double>& out = kernel_metrics_[t];
    const LaunchPicker::Grid& grid = order[it->second.front()].second;
    out["launch.grid_x"] = grid[0];
    out["launch.grid_y"] = grid[1];
    out["launch.grid_z"] = grid[2];
    std::map<std::string, double> combined = MedianOfLaunches(values);
    // launch.samples describes the core counters (the session with the duration); the other
    // sessions leave it as it is.
    if (!combined.count("duration_ns")) combined.erase("launch.samples");
    if (auto spread = combined.find("launch.duration_spread_pct"); spread != combined.end()) {
      // Each replayed launch's duration: in the log whenever they differ by more than 5 %.
      const std::string each = absl::StrJoin(values, " / ", [](std::string* o, const std::map<std::string, double>& v) {
        auto d = v.find("duration_ns");
        o->append(d == v.end() ? "-" : absl::StrFormat("%.1f", d->second / 1e3));
      });
      if (spread->second > 5.0) {
        kLog.Info("metrics layer: {}: replayed durations {} us, spread {:.1f} %, median kept", t, each, spread->second);
      } else {
        kLog.Debug("metrics layer: {}: replayed durations {} us", t, each);
      }
    }
    for (const auto& [name, v] : combined) out[name] = v;
  }
  kLog.Info("metrics layer ({}): {} of {} kernels profiled ({} metrics, up to {} launches each)", label, profiled,
            targets.size(), metrics.size(), launches);
  return absl::OkStatus();
}

absl::Status CuptiProfiler::ProfilePhases(const StepRunner& run, const CounterSessionOptions& base,
                                          const ResolvedCatalog& catalog) {
  const std::vector<ResolvedMetric> metrics = catalog.InGroups({MetricGroup::kCore});
  CounterSessionOptions o = base;
  o.metrics = catalog.PerfworksNames({MetricGroup::kCore});
  o.range = CUPTI_UserRange;
  o.replay = CUPTI_UserReplay;
  o.max_ranges = 8;  // fwd, bwd, optim, sample_step (+ room)
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<CounterSession> target, NewCounterSession(counter_api_, o));
  const size_t passes = target->passes();
  kLog.Info("metrics layer ({}): phase ranges, {} metrics in {} passes (one step each)",
            CounterApiName(counter_api_), metrics.size(), passes);
  const std::set<std::string> phases = {"fwd", "bwd", "optim", "sample_step"};
  absl::Status range_status;
  const size_t max_passes = (passes > 0 ? passes : 64) + 2;
  bool all = false;
  for (size_t pass = 0; pass < max_passes && !all; ++pass) {
    std::set<std::string> seen;  // one range per phase per pass
    std::string open;
    ExtraStepObserver obs(this);
    obs.phase_begin = [&](std::string_view name) {
      const std::string n(name);
      if (!range_status.ok() || !open.empty() || !phases.count(n) || seen.count(n)) return;
      SynchronizeDevice("phase range begin");
      if (absl::Status s = target->PushRange(n.c_str()); !s.ok()) {
        range_status = s;
        return;
      }
      open = n;
      seen.insert(n);
    };
    obs.phase_end = [&](std::string_view name) {
      if (open.empty() || name != open) return;
      SynchronizeDevice("phase range end");
      if (absl::Status s = target->PopRange(); !s.ok()) range_status = s;
      open.clear();
    };
    MEDPROF_RETURN_IF_ERROR(target->Start());
    const absl::Status ran = run(1, &obs);
    if (!open.empty()) (void)target->PopRange();
    auto stopped = target->Stop();
    if (!ran.ok()) return absl::AbortedError(ran.message());
    MEDPROF_RETURN_IF_ERROR(range_status);
    MEDPROF_ASSIGN_OR_RETURN(all, stopped);
  }
  if (!all)
    return absl::InternalError(
        absl::StrCat("phase ranges: not every pass was submitted after ", max_passes, " steps"));
  size_t dropped = 0;
  MEDPROF_ASSIGN_OR_RETURN(std::vector<RangeValues> ranges, target->Decode(&dropped));
  if (dropped > 0) metrics_notes_.push_back(absl::StrCat(dropped, " phase ranges dropped by CUPTI"));
  for (const RangeValues& r : ranges) {
    std::map<std::string, double>& out = phase_metrics_[r.name];
    StoreRangeValues(metrics, r.values, &out);
  }
  kLog.Info("metrics layer: {} phase ranges", phase_metrics_.size());
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
  // Metrics layer: per kernel, per phase, and time-weighted run averages of percentages.
  const std::map<std::string, NameTotals> totals = TotalsByName(agg);
  std::map<std::string, std::pair<double, double>> weighted;  // name -> (sum value*w, sum w)
  for (const auto& [kernel, values] : kernel_metrics_) {
    auto t = totals.find(kernel);
    const double w = t == totals.end() ? 0.0 : static_cast<double>(t->second.total_ns);
    for (const auto& [name, v] : values) {
      *out.add_values() = Row(absl::StrCat("kernel:", kernel), name, v, "");
      if (absl::EndsWith(name, "_pct")) {
        weighted[name].first += v * w;
        weighted[name].second += w;
      }
    }
  }
  for (const auto& [name, acc] : weighted) {
    if (acc.second > 0)
      *out.add_values() = Row("run", absl::StrCat(name, ".avg"), acc.first / acc.second, "%");
  }
  for (const auto& [phase, values] : phase_metrics_) {
    for (const auto& [name, v] : values) *out.add_values() = Row(absl::StrCat("phase:", phase), name, v, "");
  }
  if (options_.metrics) {
    *out.add_values() = Row("run", "metrics.wall_ms", static_cast<double>(metrics_wall_ms_), "ms");
    *out.add_values() =
        Row("run", "metrics.kernels_profiled", static_cast<double>(kernel_metrics_.size()), "kernels");
    for (const std::string& d : dropped_metrics_)
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

std::vector<v1::WorkerMessage> CuptiProfiler::Results() const {
  std::vector<v1::WorkerMessage> out;
  {
    v1::WorkerMessage m;
    *m.mutable_metrics() = DerivedMetrics();
    if (m.metrics().values_size() > 0) out.push_back(std::move(m));
  }
  {
    // Findings: every kernel with trace facts, plus counters where the metrics layer ran.
    const v1::KernelAggregates agg = kernels_->Snapshot();
    int64_t all_ns = 0;
    for (const v1::KernelStat& k : agg.kernels()) all_ns += k.total_ns();
    std::vector<KernelFacts> facts;
    const std::map<std::string, std::array<int32_t, 3>> grids = kernels_->DominantGrids();
    for (const auto& [name, t] : TotalsByName(agg)) {
      if (!IsDeviceKernel(name) || t.largest == nullptr || all_ns <= 0) continue;
      KernelFacts f;
      f.name = name;
      f.op = t.largest->op();
      f.phase = t.largest->phase();
      f.category = t.largest->category();
      f.share = static_cast<double>(t.total_ns) / static_cast<double>(all_ns);
      if (auto g = grids.find(name); g != grids.end()) {
        f.blocks = int64_t{std::max(1, g->second[0])} * std::max(1, g->second[1]) * std::max(1, g->second[2]);
      }
      f.theoretical_occupancy = t.largest->theoretical_occupancy();
      if (auto it = kernel_metrics_.find(name); it != kernel_metrics_.end()) f.metrics = it->second;
      facts.push_back(std::move(f));
    }
    FindingsOptions fo;
    fo.sm_count = options_.gpu.sm_count;
    std::vector<v1::KernelFinding> found = FindKernelFindings(facts, fo);
    if (!found.empty()) {
      v1::WorkerMessage m;
      for (v1::KernelFinding& f : found) *m.mutable_findings()->add_findings() = std::move(f);
      out.push_back(std::move(m));
    }
  }
  {
    // The raw timeline, in records of at most kTimelineChunk events: one upload request of the
    // agent stays far below gRPC's 16 MiB message limit, and the server merges the records.
    constexpr size_t kTimelineChunk = 20000;
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
