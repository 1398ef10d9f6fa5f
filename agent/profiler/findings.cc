#include "agent/profiler/findings.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/conv_work.h"

namespace medprof::profiler {
namespace {

double Get(const KernelFacts& k, const std::string& name, double fallback = -1.0) {
  auto it = k.metrics.find(name);
  return it == k.metrics.end() ? fallback : it->second;
}

struct Candidate {
  std::string rule;
  double speedup = 0.0;
  std::string text;
};

bool ElementwiseLike(const std::string& category) {
  return category == "elementwise" || category == "layout" || category == "copy" || category == "norm" ||
         category == "upsample" || category == "reduction" || category == "softmax" ||
         category == "optimizer";
}

}  // namespace

std::string KernelLabel(const KernelFacts& k);

namespace {

// Every rule that fires for these facts, with its estimated speedup.
std::vector<Candidate> Candidates(const KernelFacts& k, const FindingsOptions& options);

// Which of the kernel's measured signatures the rule holds for, when not all: "" when it holds for
// each (or the kernel has fewer than two).
std::string SignatureScope(const KernelFacts& k, const std::string& rule, const FindingsOptions& options) {
  if (k.signatures.size() < 2) return "";
  std::vector<const SignatureFacts*> hold;
  for (const SignatureFacts& s : k.signatures) {
    KernelFacts one = k;
    one.op = s.op;
    one.shapes = s.shapes;
    one.metrics = s.metrics;
    one.blocks = s.blocks;
    one.signatures.clear();
    const std::vector<Candidate> c = Candidates(one, options);
    if (std::any_of(c.begin(), c.end(), [&](const Candidate& x) { return x.rule == rule; }))
      hold.push_back(&s);
  }
  if (hold.size() == k.signatures.size()) return "";
  if (hold.empty())
    return absl::StrCat(" (the aggregate over ", k.signatures.size(), " signatures; none alone)");
  if (hold.size() == 1) {
    return absl::StrCat(" (signature ", hold[0]->id, " only: ", hold[0]->op, " ", hold[0]->shapes, ")");
  }
  std::vector<std::string> ids;
  for (const SignatureFacts* s : hold) ids.push_back(s->id);
  return absl::StrCat(" (", hold.size(), " of ", k.signatures.size(),
                      " signatures: ", absl::StrJoin(ids, ", "), ")");
}

}  // namespace

std::string KernelLabel(const KernelFacts& k) {
  if (absl::StrContains(k.name, "RowwiseMoments") || absl::StrContains(k.name, "welford")) {
    return "GroupNorm statistics";
  }
  absl::string_view op(k.op);
  if (absl::ConsumePrefix(&op, "aten::") || !op.empty()) return std::string(op);
  return k.category.empty() ? "kernel" : k.category;
}

namespace {

double Fp32ToTensorPeak(const FindingsOptions& options) {
  auto fp32 = options.roofs.find("fp32"), tf32 = options.roofs.find("tensor_tf32");
  if (fp32 == options.roofs.end() || tf32 == options.roofs.end() || tf32->second.per_second <= 0) {
    return options.fp32_to_tensor_peak;
  }
  return fp32->second.per_second / tf32->second.per_second;
}

constexpr double kPaddingFactor = 2.0;  // executed / useful Tensor Core FLOPs that makes a finding

struct Padding {
  double executed = 0, useful = 0;
  ConvWork worst;  // the signature (or the facts) with the largest executed / useful
  double worst_factor = 0;
};

// Tensor Core FLOPs against the convolution's useful FLOPs, over the measured signatures (or the
// facts themselves when they are one signature's). nullopt when no scope has both.
std::optional<Padding> TensorPadding(const KernelFacts& k) {
  Padding p;
  const auto add = [&p](const std::string& op, const std::string& shapes, const std::map<std::string, double>& m) {
    double executed = 0;
    for (std::string_view cls : roofline::kFlopClasses) {
      if (cls.rfind("tensor_", 0) != 0) continue;
      if (auto it = m.find("flops." + std::string(cls)); it != m.end()) executed += it->second;
    }
    const std::optional<ConvWork> useful = UsefulConvWork(op, shapes);
    if (!useful || useful->flops <= 0 || executed <= 0) return;
    p.executed += executed;
    p.useful += useful->flops;
    if (executed / useful->flops > p.worst_factor) {
      p.worst_factor = executed / useful->flops;
      p.worst = *useful;
    }
  };
  if (k.signatures.empty()) add(k.op, k.shapes, k.metrics);
  for (const SignatureFacts& s : k.signatures) add(s.op, s.shapes, s.metrics);
  if (p.useful <= 0) return std::nullopt;
  return p;
}

// The tensor_padding rule (findings.h) for facts whose tensor pipe is `tensor` % busy.
std::optional<Candidate> PaddingCandidate(const KernelFacts& k, double tensor) {
  const std::optional<Padding> pad = TensorPadding(k);
  if (!pad || tensor < 0) return std::nullopt;
  const double factor = pad->executed / pad->useful;
  if (factor < kPaddingFactor) return std::nullopt;
  return Candidate{"tensor_padding", (1.0 - 1.0 / factor) * tensor / 100.0,
                   absl::StrFormat("convolution %d -> %d channels: the Tensor Cores execute %.1fx its useful "
                                   "FLOPs (%.3g for %.3g); a channel count below the GEMM tile is padded up to it",
                                   pad->worst.c_in_per_group, pad->worst.c_out, factor, pad->executed,
                                   pad->useful)};
}

std::vector<Candidate> Candidates(const KernelFacts& k, const FindingsOptions& options) {
  std::vector<Candidate> c;
  const double issue = Get(k, "issue_active_pct");
  const double sm_tp = Get(k, "sm_throughput_pct");
  const double issue_headroom = issue >= 0 ? std::max(0.0, 1.0 - issue / 100.0) : 1.0;

  // Tensor Cores idle on an FMA-bound convolution / GEMM.
  const double tensor = Get(k, "tensor_pipe_pct");
  const double fma = Get(k, "fma_pipe_pct");
  if ((k.category == "conv" || k.category == "gemm") && tensor >= 0 && fma >= 0 && tensor < 5.0 &&
      fma >= 20.0) {
    c.push_back({"tensor_cores_idle", fma / 100.0 * (1.0 - Fp32ToTensorPeak(options)),
                 absl::StrFormat("FP32 FMA-bound %s (FMA pipe %.0f%%), Tensor Cores idle",
                                 k.category == "conv" ? "convolution" : "GEMM", fma)});
  }
  // Fewer blocks than SMs: most of the GPU idles.
  if (options.sm_count > 0 && k.blocks > 0 && k.blocks < options.sm_count) {
    c.push_back({"small_grid", 1.0 - static_cast<double>(k.blocks) / options.sm_count,
                 absl::StrFormat("%s: %d blocks on %d SMs", KernelLabel(k), k.blocks, options.sm_count)});
  }
  // Memory-bound small kernels: fusion is the fix. The roofline decides where it can place the kernel.
  const absl::StatusOr<roofline::Point> point = roofline::Locate(k.metrics, options.roofs);
  const double dram = Get(k, "dram_throughput_pct");
  if (point.ok() && point->bound != roofline::Bound::kUnknown) {
    if (ElementwiseLike(k.category) && point->bound == roofline::Bound::kMemory) {
      c.push_back({"memory_bound", 0.5 * std::min(point->pct_of_roof, 100.0) / 100.0,
                   absl::StrFormat("%s kernel %s: fuse it with its neighbours", k.category, roofline::Describe(*point))});
    }
  } else if (ElementwiseLike(k.category) && dram >= 60.0 && (sm_tp < 0 || sm_tp < 60.0)) {
    c.push_back({"memory_bound", 0.5 * dram / 100.0,
                 absl::StrFormat("memory-bound %s kernel (DRAM %.0f%% of peak): fuse it with its neighbours",
                                 k.category, dram)});
  }
  // Latency: the dominant stall reason, capped by issue-slot headroom.
  const double cpi = Get(k, "cpi");
  if (issue >= 0 && issue < 80.0 && cpi > 0) {
    std::string top;
    double top_v = 0.0;
    for (const auto& [name, v] : k.metrics) {
      if (!absl::StartsWith(name, "stall.") || name == "stall.selected") continue;
      if (v > top_v) {
        top_v = v;
        top = name.substr(6);
      }
    }
    if (!top.empty() && top_v / cpi > 0.3) {
      c.push_back(
          {absl::StrCat("stall_", top), std::min(top_v / cpi, issue_headroom),
           absl::StrFormat("latency-bound: issue slots %.0f%% busy, %.0f%% of warp cycles stalled on %s",
                           issue, 100.0 * top_v / cpi, top)});
    }
  }
  // Tensor Core work the convolution does not need: a channel count padded to the GEMM tile.
  if (std::optional<Candidate> pad = PaddingCandidate(k, tensor)) c.push_back(std::move(*pad));
  // Achieved below theoretical occupancy.
  const double achieved = Get(k, "achieved_occupancy_pct");
  if (achieved >= 0 && k.theoretical_occupancy > 0) {
    const double theo = 100.0 * k.theoretical_occupancy;
    if (achieved < theo * 0.8) {
      c.push_back({"occupancy", std::min((theo - achieved) / theo, issue_headroom),
                   absl::StrFormat("achieved occupancy %.0f%% of %.0f%% theoretical", achieved, theo)});
    }
  }
  return c;
}

}  // namespace

std::vector<v1::KernelFinding> FindKernelFindings(const std::vector<KernelFacts>& kernels,
                                                  const FindingsOptions& options) {
  std::vector<v1::KernelFinding> out;
  for (const KernelFacts& k : kernels) {
    std::vector<Candidate> c = Candidates(k, options);
    if (c.empty()) continue;
    // Too few blocks is the cause of the latency and occupancy symptoms of the same kernel
    // (no scheduler has enough warps): report the grid, with the largest of their estimates.
    auto grid = std::find_if(c.begin(), c.end(), [](const Candidate& x) { return x.rule == "small_grid"; });
    if (grid != c.end()) {
      for (const Candidate& x : c) {
        if (absl::StartsWith(x.rule, "stall_") || x.rule == "occupancy")
          grid->speedup = std::max(grid->speedup, x.speedup);
      }
    }
    auto best = std::max_element(
        c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return a.speedup < b.speedup; });
    v1::KernelFinding f;
    f.set_kernel(k.name);
    f.set_op(k.op);
    f.set_phase(k.phase);
    f.set_category(k.category);
    f.set_share(k.share);
    f.set_speedup(std::clamp(best->speedup, 0.0, 1.0));
    f.set_priority(k.share * f.speedup());
    f.set_rule(best->rule);
    f.set_finding(best->text + SignatureScope(k, best->rule, options));
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const v1::KernelFinding& a, const v1::KernelFinding& b) {
    return a.priority() > b.priority();
  });
  return out;
}

}  // namespace medprof::profiler
