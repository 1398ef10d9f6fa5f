#include "workloads/meddpm/fused_info.h"

#include <atomic>
#include <mutex>

namespace medprof::meddpm::fused {

const std::vector<KernelInfo>& Kernels() {
  static const std::vector<KernelInfo> kernels = {
      {"medprof_group_norm_stats_ncs", "forward statistics, channels first: split reduction per (n, c, chunk)"},
      {"medprof_group_norm_stats_nsc", "forward statistics, channels last: 32 channels x 8 rows per block"},
      {"medprof_group_norm_finalize", "FP64 combine per (n, group): mean, rstd, per-channel scale/shift (+ emb)"},
      {"medprof_group_norm_silu_apply", "y = silu(scale * x + shift), FP32 or BF16, either layout"},
      {"medprof_group_norm_bwd_stats_ncs", "backward sums of dz and dz * xhat, channels first"},
      {"medprof_group_norm_bwd_stats_nsc", "backward sums of dz and dz * xhat, channels last"},
      {"medprof_group_norm_bwd_finalize", "dgamma, dbeta, d emb and the dx coefficients, one warp per group"},
      {"medprof_group_norm_silu_bwd_apply", "dx = alpha * dz + beta * x + kappa"},
      {"medprof_upsample_x2_fwd", "trilinear x2 upsample, channels last, in the data's dtype (FP32 math)"},
      {"medprof_upsample_x2_bwd", "its backward as a gather over the 4x4x4 output voxels reading each input"},
      {"medprof_conv3x3_small_dgrad", "input gradient of a kernel-3 conv with <= 4 outputs (the head), channels last"},
      {"medprof_conv3x3_small_wgrad", "its weight gradient: per-block partial sums, 9 taps x 4 channels per thread"},
      {"medprof_conv3x3_small_wgrad_finalize", "FP64 sum of the partials in block order (deterministic)"},
  };
  return kernels;
}

bool Compiled() {
#ifdef MEDPROF_FUSED_KERNELS
  return true;
#else
  return false;
#endif
}

std::string NotCompiledReason() {
#if defined(MEDPROF_FUSED_KERNELS)
  return "";
#elif !defined(MEDPROF_HAVE_CUDA_TOOLKIT)
  return "this build has no CUDA toolkit (nvcc): the fused kernels were not compiled; LibTorch's ops run instead";
#else
  return "this build's LibTorch has no CUDA: the fused kernels' glue was not compiled; LibTorch's ops run instead";
#endif
}

namespace {

struct Counter {
  std::atomic<int64_t> fused{0}, fallback{0};
  std::mutex mu;
  std::string reason;
};
Counter& CounterOf(Op op) {
  static Counter counters[3];
  return counters[static_cast<int>(op)];
}

}  // namespace

const char* OpName(Op op) {
  switch (op) {
    case Op::kGroupNorm:
      return "GroupNorm";
    case Op::kUpsample:
      return "upsample";
    case Op::kSmallConv:
      return "head conv";
  }
  return "?";
}

void CountCall(Op op, const std::string& why_not) {
  Counter& c = CounterOf(op);
  if (why_not.empty()) {
    c.fused.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  c.fallback.fetch_add(1, std::memory_order_relaxed);
  const std::lock_guard<std::mutex> lock(c.mu);
  c.reason = why_not;
}

CallCounts Counts(Op op) {
  Counter& c = CounterOf(op);
  CallCounts out;
  out.fused = c.fused.load(std::memory_order_relaxed);
  out.fallback = c.fallback.load(std::memory_order_relaxed);
  const std::lock_guard<std::mutex> lock(c.mu);
  out.last_fallback_reason = c.reason;
  return out;
}

}  // namespace medprof::meddpm::fused
