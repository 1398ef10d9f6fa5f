// Fused GroupNorm (+ SiLU, + per-channel embedding add) CUDA kernels for the Med-DDPM U-Net
// (issue: preset opt3). Plain CUDA, no LibTorch: the raw kernels compile wherever nvcc is; the
// LibTorch autograd glue lives in ../fused_group_norm.cc.
//
// What one call computes, for x of shape (N, C, S) in either layout (S = D*H*W, or any flattened
// spatial extent), G groups of Cg = C / G channels, e an optional (N, C) embedding:
//   h      = x + e[n, c]                                    (e absent: h = x)
//   mean_g = mean of h over the Cg*S elements of (n, g); var_g likewise (biased, like PyTorch)
//   z      = (h - mean_g) * rsqrt(var_g + eps) * gamma[c] + beta[c]
//   y      = silu(z) if `silu` else z
// so y = act(a[n,c] * x + b[n,c]) with a = rstd*gamma, b = beta + (e - mean)*a: the forward is a
// statistics pass (a multi-block split reduction: every (n, c) is cut into `splits` chunks, so a
// batch-1 call still fills the GPU instead of launching G blocks), a tiny finalize kernel (FP64
// combine of the partial Welford states, per-channel coefficients) and one elementwise pass.
// The backward is the same shape: per-(n, c, split) sums of dz and dz*xhat, a finalize (one
// block per group, deterministic: no atomics), one elementwise pass writing dx, and, from the
// finalize, dgamma, dbeta and d e (= sum over S of dx).
//
// Inputs and outputs are FP32 or BF16 (the same type for x, y, dy, dx); statistics, gamma, beta,
// e and every coefficient are FP32. Layouts: kNCS = channels first (NCDHW contiguous), kNSC =
// channels last (NDHWC contiguous). Kernel names start with medprof_group_norm (the profiler's
// taxonomy files them under `norm`).
//
// Thread safety: the functions are reentrant; concurrent calls need their own workspaces.
// Errors: every launch is checked; the first CUDA error is returned (the caller names it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "workloads/meddpm/cuda/group_norm_math.h"  // Shape, Layout, DType, the arithmetic

namespace medprof::meddpm::gn {

// "" when the kernels take `shape`, else why not (the glue then runs LibTorch's ops).
std::string Unsupported(const Shape& shape);

// How many chunks each (n, c) is cut into for the statistics passes on a GPU of `sm_count`
// SMs (at least 1; the same for forward and backward). Exposed for the tests and --describe.
int Splits(const Shape& shape, int sm_count);

// FP32 scratch one call needs, in elements (forward and backward alike).
int64_t WorkspaceFloats(const Shape& shape, int sm_count);

struct ForwardArgs {
  const void* x = nullptr;       // (N, C, S) in shape.layout, shape.dtype
  const float* gamma = nullptr;  // (C); null = 1
  const float* beta = nullptr;   // (C); null = 0
  const float* emb = nullptr;    // (N, C); null = no add
  bool silu = true;
  float eps = 1e-5f;
  void* y = nullptr;          // out, like x (may not alias x)
  float* mean = nullptr;      // out (N, G): mean of x + e per group
  float* rstd = nullptr;      // out (N, G)
  float* scale = nullptr;     // out (N, C): a
  float* shift = nullptr;     // out (N, C): b
  float* chan_mean = nullptr; // out (N, C): mean over S of x + e (the backward's d e needs it)
  float* workspace = nullptr; // WorkspaceFloats(shape) floats
};
cudaError_t Forward(const Shape& shape, const ForwardArgs& args, cudaStream_t stream);

struct BackwardArgs {
  const void* dy = nullptr;  // (N, C, S), like x
  const void* x = nullptr;   // the forward's input
  const float* gamma = nullptr;
  const float* emb = nullptr;  // as in the forward
  bool silu = true;
  // The forward's outputs.
  const float* mean = nullptr;
  const float* rstd = nullptr;
  const float* scale = nullptr;
  const float* shift = nullptr;
  const float* chan_mean = nullptr;
  void* dx = nullptr;            // out, like x (may alias dy)
  float* dgamma = nullptr;       // out (C), overwritten; null = not wanted
  float* dbeta = nullptr;        // out (C), overwritten; null = not wanted
  float* demb = nullptr;         // out (N, C), overwritten; null = not wanted
  float* workspace = nullptr;    // WorkspaceFloats(shape) + 3 * N * C floats
};
cudaError_t Backward(const Shape& shape, const BackwardArgs& args, cudaStream_t stream);

// Scratch the backward needs on top of WorkspaceFloats (its per-(n, c) coefficients).
inline int64_t BackwardExtraFloats(const Shape& shape) { return 3 * shape.n * shape.c; }

// SM count of the current device (cached per device); 0 with the error in `error`.
int CurrentDeviceSmCount(cudaError_t* error);

}  // namespace medprof::meddpm::gn
