// Channels-last volume kernels for the Med-DDPM U-Net's fused preset (opt3), beside the fused
// GroupNorm (group_norm_kernels.h). Plain CUDA, no LibTorch: the autograd glue lives in
// ../fused_volume_ops.cc. Why these two (the measurements that chose them):
// bench/results/h200-fused-*.md.
//
// 1. Trilinear x2 upsample (align_corners false), forward and backward, on NDHWC data in the
//    data's own dtype (FP32 math), where LibTorch goes through a channels-first FP32 kernel and
//    casts under BF16 autocast. Forward: one thread per 4 output channels of one voxel, 8 taps, the same
//    weights and the same evaluation order as LibTorch's kernel (so FP32 results match it).
//    Backward: a gather (no atomics, deterministic): each input voxel sums the 4 x 4 x 4 output
//    voxels whose interpolation reads it, with the forward's own weights.
//
// 2. The backward of a kernel-3, stride-1, padding-1 Conv3d with few output channels (the
//    U-Net's head: 64 -> 1), whose weight gradient for one output filter is a memory-bound pass
//    over the input that cuDNN runs as a slow direct kernel. With q a voxel, t = (kd, kh, kw) a
//    tap, off_t = t - 1 and dy zero outside the volume:
//        dW[o, c, t] = sum_q x[q, c] * dy[q - off_t, o]
//        dx[q, c]    = sum_{o, t} W[o, c, t] * dy[q - off_t, o]
//    dgrad: one thread per 4 channels of one voxel, W in shared memory as [o][t][c].
//    wgrad: each thread owns 4 channels x one kd plane (9 taps) of one output channel and loops
//    over voxels (36 FP32 accumulators); per-block partials, then a finalize that sums them in
//    FP64 in a fixed order (deterministic).
//
// Shapes: x is (N, D, H, W, C) contiguous (a channels-last dense NCDHW tensor), C a multiple of
// 4, 16-byte aligned; dy of the conv is (N, D, H, W, O) contiguous. Element type FP32 or BF16
// (the same for x, y, dy and dx); W, dW and the partials FP32. Kernel names start with
// medprof_upsample / medprof_conv3x3 (the profiler's taxonomy files them under upsample / conv).
//
// Thread safety: reentrant; concurrent calls need their own workspaces. Errors: every launch is
// checked, the first CUDA error is returned (the caller names it); cudaErrorInvalidValue for a
// shape the kernels do not take (check Unsupported* first).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "workloads/meddpm/cuda/group_norm_math.h"  // DType

namespace medprof::meddpm::vk {

using gn::DType;

struct Volume {
  int64_t n = 0, d = 0, h = 0, w = 0, c = 0;  // (N, D, H, W, C), channels innermost
  int64_t voxels() const { return n * d * h * w; }
  int64_t numel() const { return voxels() * c; }
};

// ---- upsample ----------------------------------------------------------------------------

// "" when the upsample kernels take input `in` (output 2D x 2H x 2W), else why not.
std::string UnsupportedUpsample(const Volume& in);

// y (N, 2D, 2H, 2W, C) = trilinear x2 of x (N, D, H, W, C), align_corners false.
cudaError_t UpsampleX2Forward(const Volume& in, DType dtype, const void* x, void* y, cudaStream_t stream);
// dx (N, D, H, W, C) from dy (N, 2D, 2H, 2W, C); every element of dx written.
cudaError_t UpsampleX2Backward(const Volume& in, DType dtype, const void* dy, void* dx, cudaStream_t stream);

// ---- kernel-3 conv with few output channels: backward ------------------------------------

inline constexpr int kMaxSmallOut = 4;  // output channels the conv kernels take

// "" when the conv backward kernels take input `x` with `out_channels` outputs, else why not.
std::string UnsupportedSmallConv(const Volume& x, int64_t out_channels);

// Blocks of the weight-gradient kernel on a GPU of `sm_count` SMs, and the FP32 workspace it
// needs (per-block partials of every dW element).
int SmallConvWgradBlocks(const Volume& x, int64_t out_channels, int sm_count);
int64_t SmallConvWorkspaceFloats(const Volume& x, int64_t out_channels, int sm_count);

struct SmallConvBackwardArgs {
  const void* x = nullptr;      // (N, D, H, W, C)
  const void* dy = nullptr;     // (N, D, H, W, O)
  const float* w = nullptr;     // (O, C, 27) FP32: the conv weight (O, C, 3, 3, 3), contiguous
  void* dx = nullptr;           // out (N, D, H, W, C), like x; null = not wanted
  float* dw = nullptr;          // out (O, C, 27) FP32, overwritten; null = not wanted
  float* workspace = nullptr;   // SmallConvWorkspaceFloats floats (when dw is wanted)
  int sm_count = 0;             // the SM count the workspace was sized with
};
cudaError_t SmallConvBackward(const Volume& x, int64_t out_channels, DType dtype, const SmallConvBackwardArgs& args,
                              cudaStream_t stream);

}  // namespace medprof::meddpm::vk
