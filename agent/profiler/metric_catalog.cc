#include "agent/profiler/metric_catalog.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/roofline.h"

namespace medprof::profiler {

ResolvedCatalog ResolveCatalog(const std::vector<MetricEntry>& catalog, const std::string& chip,
                               const MetricValidity& valid) {
  ResolvedCatalog out;
  out.chip = chip;
  for (const MetricEntry& e : catalog) {
    std::vector<std::string> why;
    bool found = false;
    for (const std::string& cand : e.candidates) {
      const std::string reason = valid(cand);
      if (reason.empty()) {
        out.metrics.push_back(ResolvedMetric{e.name, e.unit, cand, e.group, e.percent});
        found = true;
        break;
      }
      why.push_back(absl::StrCat(cand, " (", reason, ")"));
    }
    if (!found) {
      out.dropped.push_back(DroppedMetric{
          e.name, absl::StrCat("no valid Perfworks metric on ", chip, ": ", absl::StrJoin(why, "; "))});
    }
  }
  return out;
}

std::vector<ResolvedMetric> ResolvedCatalog::InGroups(const std::vector<MetricGroup>& groups) const {
  std::vector<ResolvedMetric> out;
  for (const ResolvedMetric& m : metrics) {
    if (std::find(groups.begin(), groups.end(), m.group) != groups.end()) out.push_back(m);
  }
  return out;
}

std::vector<std::string> ResolvedCatalog::PerfworksNames(const std::vector<MetricGroup>& groups) const {
  std::vector<std::string> out;
  for (const ResolvedMetric& m : InGroups(groups)) out.push_back(m.perfworks);
  return out;
}

std::map<std::string, double> MedianOfLaunches(const std::vector<std::map<std::string, double>>& launches) {
  std::map<std::string, double> out;
  if (launches.empty()) return out;
  std::map<std::string, std::vector<double>> by_name;
  for (const auto& launch : launches) {
    for (const auto& [name, v] : launch) by_name[name].push_back(v);
  }
  for (auto& [name, v] : by_name) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    out[name] = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }
  out["launch.samples"] = static_cast<double>(launches.size());
  auto d = by_name.find("duration_ns");
  if (d != by_name.end() && d->second.size() >= 2 && out["duration_ns"] > 0) {
    out["launch.duration_spread_pct"] = (d->second.back() - d->second.front()) / out["duration_ns"] * 100.0;
  }
  DeriveFromParts(&out);
  return out;
}

const std::map<std::string, std::string>& DerivedMetricUnits() {
  static const std::map<std::string, std::string> kUnits = [] {
    std::map<std::string, std::string> u = roofline::DerivedWorkUnits();
    u["dram_bytes"] = "bytes";
    u["l2_hit_pct"] = "%";
    return u;
  }();
  return kUnits;
}

void DeriveFromParts(std::map<std::string, double>* values) {
  auto read = values->find("dram_bytes_read"), write = values->find("dram_bytes_write");
  if (read != values->end() && write != values->end()) (*values)["dram_bytes"] = read->second + write->second;
  roofline::DeriveWorkAndTraffic(values);
  auto hit = values->find("l2_sectors_hit"), sectors = values->find("l2_sectors");
  if (hit != values->end() && sectors != values->end() && !values->count("l2_hit_pct")) {
    (*values)["l2_hit_pct"] = sectors->second > 0 ? std::clamp(100.0 * hit->second / sectors->second, 0.0, 100.0) : 0.0;
  }
}

std::vector<ResolvedMetric> WithoutDerived(const std::vector<ResolvedMetric>& metrics) {
  const auto has = [&](std::string_view name) {
    return std::any_of(metrics.begin(), metrics.end(), [&](const ResolvedMetric& m) { return m.name == name; });
  };
  const bool l2_parts = has("l2_sectors_hit") && has("l2_sectors");
  std::vector<ResolvedMetric> out;
  for (const ResolvedMetric& m : metrics) {
    if (!(l2_parts && m.name == "l2_hit_pct")) out.push_back(m);
  }
  return out;
}

SinglePassPlan PackSinglePass(const std::vector<ResolvedMetric>& metrics, const PassCounter& passes) {
  auto one_pass = [&](const std::vector<ResolvedMetric>& group) {
    std::vector<std::string> names;
    for (const ResolvedMetric& m : group) names.push_back(m.perfworks);
    const absl::StatusOr<size_t> n = passes(names);
    return n.ok() && *n == 1;
  };
  SinglePassPlan plan;
  for (const ResolvedMetric& m : metrics) {
    if (!one_pass({m})) {
      plan.rest.push_back(m);
      continue;
    }
    bool placed = false;
    for (std::vector<ResolvedMetric>& group : plan.groups) {
      group.push_back(m);
      if (one_pass(group)) {
        placed = true;
        break;
      }
      group.pop_back();
    }
    if (!placed) plan.groups.push_back({m});
  }
  return plan;
}

bool CountsInstructionsOnly(const std::vector<ResolvedMetric>& metrics) {
  return !metrics.empty() && std::all_of(metrics.begin(), metrics.end(), [](const ResolvedMetric& m) {
    return m.unit == "inst" || m.unit == "thread inst";
  });
}

bool SanitizeMetricValue(const ResolvedMetric& m, double* value) {
  if (!std::isfinite(*value)) {
    *value = 0.0;
    return false;
  }
  if (m.percent) *value = std::clamp(*value, 0.0, 100.0);
  return true;
}

}  // namespace medprof::profiler
