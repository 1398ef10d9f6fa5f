// Two more U-Net ops through medprof's CUDA kernels under the fused preset (opt3), beside the
// fused GroupNorm (fused_group_norm.h): the trilinear x2 upsample and the head's kernel-3 conv
// with few output channels (its backward). Kernels: cuda/volume_kernels.h, which says what
// LibTorch's own kernels do with them. LibTorch's ops are the fallback and the reference.
//
// Both take 5-D (N, C, D, H, W) tensors; the kernels need x on a CUDA device, FP32 or BF16,
// channels-last dense (ChannelsLast3d), C a multiple of 4 and 16-byte-aligned data; anything
// else runs LibTorch's op, and the call is counted as a fallback with its reason
// (fused_info.h Counts(Op::kUpsample / Op::kSmallConv)).
//
// Not thread-safe beyond LibTorch's own guarantees; exceptions are LibTorch's (c10::Error),
// including a failed kernel launch with the CUDA error's text.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>

#include "workloads/meddpm/fused_info.h"

namespace medprof::meddpm::fused {

// "" when UpsampleTrilinearX2 would run medprof's kernels on x (and this build has them), else
// why not.
std::string UpsampleUnavailable(const at::Tensor& x);

// Trilinear x2 upsample, align_corners false, of a 5-D x (output 2D x 2H x 2W). With `fused` and
// the kernels available: medprof's channels-last kernels, output in x's dtype and layout (FP32
// math, one rounding: the values LibTorch's FP32 op gives, rounded to x's dtype). Otherwise
// at::upsample_trilinear3d (under BF16 autocast it runs in, and returns, FP32).
at::Tensor UpsampleTrilinearX2(const at::Tensor& x, bool fused);

// "" when SmallConv3x3 would run medprof's backward kernels for this x, weight (O, C, 3, 3, 3)
// and bias (O) or undefined, else why not.
std::string SmallConvUnavailable(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// Conv3d, kernel 3, stride 1, padding 1. With `fused` and the kernels available: the forward is
// LibTorch's (cuDNN) with weight and bias cast to x's dtype (what autocast does), the backward
// is medprof's kernels (dx, dW; d bias = the sum of dy); gradients reach weight and bias in
// their own dtypes. Otherwise at::conv3d.
at::Tensor SmallConv3x3(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool fused);

// Tests: the raw kernels, no autograd; FAILED (c10::Error) when they cannot take the input.
// dx (like x) of the upsample for upstream dy (N, C, 2D, 2H, 2W) in x's dtype and layout.
at::Tensor UpsampleX2BackwardKernel(const at::Tensor& dy, const at::Tensor& x);
// (dx like x, dW FP32 with weight's shape) of the conv for upstream dy (N, O, D, H, W) in x's
// dtype; weight in any float dtype (used as FP32).
std::pair<at::Tensor, at::Tensor> SmallConvBackwardKernel(const at::Tensor& x, const at::Tensor& weight,
                                                          const at::Tensor& dy);

}  // namespace medprof::meddpm::fused
