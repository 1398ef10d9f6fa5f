#include "workloads/meddpm/fused_info.h"

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

}  // namespace medprof::meddpm::fused
