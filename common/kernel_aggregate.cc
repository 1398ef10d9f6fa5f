#include "common/kernel_aggregate.h"

#include "common/fnv_hash.h"

#include <algorithm>
#include <cmath>
#include <cstdio>


namespace medprof::aggregate {

std::string SignatureId(std::string_view kernel, std::string_view op, std::string_view phase, std::string_view shapes,
                        const int32_t (&grid)[3], const int32_t (&block)[3], int32_t dynamic_shared_bytes) {
  FnvHasher h;
  for (std::string_view s : {kernel, op, phase, shapes}) {
    for (unsigned char c : s) h.Add(c);
    h.Add(0x100);  // field separator: "ab"+"c" differs from "a"+"bc"
  }
  for (int32_t v : grid) h.Add(static_cast<uint32_t>(v));
  for (int32_t v : block) h.Add(static_cast<uint32_t>(v));
  h.Add(static_cast<uint32_t>(dynamic_shared_bytes));
  char out[13];
  std::snprintf(out, sizeof(out), "%012llx", static_cast<unsigned long long>(h.hash() >> 16));
  return out;
}

bool IsCounterUnit(std::string_view unit, std::string_view perfworks) {
  constexpr std::string_view kSum = ".sum";
  if (unit.empty()) return perfworks.size() >= kSum.size() && perfworks.substr(perfworks.size() - kSum.size()) == kSum;
  if (unit.find('/') != std::string_view::npos || unit == "%") return false;
  return unit == "ns" || unit == "cycles" || unit == "cycle" || unit == "inst" || unit == "bytes" ||
         unit == "byte" || unit == "thread inst" || unit == "sector" || unit == "request" || unit == "warp" ||
         unit == "instruction" || unit == "transaction" || unit == "wavefront" || unit == "flop";
}

namespace {

struct Acc {
  double sum = 0;      // counters: Σ v·n; rates: Σ v·w
  double weight = 0;   // rates: Σ w
  double covered = 0;  // trace time per step of the signatures that have this metric
};

double Weight(const SignatureSample& s) {
  auto d = s.values.find("duration_ns");
  return d != s.values.end() && d->second > 0 ? d->second * s.launches_per_step : s.trace_ns_per_step;
}

}  // namespace

std::map<std::string, double> AggregateKernel(const std::vector<SignatureSample>& measured, double kernel_ns_per_step,
                                              const CounterPredicate& is_counter) {
  std::map<std::string, double> out;
  if (measured.empty() || kernel_ns_per_step <= 0) return out;
  double covered = 0, launches = 0, min_samples = INFINITY;
  std::map<std::string, Acc> acc;
  for (const SignatureSample& s : measured) {
    covered += s.trace_ns_per_step;
    launches += s.launches_per_step;
    const double w = Weight(s);
    for (const auto& [name, v] : s.values) {
      if (name == "launch.samples") min_samples = std::min(min_samples, v);
      if (name.rfind("launch.", 0) == 0 && name != "launch.duration_spread_pct") continue;
      Acc& a = acc[name];
      a.covered += s.trace_ns_per_step;
      if (is_counter(name)) {
        a.sum += v * s.launches_per_step;
      } else {
        a.sum += v * w;
        a.weight += w;
      }
    }
  }
  const double coverage = std::clamp(covered / kernel_ns_per_step, 0.0, 1.0);
  for (const auto& [name, a] : acc) {
    if (is_counter(name)) {
      // Extrapolated over the signatures that lack this metric too (a range CUPTI dropped).
      if (a.covered > 0) out[name] = a.sum * kernel_ns_per_step / a.covered;
    } else if (a.weight > 0) {
      out[name] = a.sum / a.weight;
    }
  }
  out["coverage_pct"] = 100.0 * coverage;
  out["signatures.profiled"] = static_cast<double>(measured.size());
  out["launches_per_step"] = launches;
  if (std::isfinite(min_samples)) out["launch.samples"] = min_samples;
  return out;
}

}  // namespace medprof::aggregate
