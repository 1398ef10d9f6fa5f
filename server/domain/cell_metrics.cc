#include "server/domain/cell_metrics.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "absl/strings/match.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::server {
namespace {

constexpr char kPhasePrefix[] = "phase:";
constexpr char kKernelPrefix[] = "kernel:";
constexpr char kStallPrefix[] = "stall.";
constexpr char kPcSampPrefix[] = "pcsamp.";

// Metric values of one scope.
using ScopeValues = std::unordered_map<std::string, double>;

std::optional<double> Get(const ScopeValues& v, const std::string& name) {
  auto it = v.find(name);
  if (it == v.end()) return std::nullopt;
  return it->second;
}

// Weighted mean accumulator.
struct Mean {
  double sum = 0;
  double weight = 0;
  void Add(double value, double w) {
    sum += value * w;
    weight += w;
  }
  std::optional<double> Value() const {
    if (weight <= 0) return std::nullopt;
    return sum / weight;
  }
};

// The roofline over the kernel aggregates (per step, with coverage_pct) placed against `roofs`.
std::optional<roofline::Summary> KernelRoofline(const std::map<std::string, ScopeValues>& kernel_scopes,
                                                const roofline::Roofs& roofs) {
  if (roofs.empty()) return std::nullopt;
  std::vector<roofline::Point> points;
  for (const auto& [name, values] : kernel_scopes) {
    if (!values.count("coverage_pct")) continue;
    auto p = roofline::Locate(std::map<std::string, double>(values.begin(), values.end()), roofs);
    if (p.ok() && p->bound != roofline::Bound::kUnknown) points.push_back(*std::move(p));
  }
  const roofline::Summary s = roofline::Summarize(points);
  if (s.duration_ns <= 0) return std::nullopt;
  return s;
}

// Stall shares from PC sampling when the counters gave none: per-kernel shares, weighted by the
// kernel's traced time; a reason a kernel has no samples of counts 0 for it.
std::map<std::string, double> SampledStalls(
    const std::map<std::string, ScopeValues>& kernel_scopes,
    const std::unordered_map<std::string, std::pair<int64_t, int64_t>>& traced) {
  std::vector<std::pair<double, std::map<std::string, double>>> per_kernel;
  std::set<std::string> reasons;
  for (const auto& [name, values] : kernel_scopes) {
    auto it = traced.find(name);
    const double w = it != traced.end() && it->second.second > 0 ? static_cast<double>(it->second.second) : 1.0;
    std::map<std::string, double> shares;
    for (const auto& [metric, v] : values) {
      if (absl::StartsWith(metric, kPcSampPrefix) && metric != "pcsamp.samples" && metric != "pcsamp.dropped") {
        shares[metric.substr(sizeof(kPcSampPrefix) - 1)] = v;
        reasons.insert(metric.substr(sizeof(kPcSampPrefix) - 1));
      }
    }
    if (!shares.empty()) per_kernel.emplace_back(w, std::move(shares));
  }
  std::map<std::string, Mean> sampled;
  for (const auto& [w, shares] : per_kernel) {
    for (const std::string& r : reasons) {
      auto it = shares.find(r);
      sampled[r].Add(it == shares.end() ? 0.0 : it->second, w);
    }
  }
  std::map<std::string, double> out;
  for (const auto& [reason, mean] : sampled) {
    if (auto v = mean.Value()) out[reason] = *v;
  }
  return out;
}

}  // namespace

std::vector<std::string> PhaseScopes(int phase) {
  switch (phase) {
    case v1::PHASE_FORWARD: return {"fwd", "forward"};
    case v1::PHASE_SAMPLE: return {"sample_step", "sample"};
    case v1::PHASE_TRAIN:
    default: return {"fwd", "bwd", "optim", "train"};
  }
}

RunMetrics ExtractRunMetrics(const std::vector<MetricRow>& metrics, const std::vector<KernelRow>& kernels, int phase,
                             int steps, const roofline::Roofs& roofs) {
  RunMetrics out;
  if (steps < 1) steps = 1;
  const std::vector<std::string> wanted = PhaseScopes(phase);
  std::map<std::string, ScopeValues> phase_scopes;   // phase name -> values
  std::map<std::string, ScopeValues> kernel_scopes;  // kernel name -> values
  for (const MetricRow& m : metrics) {
    if (absl::StartsWith(m.scope, kPhasePrefix)) {
      const std::string p = m.scope.substr(sizeof(kPhasePrefix) - 1);
      if (std::find(wanted.begin(), wanted.end(), p) != wanted.end()) phase_scopes[p][m.name] = m.value;
    } else if (absl::StartsWith(m.scope, kKernelPrefix)) {
      kernel_scopes[m.scope.substr(sizeof(kKernelPrefix) - 1)][m.name] = m.value;
    }
  }

  // Per kernel name: traced launches and time over the measured steps.
  std::unordered_map<std::string, std::pair<int64_t, int64_t>> traced;  // name -> (count, total_ns)
  for (const KernelRow& k : kernels) {
    auto& t = traced[k.name];
    t.first += k.count;
    t.second += k.total_ns;
  }

  // Scopes with their counter scale (to one step) and time weight.
  struct Scope {
    const ScopeValues* values;
    double per_step;  // multiply a counter by this to get its per-step contribution
    double weight;    // weight of its percentages
  };
  std::vector<Scope> scopes;
  bool uses_phase = false;
  for (const auto& [name, values] : phase_scopes) {
    bool has_core = false;
    for (const auto& [metric, v] : values) {
      if (!absl::StartsWith(metric, "share.") && metric != "gpu_time_ns") has_core = true;
    }
    if (!has_core) continue;  // only derived rows (shares, gpu time): no counters here
    const double w = Get(values, "duration_ns").value_or(1.0);
    scopes.push_back(Scope{&values, 1.0 / steps, w > 0 ? w : 1.0});
    uses_phase = true;
  }
  if (!uses_phase) {
    for (const auto& [name, values] : kernel_scopes) {
      auto it = traced.find(name);
      double per_step = 1.0;
      double weight = Get(values, "duration_ns").value_or(1.0);
      if (it != traced.end() && it->second.first > 0) {
        // An aggregate (it has coverage_pct) is per step already; an older run's row is one launch.
        if (!Get(values, "coverage_pct").has_value()) per_step = static_cast<double>(it->second.first) / steps;
        weight = static_cast<double>(it->second.second);
      }
      scopes.push_back(Scope{&values, per_step, weight > 0 ? weight : 1.0});
    }
  }

  double sm_cycles = 0, warp_inst = 0;
  bool have_cycles = false, have_inst = false;
  std::map<std::string, Mean> percent;
  std::map<std::string, Mean> stalls;
  for (const Scope& s : scopes) {
    if (auto v = Get(*s.values, "sm_cycles")) {
      sm_cycles += *v * s.per_step;
      have_cycles = true;
    }
    if (auto v = Get(*s.values, "warp_instructions")) {
      warp_inst += *v * s.per_step;
      have_inst = true;
    }
    for (const char* name : kCellPercentMetrics) {
      if (auto v = Get(*s.values, name)) percent[name].Add(std::clamp(*v, 0.0, 100.0), s.weight);
    }
    const std::optional<double> cpi = Get(*s.values, "cpi");
    if (cpi.has_value() && *cpi > 0) {
      for (const auto& [metric, v] : *s.values) {
        if (absl::StartsWith(metric, kStallPrefix)) {
          stalls[metric.substr(sizeof(kStallPrefix) - 1)].Add(v / *cpi, s.weight);
        }
      }
    }
  }
  if (have_cycles) out.sm_cycles = sm_cycles;
  if (have_inst) out.warp_instructions = warp_inst;
  for (const auto& [name, mean] : percent) {
    if (auto v = mean.Value()) out.percent[name] = *v;
  }
  if (!stalls.empty()) {
    out.stall_source = "metrics";
    for (const auto& [reason, mean] : stalls) {
      if (auto v = mean.Value()) out.stalls[reason] = *v;
    }
  } else {
    std::map<std::string, double> sampled = SampledStalls(kernel_scopes, traced);
    if (!sampled.empty()) {
      out.stall_source = "pc_sampling";
      out.stalls = std::move(sampled);
    }
  }
  out.roofline = KernelRoofline(kernel_scopes, roofs);
  out.any = have_cycles || have_inst || !out.percent.empty() || !out.stalls.empty() || out.roofline.has_value();
  if (out.any && !scopes.empty()) out.source = uses_phase ? "phase" : "kernels";
  return out;
}

}  // namespace medprof::server
