// GroupNorm (+ SiLU, + per-channel embedding add) as one LibTorch op for the U-Net: medprof's
// fused CUDA kernels (cuda/group_norm_kernels.h) wrapped as an autograd function, with
// LibTorch's own ops as the fallback and the reference.
//
//   y = act(group_norm(x + emb[:, :, None...], groups, gamma, beta, eps)),  act = SiLU or identity
//
// x is (N, C, spatial...) with at least one spatial dimension. The fused path runs when `fused`
// is set and FusedUnavailable(x) is empty: x on a CUDA device, FP32 or BF16, channels-first
// contiguous or channels-last dense; it keeps x's dtype and memory format (BF16 in, BF16 out;
// statistics in FP32). The reference path computes in FP32 whatever x's dtype (the model's
// GroupNormFp32 rule) and returns FP32.
//
// Not thread-safe beyond LibTorch's own guarantees; exceptions are LibTorch's (c10::Error),
// including a failed kernel launch with the CUDA error's text.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "workloads/meddpm/fused_info.h"  // CallCounts / Counts()

namespace medprof::meddpm::fused {

// What every medprof kernel needs of its input (this file's and fused_volume_ops.h's): "" when
// this build has the kernels and x is a defined CUDA tensor of Float or BFloat16, else why not.
std::string KernelInputProblem(const at::Tensor& x);

// "" when the fused kernels would take x (and this build has them), else why not.
std::string FusedUnavailable(const at::Tensor& x, int64_t groups);
// "" when the fused kernels can take these parameters with x: gamma and beta defined with C
// elements, emb undefined or with N*C elements, all on x's device; else why not.
std::string ParamsUnavailable(const at::Tensor& x, const at::Tensor& emb, const at::Tensor& gamma,
                              const at::Tensor& beta);

// The op. `emb` may be undefined (no add), else (N, C) in any float dtype.
at::Tensor GroupNormAct(const at::Tensor& x, const at::Tensor& emb, int64_t groups, const at::Tensor& gamma,
                        const at::Tensor& beta, double eps, bool silu, bool fused);

// LibTorch's ops only (the fallback; the tests' reference): FP32 math, FP32 result.
at::Tensor ReferenceGroupNormAct(const at::Tensor& x, const at::Tensor& emb, int64_t groups, const at::Tensor& gamma,
                                 const at::Tensor& beta, double eps, bool silu);

// Tests: the fused forward writing into a caller-owned `y` (same shape, dtype and strides as
// x), so a test can poison y first and prove every element is written. No autograd.
// FAILED (c10::Error) when the fused path cannot take x.
void FusedForwardInto(const at::Tensor& x, const at::Tensor& emb, int64_t groups, const at::Tensor& gamma,
                      const at::Tensor& beta, double eps, bool silu, at::Tensor& y);
// Tests: forward then backward for upstream `dy` into caller-owned outputs (y, dx like x;
// dgamma, dbeta FP32 (C); demb FP32 (N, C), defined exactly when emb is), so every output can
// be poisoned first. No autograd.
void FusedForwardBackwardInto(const at::Tensor& x, const at::Tensor& emb, int64_t groups, const at::Tensor& gamma,
                              const at::Tensor& beta, double eps, bool silu, const at::Tensor& dy, at::Tensor& y,
                              at::Tensor& dx, at::Tensor& dgamma, at::Tensor& dbeta, at::Tensor& demb);


}  // namespace medprof::meddpm::fused
