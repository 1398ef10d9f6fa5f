// Findings and priorities: which kernels to work on first (the derived layer).
//
// For each kernel (by name) the rules below estimate a global speedup fraction following
// Nsight Compute's rule logic (spec/cupti.md §5): inefficiency × utilization of the limiting
// unit, capped by the parent bound (issue-slot headroom, 1 − max(SM, memory) throughput). The
// kernel's priority is share × its largest speedup. Rules:
//   tensor_cores_idle  conv/gemm kernels busy on the FMA pipe with the tensor pipe idle:
//                      s = fma% × (1 − FP32/TF32 peak ratio)           ("FP32 FMA-bound convolution, Tensor
//                      Cores idle")
//   small_grid         fewer thread blocks than SMs (trace only, needs no counters):
//                      s = 1 − blocks/SMs                                ("GroupNorm statistics: 32 blocks on
//                      132 SMs")
//   memory_bound       an elementwise-like kernel the roofline (common/roofline.h, the run's roofs)
//                      places memory-bound: s = 0.5 × % of its memory roof ("elementwise kernel
//                      memory-bound at 62 % of DRAM roof: fuse it with its neighbours"; fusing with
//                      a neighbour halves its traffic). Where the roofline cannot place the kernel
//                      (no roofs, no FLOP/byte counters): DRAM ≥ 60 % of peak and SM throughput
//                      below 60 %, s = 0.5 × DRAM%
//   stall_<r>          issue slots < 80 % busy and stall r > 30 % of CPI: s = min(r/CPI, 1 − issue%)
//   occupancy          achieved < theoretical: s = min((theo − achieved)/theo, 1 − issue%)
//   tensor_padding     a convolution whose Tensor Core FLOPs (Σ flops.tensor_*) are ≥ 2× its useful
//                      FLOPs from the op's shapes (common/conv_work.h): a channel count below the GEMM
//                      tile padded up to it. factor f = executed / useful (summed over the measured
//                      signatures whose shapes parse); s = (1 − 1/f) × tensor pipe % ("convolution
//                      64 -> 1 channels: the Tensor Cores execute 64× its useful FLOPs ...")
// A small grid explains the latency and occupancy symptoms of the same kernel: when it applies it
// is the finding reported, with the largest of those estimates. Without counters (metrics layer
// not run) only small_grid applies. The rules read the kernel's aggregate over all its launches;
// when the kernel has several measured signatures and the reported rule holds for some of them only,
// the finding names them ("(signature 3fa2… only: aten::native_group_norm f32[1,64,32,32,32])").
//
// Pure; thread-compatible.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/roofline.h"
#include "medprof/v1/results.pb.h"

namespace medprof::profiler {

// One measured launch signature of a kernel (metrics_layer.h): a rule that fires for the kernel's
// aggregate is checked on each, and the finding says which signatures it holds for when not all.
struct SignatureFacts {
  std::string id;
  std::string op;
  std::string shapes;
  int64_t blocks = 0;                     // its grid x*y*z
  std::map<std::string, double> metrics;  // its per-launch values
};

struct KernelFacts {
  std::string name;
  std::string op;  // op of the kernel's largest (op, phase) entry
  std::string shapes;  // the op's input shapes when these are one signature's facts; else empty
  std::string phase;
  std::string category;
  double share = 0.0;                     // of all kernel time in the measured steps
  int64_t blocks = 0;                     // grid x*y*z of its dominant launch shape (most time)
  double theoretical_occupancy = 0.0;     // 0..1
  std::map<std::string, double> metrics;  // medprof names (docs/metrics.md), kernel scope (the aggregate)
  std::vector<SignatureFacts> signatures;  // its measured signatures (none without the metrics layer)
};

struct FindingsOptions {
  int sm_count = 0;                           // device SMs (0: small_grid not evaluated)
  // FP32 FMA peak / TF32 dense tensor peak: the roofs' fp32 / tensor_tf32 when `roofs` has both,
  // else this (H100/H200 datasheet).
  double fp32_to_tensor_peak = 67.0 / 495.0;
  roofline::Roofs roofs;                      // the run's (empty: the memory_bound rule's fallback)
};

// One entry per kernel with at least one finding, sorted by priority (largest first).
std::vector<v1::KernelFinding> FindKernelFindings(const std::vector<KernelFacts>& kernels,
                                                  const FindingsOptions& options);

// A short human label for a kernel: "GroupNorm statistics" for RowwiseMoments, the op name
// without "aten::" otherwise, else the category.
std::string KernelLabel(const KernelFacts& k);

}  // namespace medprof::profiler
