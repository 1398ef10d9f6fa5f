#include "common/roofline.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace medprof::roofline {
namespace {

double ValueOr0(const std::map<std::string, double>& values, const std::string& name) {
  auto it = values.find(name);
  return it != values.end() && it->second > 0 ? it->second : 0;
}

bool IsLevel(std::string_view name) {
  return std::find(std::begin(kLevels), std::end(kLevels), name) != std::end(kLevels);
}

// Fills the work and traffic of `p` from `values`.
void ReadCounters(const std::map<std::string, double>& values, Point* p) {
  for (std::string_view cls : kFlopClasses) {
    const std::string name = "flops." + std::string(cls);
    if (!values.count(name)) continue;
    const double f = ValueOr0(values, name);
    p->flops_by_class[std::string(cls)] = f;
    p->flops += f;
  }
  for (std::string_view level : kLevels) {
    const std::string name = "bytes." + std::string(level);
    if (!values.count(name)) continue;
    const double b = ValueOr0(values, name);
    p->bytes[std::string(level)] = b;
    p->bytes_per_s[std::string(level)] = b / (p->duration_ns * 1e-9);
    if (b > 0) p->intensity[std::string(level)] = p->flops / b;
  }
  p->flop_per_s = p->flops / (p->duration_ns * 1e-9);
}

constexpr double kL1BytesPerWritebackCycle = 128;  // Nsight Compute's L1 roofline factor
constexpr double kL2BytesPerXbarCycle = 32;        // Nsight Compute's L2 roofline factor

// flops.<cls> = add + mul + 2 * fma from the SASS counts sass.<p>add, sass.<p>mul, sass.<p>fma.
void DeriveFlops(const char* cls, const char* p, std::map<std::string, double>* values) {
  auto add = values->find(absl::StrCat("sass.", p, "add")), mul = values->find(absl::StrCat("sass.", p, "mul")),
       fma = values->find(absl::StrCat("sass.", p, "fma"));
  if (add == values->end() || mul == values->end() || fma == values->end()) return;
  (*values)[absl::StrCat("flops.", cls)] = add->second + mul->second + 2 * fma->second;
}

}  // namespace

void DeriveWorkAndTraffic(std::map<std::string, double>* values) {
  auto read = values->find("dram_bytes_read"), write = values->find("dram_bytes_write");
  if (read != values->end() && write != values->end()) {
    (*values)["bytes.dram"] = read->second + write->second;
  } else if (auto dram = values->find("dram_bytes"); dram != values->end()) {
    (*values)["bytes.dram"] = dram->second;
  }
  if (auto l2 = values->find("l2_xbar_cycles"); l2 != values->end()) {
    (*values)["bytes.l2"] = kL2BytesPerXbarCycle * l2->second;
  }
  if (auto l1 = values->find("l1_writeback_cycles"); l1 != values->end()) {
    (*values)["bytes.l1"] = kL1BytesPerWritebackCycle * l1->second;
  }
  DeriveFlops("fp32", "f", values);
  DeriveFlops("fp16", "h", values);
  DeriveFlops("fp64", "d", values);
}

const std::map<std::string, std::string>& DerivedWorkUnits() {
  static const std::map<std::string, std::string> kUnits = {
      {"bytes.dram", "bytes"}, {"bytes.l2", "bytes"},  {"bytes.l1", "bytes"},
      {"flops.fp32", "flop"},  {"flops.fp16", "flop"}, {"flops.fp64", "flop"}};
  return kUnits;
}

const char* BoundName(Bound b) {
  switch (b) {
    case Bound::kMemory:
      return "memory-bound";
    case Bound::kCompute:
      return "compute-bound";
    case Bound::kLatency:
      return "latency-bound";
    case Bound::kUnknown:
      break;
  }
  return "unknown";
}

std::string RoofLabel(std::string_view ceiling) {
  static const std::map<std::string_view, const char*> kLabels = {
      {"dram", "DRAM"},
      {"l2", "L2"},
      {"l1", "L1"},
      {"fp32", "FP32"},
      {"fp16", "FP16"},
      {"bf16", "BF16"},
      {"fp64", "FP64"},
      {"tensor_tf32", "TF32 Tensor Core"},
      {"tensor_fp16", "FP16 Tensor Core"},
      {"tensor_bf16", "BF16 Tensor Core"},
      {"tensor_fp8", "FP8 Tensor Core"}};
  auto it = kLabels.find(ceiling);
  return it != kLabels.end() ? it->second : std::string(ceiling);
}

Roofs RoofsOf(const v1::Ceilings& ceilings) {
  Roofs roofs;
  for (const v1::Ceiling& c : ceilings.ceilings()) {
    if (c.measured() > 0) {
      roofs[c.name()] = Roof{c.measured(), true};
    } else if (c.datasheet() > 0) {
      roofs[c.name()] = Roof{c.datasheet(), false};
    }
  }
  return roofs;
}

absl::StatusOr<Point> Locate(const std::map<std::string, double>& values, const Roofs& roofs) {
  Point p;
  p.duration_ns = ValueOr0(values, "duration_ns");
  if (p.duration_ns <= 0) {
    return absl::InvalidArgumentError("roofline: duration_ns missing or not positive; the scope has no time to place");
  }
  ReadCounters(values, &p);
  // The time each roof alone would need; compute shares one time over its classes.
  std::map<std::string, double> time_ns;
  double compute_ns = 0, top_class_ns = 0;
  std::string top_class;
  for (const auto& [cls, f] : p.flops_by_class) {
    if (f <= 0) continue;
    auto roof = roofs.find(cls);
    if (roof == roofs.end()) {
      p.unroofed.push_back(cls);
      continue;
    }
    const double t = f / roof->second.per_second * 1e9;
    compute_ns += t;
    if (t > top_class_ns) top_class_ns = t, top_class = cls;
  }
  if (compute_ns > 0) time_ns[top_class] = compute_ns;
  for (const auto& [level, b] : p.bytes) {
    if (b <= 0) continue;
    auto roof = roofs.find(level);
    if (roof == roofs.end()) {
      p.unroofed.push_back(level);
      continue;
    }
    time_ns[level] = b / roof->second.per_second * 1e9;
  }
  for (const auto& [roof, t] : time_ns) {
    if (t > p.roof_ns) p.roof_ns = t, p.binding = roof;
  }
  if (p.binding.empty()) return p;
  p.pct_of_roof = 100.0 * p.roof_ns / p.duration_ns;
  if (p.pct_of_roof < kLatencyBoundPct) {
    p.bound = Bound::kLatency;
  } else {
    p.bound = IsLevel(p.binding) ? Bound::kMemory : Bound::kCompute;
  }
  return p;
}

Summary Summarize(const std::vector<Point>& points) {
  Summary s;
  double weighted_pct = 0;
  for (const Point& p : points) {
    if (p.bound == Bound::kUnknown) continue;
    s.duration_ns += p.duration_ns;
    weighted_pct += p.pct_of_roof * p.duration_ns;
    s.share[p.bound] += p.duration_ns;
  }
  if (s.duration_ns <= 0) return s;
  s.pct_of_roof = weighted_pct / s.duration_ns;
  for (auto& [bound, t] : s.share) t /= s.duration_ns;
  return s;
}

std::string Describe(const Point& p) {
  if (p.bound == Bound::kUnknown) return "";
  return absl::StrFormat("%s at %.0f %% of %s roof", BoundName(p.bound), p.pct_of_roof, RoofLabel(p.binding));
}

}  // namespace medprof::roofline
