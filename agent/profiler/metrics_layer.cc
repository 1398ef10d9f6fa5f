#include "agent/profiler/metrics_layer.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/profiler/cupti_host.h"
#include "agent/profiler/extra_step_observer.h"
#include "agent/profiler/launch_picker.h"
#include "agent/profiler/range_profiler.h"
#include "common/clock.h"
#include "common/kernel_aggregate.h"
#include "common/logging.h"
#include "common/status.h"

namespace medprof::profiler {
namespace {

const Logger kLog("profiler");

// One range's values under their medprof names (sanitized; a non-finite value is left out), plus
// what DeriveFromParts makes of them.
void StoreRangeValues(const std::vector<ResolvedMetric>& metrics, const std::vector<double>& values,
                      std::map<std::string, double>* out) {
  for (size_t i = 0; i < metrics.size() && i < values.size(); ++i) {
    double v = values[i];
    if (SanitizeMetricValue(metrics[i], &v)) (*out)[metrics[i].name] = v;
  }
  DeriveFromParts(out);
}

CounterApi ChooseApi(CounterApiChoice choice, const std::string& compute_capability) {
  if (choice == CounterApiChoice::kLegacy) return CounterApi::kLegacy;
  if (choice == CounterApiChoice::kRange) return CounterApi::kRangeProfiler;
  int major = 0, minor = 0;
  (void)std::sscanf(compute_capability.c_str(), "%d.%d", &major, &minor);
  return DefaultCounterApi(major, minor);
}

// Each replayed launch's duration in the log, at info level when they spread by more than 5 %.
void LogSpread(const std::string& what, const std::vector<std::map<std::string, double>>& values,
               double spread) {
  const std::string each =
      absl::StrJoin(values, " / ", [](std::string* o, const std::map<std::string, double>& v) {
        auto d = v.find("duration_ns");
        o->append(d == v.end() ? "-" : absl::StrFormat("%.1f", d->second / 1e3));
      });
  if (spread > 5.0) {
    kLog.Info("metrics layer: {}: replayed durations {} us, spread {:.1f} %, median kept", what, each,
              spread);
  } else {
    kLog.Debug("metrics layer: {}: replayed durations {} us", what, each);
  }
}

}  // namespace

MetricsLayer::MetricsLayer(const GpuInfo& gpu, const MetricsRequest& request, Hooks hooks)
    : gpu_(gpu), request_(request), hooks_(std::move(hooks)) {}

absl::Status MetricsLayer::Run(const StepRunner& run, const ProgressFn& progress,
                               const v1::KernelSignatures& signatures) {
  if (!request_.enabled) return absl::OkStatus();
  const int64_t begin = MonotonicNs();
  status_ = Measure(run, progress, signatures);
  wall_ms_ = (MonotonicNs() - begin) / 1'000'000;
  if (status_.code() == absl::StatusCode::kAborted) return status_;  // the workload failed
  if (!status_.ok()) kLog.Warn("metrics layer: {}", status_.ToString());
  return absl::OkStatus();
}

absl::Status MetricsLayer::Measure(const StepRunner& run, const ProgressFn& progress,
                                   const v1::KernelSignatures& signatures) {
  api_ = ChooseApi(request_.counter_api, gpu_.compute_capability);
  notes_.push_back(absl::StrCat("counter API: ", CounterApiName(api_)));
  one_pass_only_ = api_ == CounterApi::kLegacy &&
                   std::any_of(signatures.signatures().begin(), signatures.signatures().end(),
                               [](const v1::KernelSignature& s) { return s.phase() == "bwd"; });
  if (api_ == CounterApi::kLegacy) {
    notes_.push_back(
        "the legacy Profiling API path is validated against the range profiler on Hopper (H200), "
        "not on a V100");
  } else {
    MEDPROF_RETURN_IF_ERROR(DeviceSupported(gpu_.index, CUPTI_PROFILER_RANGE_PROFILING));
  }
  Session session;
  MEDPROF_ASSIGN_OR_RETURN(session.base.ctx, CurrentContext());
  MEDPROF_ASSIGN_OR_RETURN(session.base.chip, ChipName(gpu_.index));
  MEDPROF_ASSIGN_OR_RETURN(session.base.availability, CounterAvailability(session.base.ctx));
  MEDPROF_ASSIGN_OR_RETURN(
      std::unique_ptr<CuptiHost> host,
      CuptiHost::Create(CUPTI_PROFILER_TYPE_RANGE_PROFILER, session.base.chip, session.base.availability));
  const ResolvedCatalog cat = ResolveCatalog(MetricCatalog(), session.base.chip,
                                             [&](const std::string& m) { return host->Validity(m); });
  for (const DroppedMetric& d : cat.dropped) {
    dropped_.push_back(d.name);
    notes_.push_back(absl::StrCat("dropped ", d.name, ": ", d.reason));
  }
  const std::vector<KernelTarget> kernels = CoreChoice(signatures);
  const std::vector<KernelTarget> work_kernels = WorkChoice(signatures);
  const std::vector<KernelTarget> detail_kernels = DetailChoice(signatures);
  Session work = session, detail = session;
  AddTargets(kernels, &session);
  AddTargets(work_kernels, &work);
  AddTargets(detail_kernels, &detail);
  progress("metrics", 0, 2,
           absl::StrCat("metrics layer: ", kernels.size(), " kernels, ", session.targets.size(), " signatures (",
                        work.targets.size(), " for the work counters, ", detail.targets.size(), " in detail) on ",
                        session.base.chip, " (", CounterApiName(api_), ")"));
  if (!session.targets.empty()) {
    MEDPROF_RETURN_IF_ERROR(ProfileSignatures(run, session, work, detail, cat, host.get()));
    Aggregate(signatures, {kernels, work_kernels, detail_kernels}, cat);
  }
  progress("metrics", 1, 2, "metrics layer: phase ranges");
  MEDPROF_RETURN_IF_ERROR(ProfilePhases(run, session.base, cat.InGroups({MetricGroup::kCore}), "core"));
  MEDPROF_RETURN_IF_ERROR(OptionalSession(ProfilePhases(run, session.base, cat.InGroups({MetricGroup::kWork}), "work"),
                                   "phase ranges, the roofline's work counters"));
  progress("metrics", 2, 2,
           absl::StrCat("metrics layer: ", kernel_metrics_.size(), " kernels (", signature_metrics_.size(),
                        " signatures), ", phase_metrics_.size(), " phases"));
  return absl::OkStatus();
}

std::vector<KernelTarget> MetricsLayer::CoreChoice(const v1::KernelSignatures& signatures) const {
  return ChooseSignatures(signatures, request_.top_k, request_.coverage_pct / 100.0, request_.max_signatures);
}

std::vector<KernelTarget> MetricsLayer::WorkChoice(const v1::KernelSignatures& signatures) const {
  return ChooseSignatures(signatures, request_.top_k, 1.0, request_.max_signatures);
}

std::vector<KernelTarget> MetricsLayer::DetailChoice(const v1::KernelSignatures& signatures) const {
  return ChooseSignatures(signatures, request_.top_k, std::min(request_.coverage_pct, kDetailCoveragePct) / 100.0,
                          std::min(request_.max_signatures, kDetailMaxSignatures));
}

void MetricsLayer::AddTargets(const std::vector<KernelTarget>& kernels, Session* session) {
  for (const KernelTarget& k : kernels) {
    for (const v1::KernelSignature* s : k.chosen) {
      session->targets.push_back(ToLaunchSignature(*s));
      session->ids.push_back(s->id());
    }
  }
}

absl::Status MetricsLayer::ProfileSignatures(const StepRunner& run, const Session& session, const Session& work,
                                             const Session& detail, const ResolvedCatalog& cat, CuptiHost* host) {
  const size_t launches = static_cast<size_t>(std::max(1, request_.launches));
  const std::vector<ResolvedMetric> core = WithoutDerived(cat.InGroups({MetricGroup::kCore}));
  MEDPROF_RETURN_IF_ERROR(ProfileOnePassFirst(run, session, core, "core", launches, host));
  // The roofline's work and traffic on the work tier's signatures: a signature's launches run the
  // same instructions on the same inputs, so one launch each (the bytes, which depend on the cache
  // state, measured in place like the core set). The counters that need kernel replay (2 passes
  // even alone on GH100) too: a FLOP or byte count missing from a signature is a value the
  // roofline lacks, and they cost one replayed range per signature.
  MEDPROF_RETURN_IF_ERROR(OptionalSession(
      ProfileOnePassFirst(run, work, cat.InGroups({MetricGroup::kWork}), "work", 1, host),
      "signatures, the roofline's work counters"));
  // Stalls, throughputs and the SASS mix: ratios and counts of one launch (16 passes on GH100), on
  // the detail tier's signatures.
  MEDPROF_RETURN_IF_ERROR(ProfileKernels(
      run, detail, cat.InGroups({MetricGroup::kStalls, MetricGroup::kThroughput, MetricGroup::kSass}),
      "stalls, throughput, sass", 1));
  // DRAM bytes, the L2 hit rate and the FLOPs from the stored medians of their parts, whichever
  // sessions they came from.
  for (auto& [id, values] : signature_metrics_) DeriveFromParts(&values);
  return absl::OkStatus();
}

absl::Status MetricsLayer::ProfileOnePassFirst(const StepRunner& run, const Session& session,
                                               const std::vector<ResolvedMetric>& metrics, const std::string& label,
                                               size_t launches, CuptiHost* host) {
  const SinglePassPlan plan =
      PackSinglePass(metrics, [&](const std::vector<std::string>& perfworks) -> absl::StatusOr<size_t> {
        MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<CuptiHost::Config> config, host->NewConfig(perfworks));
        return config->passes();
      });
  kLog.Info("metrics layer: {} counters in {} one-pass sessions, {} replayed; {} signatures", label,
            plan.groups.size(), plan.rest.size(), session.targets.size());
  std::vector<ResolvedMetric> replayed = plan.rest;
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    const std::string pass = absl::StrCat(label, ", one pass ", g + 1, "/", plan.groups.size());
    const size_t n = CountsInstructionsOnly(plan.groups[g]) ? 1 : launches;  // the same on every launch
    const absl::Status s = ProfileKernels(run, session, plan.groups[g], pass, n, 1);
    if (s.code() == absl::StatusCode::kResourceExhausted) {  // the device disagrees with the host's count
      kLog.Warn("metrics layer: {}; these metrics are replayed instead", std::string(s.message()));
      replayed.insert(replayed.end(), plan.groups[g].begin(), plan.groups[g].end());
      continue;
    }
    MEDPROF_RETURN_IF_ERROR(s);
  }
  return ProfileKernels(run, session, replayed, absl::StrCat(label, ", replayed"), launches);
}

absl::Status MetricsLayer::ProfileKernels(const StepRunner& run, const Session& session,
                                          const std::vector<ResolvedMetric>& metrics,
                                          const std::string& label, size_t launches, size_t max_passes) {
  if (metrics.empty()) return absl::OkStatus();  // none valid on this chip (recorded as dropped)
  CounterSessionOptions o = session.base;
  for (const ResolvedMetric& m : metrics) o.metrics.push_back(m.perfworks);
  o.range = CUPTI_AutoRange;
  o.replay = CUPTI_KernelReplay;
  o.max_ranges = session.targets.size() * launches;
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<CounterSession> target, NewCounterSession(api_, o));
  if (max_passes > 0 && target->passes() > max_passes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(metrics.size(), " metrics need ", target->passes(), " passes, more than ", max_passes));
  }
  if (one_pass_only_ && target->passes() > 1) {
    notes_.push_back(absl::StrCat(
        label, ": not measured (", metrics.size(), " metrics in ", target->passes(),
        " passes per launch): the legacy Profiling API's kernel replay does not finish on a train step "
        "(seen on Hopper); its one-pass sessions are measured"));
    return absl::OkStatus();
  }
  kLog.Info(
      "metrics layer ({}, {}): {} metrics in {} passes per launch (kernel replay), {} signatures x {} "
      "launches",
      CounterApiName(api_), label, metrics.size(), target->passes(), session.targets.size(), launches);
  LaunchPicker picker(session.targets, launches);
  MEDPROF_RETURN_IF_ERROR(RunPicker(run, target.get(), &picker));
  size_t dropped = 0;
  MEDPROF_ASSIGN_OR_RETURN(std::vector<RangeValues> ranges, target->Decode(&dropped));
  if (dropped > 0) notes_.push_back(absl::StrCat(dropped, " kernel ranges dropped by CUPTI (", label, ")"));
  if (ranges.size() < picker.ranges()) {
    notes_.push_back(absl::StrCat("CUPTI decoded ", ranges.size(), " of ", picker.ranges(),
                                  " profiled launches (", label, "); the rest are missing"));
  }
  StoreMedians(session, picker, metrics, ranges, label);
  return absl::OkStatus();
}

// Profiles, in up to picker->Steps() extra steps, the launches the picker wants: range Start at a
// wanted launch's API enter, Stop at the same launch's exit.
absl::Status MetricsLayer::RunPicker(const StepRunner& run, CounterSession* target, LaunchPicker* picker) {
  absl::Status hook_status;
  uint32_t active = 0;  // correlation id of the launch being profiled (0: none)
  LaunchSignature current;
  const auto wanted = [picker](const std::string& kernel) { return picker->WantsKernel(kernel); };
  MEDPROF_ASSIGN_OR_RETURN(CuptiCallbacks * callbacks, CuptiCallbacks::Install());
  MEDPROF_RETURN_IF_ERROR(callbacks->SetLaunchHook([&](const LaunchEvent& e) {
    if (!hook_status.ok() || e.symbol == nullptr) return;
    if (e.enter) {
      LaunchSignature s;
      if (active != 0 || !hooks_.resolve(e, wanted, &s) || !picker->Want(s)) return;
      kLog.Debug("metrics layer: profiling {} (correlation {}) on thread {}", s.kernel, e.correlation_id,
                 static_cast<long>(syscall(SYS_gettid)));
      hook_status = target->Start();
      if (!hook_status.ok()) return;
      active = e.correlation_id == 0 ? 1 : e.correlation_id;
      current = std::move(s);
    } else if (active != 0 && (e.correlation_id == active || e.correlation_id == 0)) {
      auto all = target->Stop();
      kLog.Debug("metrics layer: profiled correlation {}", active);
      active = 0;
      if (!all.ok()) {
        hook_status = all.status();
        return;
      }
      picker->Profiled(current);
    }
  }));
  absl::Status ran;
  for (size_t step = 0; step < picker->Steps() && !picker->Complete() && hook_status.ok(); ++step) {
    picker->BeginStep();
    ExtraStepObserver obs(hooks_.observer);
    ran = run(1, &obs);
    if (!ran.ok()) break;
  }
  MEDPROF_RETURN_IF_ERROR(callbacks->SetLaunchHook(nullptr));
  if (!ran.ok()) return absl::AbortedError(ran.message());
  return hook_status;
}

void MetricsLayer::StoreMedians(const Session& session, const LaunchPicker& picker,
                                const std::vector<ResolvedMetric>& metrics,
                                const std::vector<RangeValues>& ranges, const std::string& label) {
  size_t missing = 0, short_of = 0;
  for (size_t t = 0; t < session.targets.size(); ++t) {
    std::vector<std::map<std::string, double>> values;
    for (size_t r : picker.RangesOf()[t]) {
      if (r < ranges.size()) StoreRangeValues(metrics, ranges[r].values, &values.emplace_back());
    }
    if (values.empty()) {
      ++missing;
      continue;
    }
    if (values.size() < picker.launches()) ++short_of;
    std::map<std::string, double> combined = MedianOfLaunches(values);
    // launch.samples describes the core counters (the session with the duration); other sessions
    // leave it as it is.
    if (!combined.count("duration_ns")) combined.erase("launch.samples");
    if (auto spread = combined.find("launch.duration_spread_pct"); spread != combined.end()) {
      LogSpread(absl::StrCat(session.targets[t].kernel, " [", session.ids[t], "]"), values, spread->second);
    }
    Values& out = signature_metrics_[session.ids[t]];
    for (const auto& [name, v] : combined) out[name] = v;
  }
  if (missing > 0) {
    notes_.push_back(absl::StrCat(missing, " of ", session.targets.size(),
                                  " signatures not launched in the metrics steps (", label, ")"));
  }
  if (short_of > 0) {
    notes_.push_back(
        absl::StrCat(short_of, " signatures with fewer than ", picker.launches(), " launches (", label, ")"));
  }
  kLog.Info("metrics layer ({}): {} of {} signatures profiled ({} metrics)", label,
            session.targets.size() - missing, session.targets.size(), metrics.size());
}

namespace {

// Kernel -> how many of a tier's chosen signatures were measured and their trace time.
struct TierShare {
  int64_t ns = 0;
  int measured = 0;
};
std::map<std::string, TierShare> TierShares(const std::vector<KernelTarget>& tier,
                                            const std::map<std::string, MetricsLayer::Values>& measured) {
  std::map<std::string, TierShare> out;
  for (const KernelTarget& k : tier) {
    for (const v1::KernelSignature* s : k.chosen) {
      if (!measured.count(s->id())) continue;
      out[k.kernel].ns += s->total_ns();
      ++out[k.kernel].measured;
    }
  }
  return out;
}

}  // namespace

void MetricsLayer::Aggregate(const v1::KernelSignatures& signatures, const Tiers& tiers,
                             const ResolvedCatalog& catalog) {
  std::map<std::string, std::string> units = DerivedMetricUnits();
  for (const ResolvedMetric& m : catalog.metrics) units[m.name] = m.unit;
  const auto is_counter = [&units](const std::string& name) {
    auto u = units.find(name);
    return u != units.end() && aggregate::IsCounterUnit(u->second);
  };
  const double steps = std::max(1, signatures.steps());
  const auto core = TierShares(tiers.core, signature_metrics_), work = TierShares(tiers.work, signature_metrics_),
             detail = TierShares(tiers.detail, signature_metrics_);
  for (const KernelTarget& k : tiers.work) {
    std::vector<aggregate::SignatureSample> samples;
    for (const v1::KernelSignature* s : k.chosen) {
      auto it = signature_metrics_.find(s->id());
      if (it == signature_metrics_.end()) continue;
      samples.push_back({it->second, s->count() / steps, s->total_ns() / steps});
    }
    Values out = aggregate::AggregateKernel(samples, k.total_ns / steps, is_counter);
    if (out.empty() || k.total_ns <= 0) continue;
    const auto pct = [&k](const std::map<std::string, TierShare>& tier) {
      auto it = tier.find(k.kernel);
      return it == tier.end() ? 0.0 : 100.0 * static_cast<double>(it->second.ns) / k.total_ns;
    };
    out["coverage_pct"] = pct(core);
    out["coverage.work_pct"] = pct(work);
    out["coverage.detail_pct"] = pct(detail);
    const auto it = core.find(k.kernel);
    out["signatures.profiled"] = it == core.end() ? 0 : it->second.measured;
    out["signatures.total"] = k.signatures;
    const v1::KernelSignature& top = *k.chosen.front();
    for (int i = 0; i < 3 && i < top.grid_size(); ++i)
      out[std::string("launch.grid_") + "xyz"[i]] = top.grid(i);
    kernel_metrics_[k.kernel] = std::move(out);
  }
}

absl::Status MetricsLayer::OptionalSession(const absl::Status& s, const std::string& what) {
  if (s.ok() || s.code() == absl::StatusCode::kAborted) return s;  // aborted: the workload failed
  kLog.Warn("metrics layer: {} not measured: {}", what, s.ToString());
  notes_.push_back(absl::StrCat(what, " not measured: ", s.message()));
  return absl::OkStatus();
}

absl::Status MetricsLayer::ProfilePhases(const StepRunner& run, const CounterSessionOptions& base,
                                         const std::vector<ResolvedMetric>& metrics, const std::string& label) {
  if (metrics.empty()) return absl::OkStatus();  // none valid on this chip (recorded as dropped)
  CounterSessionOptions o = base;
  for (const ResolvedMetric& m : metrics) o.metrics.push_back(m.perfworks);
  o.range = CUPTI_UserRange;
  o.replay = CUPTI_UserReplay;
  o.max_ranges = 8;  // fwd, bwd, optim, sample_step (+ room)
  MEDPROF_ASSIGN_OR_RETURN(std::unique_ptr<CounterSession> target, NewCounterSession(api_, o));
  const size_t passes = target->passes();
  kLog.Info("metrics layer ({}, {}): phase ranges, {} metrics in {} passes (one step each)", CounterApiName(api_),
            label, metrics.size(), passes);
  const std::set<std::string> phases = {"fwd", "bwd", "optim", "sample_step"};
  absl::Status range_status;
  const size_t max_passes = (passes > 0 ? passes : 64) + 2;
  bool all = false;
  for (size_t pass = 0; pass < max_passes && !all; ++pass) {
    std::set<std::string> seen;  // one range per phase per pass
    std::string open;
    ExtraStepObserver obs(hooks_.observer);
    obs.phase_begin = [&](std::string_view name) {
      const std::string n(name);
      if (!range_status.ok() || !open.empty() || !phases.count(n) || seen.count(n)) return;
      hooks_.synchronize("phase range begin");
      range_status = target->PushRange(n.c_str());
      if (!range_status.ok()) return;
      open = n;
      seen.insert(n);
    };
    obs.phase_end = [&](std::string_view name) {
      if (open.empty() || name != open) return;
      hooks_.synchronize("phase range end");
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
  if (!all) {
    return absl::InternalError(
        absl::StrCat("phase ranges: not every pass was submitted after ", max_passes, " steps"));
  }
  size_t dropped = 0;
  MEDPROF_ASSIGN_OR_RETURN(std::vector<RangeValues> ranges, target->Decode(&dropped));
  if (dropped > 0) notes_.push_back(absl::StrCat(dropped, " phase ranges dropped by CUPTI (", label, ")"));
  for (const RangeValues& r : ranges) StoreRangeValues(metrics, r.values, &phase_metrics_[r.name]);
  kLog.Info("metrics layer: {} phase ranges", phase_metrics_.size());
  return absl::OkStatus();
}

}  // namespace medprof::profiler
