// Channels-last upsample and small-output conv backward kernels: see volume_kernels.h.
//
// Launch shapes (V = 4 channels per thread, C4 = C / 4):
//   upsample fwd    grid-stride, one thread per (output voxel, C4 group), 8 taps
//   upsample bwd    grid-stride, one thread per (input voxel, C4 group), up to 4 x 4 x 4 taps
//   conv dgrad      grid-stride, one thread per (voxel, C4 group), W in shared memory [o][t][c]
//   conv wgrad      blocks of lanes x rows threads (lane = (o, kd, C4 group), row = a voxel of
//                   the block's current slice), at most 4 blocks per SM, per-block partials
//   wgrad finalize  one thread per dW element, FP64 sum over the blocks' partials in order
// 32-bit index arithmetic below 2^31 elements, 64-bit above.
#include "workloads/meddpm/cuda/volume_kernels.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "workloads/meddpm/cuda/element_access.cuh"

namespace medprof::meddpm::vk {
namespace {

using access::Load;
using access::Store;
using access::ToF;

constexpr int kThreads = 256;
constexpr int kV = 4;               // channels per thread
constexpr int kTapsPerLane = 9;     // wgrad: one kd plane of the 3 x 3 x 3 kernel
constexpr int kMaxWgradLanes = 256; // wgrad: (o, kd, C4 group) lanes per block, at most

// ---- indexing --------------------------------------------------------------------------

// A voxel of an (N, D, H, W) grid from its flat index (((n D + z) H + y) W + x).
template <typename I>
struct Voxel {
  I n;
  int z, y, x;
};
template <typename I>
__device__ __forceinline__ Voxel<I> VoxelOf(I r, int d, int h, int w) {
  Voxel<I> v;
  v.x = static_cast<int>(r % w);
  r /= w;
  v.y = static_cast<int>(r % h);
  r /= h;
  v.z = static_cast<int>(r % d);
  v.n = r / d;
  return v;
}

// ---- upsample ------------------------------------------------------------------------------

// LibTorch's area_pixel_compute_source_index (align_corners false, not cubic) and the
// interpolation's two source indices: i0 and i0 + ip, with weights l0 and l1.
struct Source {
  int i0, ip;
  float l0, l1;
};
__device__ __forceinline__ Source SourceOf(int o, int in, float scale) {
  float src = scale * (static_cast<float>(o) + 0.5f) - 0.5f;
  src = src < 0.f ? 0.f : src;
  Source s;
  s.i0 = static_cast<int>(src);
  s.ip = s.i0 < in - 1 ? 1 : 0;
  s.l1 = src - static_cast<float>(s.i0);
  s.l0 = 1.f - s.l1;
  return s;
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    medprof_upsample_x2_fwd(const T* __restrict__ x, T* __restrict__ y, int n, int d, int h, int w, int c, I total) {
  const int c4 = c / kV, od = 2 * d, oh = 2 * h, ow = 2 * w;
  const float sd = static_cast<float>(d) / od, sh = static_cast<float>(h) / oh, sw = static_cast<float>(w) / ow;
  const I stride_w = static_cast<I>(c), stride_h = static_cast<I>(w) * c, stride_d = static_cast<I>(h) * w * c;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    const int cv = static_cast<int>(i % c4);
    const Voxel<I> o = VoxelOf<I>(i / c4, od, oh, ow);
    const I nn = o.n;
    const Source t = SourceOf(o.z, d, sd), u = SourceOf(o.y, h, sh), v = SourceOf(o.x, w, sw);
    const T* p = x + (((nn * d + t.i0) * h + u.i0) * w + v.i0) * c + cv * kV;
    const I dz = t.ip * stride_d, dyy = u.ip * stride_h, dx = v.ip * stride_w;
    float a000[kV], a001[kV], a010[kV], a011[kV], a100[kV], a101[kV], a110[kV], a111[kV];
    Load<T, kV>(p, a000);
    Load<T, kV>(p + dx, a001);
    Load<T, kV>(p + dyy, a010);
    Load<T, kV>(p + dyy + dx, a011);
    Load<T, kV>(p + dz, a100);
    Load<T, kV>(p + dz + dx, a101);
    Load<T, kV>(p + dz + dyy, a110);
    Load<T, kV>(p + dz + dyy + dx, a111);
    float out[kV];
#pragma unroll
    for (int k = 0; k < kV; ++k) {
      // LibTorch's upsample_trilinear3d_out_frame, term for term.
      out[k] = t.l0 * (u.l0 * (v.l0 * a000[k] + v.l1 * a001[k]) + u.l1 * (v.l0 * a010[k] + v.l1 * a011[k])) +
               t.l1 * (u.l0 * (v.l0 * a100[k] + v.l1 * a101[k]) + u.l1 * (v.l0 * a110[k] + v.l1 * a111[k]));
    }
    Store<T, kV>(y + i * kV, out);
  }
}

// The output indices along one dimension whose interpolation reads input index i, with the
// weight each gives it (the forward's l0 and/or l1; 0 for an index that does not read i or lies
// outside the output). For x2 they lie in [2i - 1, 2i + 2]. Fixed size, so that unrolled loops
// keep it in registers.
struct Taps {
  int o[4];
  float wt[4];
};
__device__ __forceinline__ Taps TapsOf(int i, int in, int out, float scale) {
  Taps taps;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int o = 2 * i + k - 1;
    taps.o[k] = o < 0 ? 0 : (o >= out ? out - 1 : o);
    taps.wt[k] = 0.f;
    if (o < 0 || o >= out) continue;
    const Source s = SourceOf(o, in, scale);
    taps.wt[k] = (s.i0 == i ? s.l0 : 0.f) + (s.i0 + s.ip == i ? s.l1 : 0.f);
  }
  return taps;
}

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    medprof_upsample_x2_bwd(const T* __restrict__ dy, T* __restrict__ dx, int n, int d, int h, int w, int c, I total) {
  const int c4 = c / kV, od = 2 * d, oh = 2 * h, ow = 2 * w;
  const float sd = static_cast<float>(d) / od, sh = static_cast<float>(h) / oh, sw = static_cast<float>(w) / ow;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    const int cv = static_cast<int>(i % c4);
    const Voxel<I> in = VoxelOf<I>(i / c4, d, h, w);
    const I nn = in.n;
    const Taps tz = TapsOf(in.z, d, od, sd), ty = TapsOf(in.y, h, oh, sh), tx = TapsOf(in.x, w, ow, sw);
    float acc[kV] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      if (tz.wt[a] == 0.f) continue;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        if (ty.wt[b] == 0.f) continue;
        const float wzy = tz.wt[a] * ty.wt[b];
        const T* row = dy + ((nn * od + tz.o[a]) * oh + ty.o[b]) * static_cast<I>(ow) * c + cv * kV;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          if (tx.wt[e] == 0.f) continue;
          float g[kV];
          Load<T, kV>(row + static_cast<I>(tx.o[e]) * c, g);
          const float wt = wzy * tx.wt[e];
#pragma unroll
          for (int k = 0; k < kV; ++k) acc[k] += wt * g[k];
        }
      }
    }
    Store<T, kV>(dx + i * kV, acc);
  }
}

// ---- kernel-3 conv with few output channels: backward ------------------------------------

// dx[q, c] = sum_{o, t} W[o, c, t] dy[q - off_t, o]; W staged in shared memory as [o][t][c].
template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    medprof_conv3x3_small_dgrad(const T* __restrict__ dy, const float* __restrict__ w, T* __restrict__ dx, int n,
                                int d, int h, int wd, int c, int outs, I total) {
  extern __shared__ float4 shared4[];
  float* sw = reinterpret_cast<float*>(shared4);
  for (int k = threadIdx.x; k < outs * 27 * c; k += blockDim.x) {
    const int cc = k % c, t = (k / c) % 27, o = k / (27 * c);
    sw[k] = w[(o * c + cc) * 27 + t];
  }
  __syncthreads();
  const int c4 = c / kV;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<I>(gridDim.x) * blockDim.x) {
    const int cv = static_cast<int>(i % c4);
    const Voxel<I> q = VoxelOf<I>(i / c4, d, h, wd);
    const I nn = q.n;
    const int z0 = q.z, y0 = q.y, x0 = q.x;
    float acc[kV] = {0.f, 0.f, 0.f, 0.f};
    for (int kd = 0; kd < 3; ++kd) {
      const int z = z0 - (kd - 1);
      if (z < 0 || z >= d) continue;
      for (int kh = 0; kh < 3; ++kh) {
        const int yy = y0 - (kh - 1);
        if (yy < 0 || yy >= h) continue;
        const I row = ((nn * d + z) * h + yy) * static_cast<I>(wd);
#pragma unroll
        for (int kw = 0; kw < 3; ++kw) {
          const int xx = x0 - (kw - 1);
          if (xx < 0 || xx >= wd) continue;
          const int t = kd * 9 + kh * 3 + kw;
          const T* g = dy + (row + xx) * outs;
          for (int o = 0; o < outs; ++o) {
            const float gv = ToF(g[o]);
            const float4 wv = *reinterpret_cast<const float4*>(sw + (o * 27 + t) * c + cv * kV);
            acc[0] += gv * wv.x;
            acc[1] += gv * wv.y;
            acc[2] += gv * wv.z;
            acc[3] += gv * wv.w;
          }
        }
      }
    }
    Store<T, kV>(dx + i * kV, acc);
  }
}

// partial[b, o, c, t] = the block's sum over its voxels q of x[q, c] dy[q - off_t, o]. Lane l of a
// row: C4 group l % c4, kd = (l / c4) % 3, o = l / (3 c4); the block's rows take consecutive
// voxels, the grid strides over the volume.
template <typename T, typename I>
__global__ void __launch_bounds__(kMaxWgradLanes, 2)
    medprof_conv3x3_small_wgrad(const T* __restrict__ x, const T* __restrict__ dy, float* __restrict__ partial,
                                int n, int d, int h, int wd, int c, int outs, int lanes, int rows, I voxels) {
  const int l = threadIdx.x % lanes, p = threadIdx.x / lanes;
  const int c4 = c / kV, cv = l % c4, kd = (l / c4) % 3, o = l / (3 * c4);
  float acc[kTapsPerLane][kV];
#pragma unroll
  for (int t = 0; t < kTapsPerLane; ++t) {
#pragma unroll
    for (int k = 0; k < kV; ++k) acc[t][k] = 0.f;
  }
  for (I q = static_cast<I>(blockIdx.x) * rows + p; q < voxels; q += static_cast<I>(gridDim.x) * rows) {
    const Voxel<I> v = VoxelOf<I>(q, d, h, wd);
    const I nn = v.n;
    const int z0 = v.z, y0 = v.y, x0 = v.x;
    const int z = z0 - (kd - 1);
    if (z < 0 || z >= d) continue;
    float xv[kV];
    Load<T, kV>(x + q * c + cv * kV, xv);
#pragma unroll
    for (int kh = 0; kh < 3; ++kh) {
      const int yy = y0 - (kh - 1);
      if (yy < 0 || yy >= h) continue;
      const I row = ((nn * d + z) * h + yy) * static_cast<I>(wd);
#pragma unroll
      for (int kw = 0; kw < 3; ++kw) {
        const int xx = x0 - (kw - 1);
        if (xx < 0 || xx >= wd) continue;
        const float g = ToF(dy[(row + xx) * outs + o]);
#pragma unroll
        for (int k = 0; k < kV; ++k) acc[kh * 3 + kw][k] += xv[k] * g;
      }
    }
  }
  // The block's rows summed in order through shared memory; row 0 writes the block's partial.
  extern __shared__ float4 shared4[];
  float* red = reinterpret_cast<float*>(shared4);
  float* mine = red + (static_cast<int64_t>(p) * lanes + l) * (kTapsPerLane * kV);
#pragma unroll
  for (int t = 0; t < kTapsPerLane; ++t) {
#pragma unroll
    for (int k = 0; k < kV; ++k) mine[t * kV + k] = acc[t][k];
  }
  __syncthreads();
  if (p != 0) return;
  float* out = partial + (static_cast<int64_t>(blockIdx.x) * outs + o) * c * 27;
  for (int j = 0; j < kTapsPerLane * kV; ++j) {
    float s = 0.f;
    for (int pp = 0; pp < rows; ++pp) s += red[(static_cast<int64_t>(pp) * lanes + l) * (kTapsPerLane * kV) + j];
    const int t = j / kV, k = j % kV;
    out[(cv * kV + k) * 27 + kd * 9 + t] = s;
  }
}

// dw[e] = sum over blocks of partial[b, e], e < outs * c * 27, in FP64, blocks in order.
__global__ void __launch_bounds__(kThreads)
    medprof_conv3x3_small_wgrad_finalize(const float* __restrict__ partial, float* __restrict__ dw, int elements,
                                         int blocks) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= elements) return;
  double s = 0.0;
  for (int b = 0; b < blocks; ++b) s += partial[static_cast<int64_t>(b) * elements + e];
  dw[e] = static_cast<float>(s);
}

// ---- launch helpers ----------------------------------------------------------------------

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

unsigned GridFor(int64_t threads) {
  const int64_t blocks = (threads + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{1} << 20));  // grid-stride above
}

template <typename X>
struct Tag {
  using type = X;
};

// Runs f(Tag<T>, Tag<I>) with T from dtype and I 32-bit when `elements` < 2^31.
template <typename F>
cudaError_t Dispatch(DType dtype, int64_t elements, F&& f) {
  const bool small = elements < (int64_t{1} << 31);
  if (dtype == DType::kF32) return small ? f(Tag<float>{}, Tag<uint32_t>{}) : f(Tag<float>{}, Tag<int64_t>{});
  return small ? f(Tag<__nv_bfloat16>{}, Tag<uint32_t>{}) : f(Tag<__nv_bfloat16>{}, Tag<int64_t>{});
}

struct WgradPlan {
  int lanes = 0, rows = 0;
};
WgradPlan PlanWgrad(const Volume& x, int64_t outs) {
  WgradPlan p;
  p.lanes = static_cast<int>(outs * 3 * (x.c / kV));
  p.rows = std::max(1, kMaxWgradLanes / std::max(p.lanes, 1));
  return p;
}

std::string VolumeProblem(const Volume& v) {
  if (v.n < 1 || v.d < 1 || v.h < 1 || v.w < 1 || v.c < 1) return "empty volume";
  if (v.c % kV != 0) return "channels " + std::to_string(v.c) + " not a multiple of 4";
  if (v.d > (1 << 29) || v.h > (1 << 29) || v.w > (1 << 29) || v.c > (1 << 29)) return "a dimension above 2^29";
  return "";
}

}  // namespace

std::string UnsupportedUpsample(const Volume& in) { return VolumeProblem(in); }

cudaError_t UpsampleX2Forward(const Volume& in, DType dtype, const void* x, void* y, cudaStream_t stream) {
  if (!UnsupportedUpsample(in).empty() || !Aligned16(x) || !Aligned16(y)) return cudaErrorInvalidValue;
  const int64_t threads = in.voxels() * 8 * (in.c / kV);
  return Dispatch(dtype, threads * kV, [&](auto tt, auto ti) {
    using T = typename decltype(tt)::type;
    using I = typename decltype(ti)::type;
    medprof_upsample_x2_fwd<T, I><<<GridFor(threads), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), static_cast<int>(in.n), static_cast<int>(in.d),
        static_cast<int>(in.h), static_cast<int>(in.w), static_cast<int>(in.c), static_cast<I>(threads));
    return cudaGetLastError();
  });
}

cudaError_t UpsampleX2Backward(const Volume& in, DType dtype, const void* dy, void* dx, cudaStream_t stream) {
  if (!UnsupportedUpsample(in).empty() || !Aligned16(dy) || !Aligned16(dx)) return cudaErrorInvalidValue;
  const int64_t threads = in.voxels() * (in.c / kV);
  return Dispatch(dtype, in.numel() * 8, [&](auto tt, auto ti) {
    using T = typename decltype(tt)::type;
    using I = typename decltype(ti)::type;
    medprof_upsample_x2_bwd<T, I><<<GridFor(threads), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<T*>(dx), static_cast<int>(in.n), static_cast<int>(in.d),
        static_cast<int>(in.h), static_cast<int>(in.w), static_cast<int>(in.c), static_cast<I>(threads));
    return cudaGetLastError();
  });
}

std::string UnsupportedSmallConv(const Volume& x, int64_t out_channels) {
  if (std::string why = VolumeProblem(x); !why.empty()) return why;
  if (out_channels < 1 || out_channels > kMaxSmallOut) {
    return "output channels " + std::to_string(out_channels) + " outside 1.." + std::to_string(kMaxSmallOut);
  }
  if (PlanWgrad(x, out_channels).lanes > kMaxWgradLanes) {
    return "output channels x input channels " + std::to_string(out_channels * x.c) + " above " +
           std::to_string(kMaxWgradLanes * kV / 3);
  }
  return "";
}

int SmallConvWgradBlocks(const Volume& x, int64_t out_channels, int sm_count) {
  const WgradPlan p = PlanWgrad(x, out_channels);
  const int64_t needed = (x.voxels() + p.rows - 1) / std::max(p.rows, 1);
  return static_cast<int>(std::clamp<int64_t>(needed, 1, 4 * static_cast<int64_t>(std::max(sm_count, 1))));
}

int64_t SmallConvWorkspaceFloats(const Volume& x, int64_t out_channels, int sm_count) {
  return static_cast<int64_t>(SmallConvWgradBlocks(x, out_channels, sm_count)) * out_channels * x.c * 27;
}

cudaError_t SmallConvBackward(const Volume& x, int64_t out_channels, DType dtype, const SmallConvBackwardArgs& a,
                              cudaStream_t stream) {
  if (!UnsupportedSmallConv(x, out_channels).empty() || a.x == nullptr || a.dy == nullptr || a.w == nullptr ||
      (a.dx != nullptr && (!Aligned16(a.dx) || !Aligned16(a.dy))) || !Aligned16(a.x) ||
      (a.dw != nullptr && (a.workspace == nullptr || a.sm_count < 1))) {
    return cudaErrorInvalidValue;
  }
  const int outs = static_cast<int>(out_channels);
  const int n = static_cast<int>(x.n), d = static_cast<int>(x.d), h = static_cast<int>(x.h),
            w = static_cast<int>(x.w), c = static_cast<int>(x.c);
  if (a.dx != nullptr) {
    const int64_t threads = x.voxels() * (c / kV);
    const size_t shared = static_cast<size_t>(outs) * 27 * c * sizeof(float);
    const cudaError_t err = Dispatch(dtype, x.numel(), [&](auto tt, auto ti) {
    using T = typename decltype(tt)::type;
    using I = typename decltype(ti)::type;
      medprof_conv3x3_small_dgrad<T, I><<<GridFor(threads), kThreads, shared, stream>>>(
          static_cast<const T*>(a.dy), a.w, static_cast<T*>(a.dx), n, d, h, w, c, outs, static_cast<I>(threads));
      return cudaGetLastError();
    });
    if (err != cudaSuccess) return err;
  }
  if (a.dw != nullptr) {
    const WgradPlan p = PlanWgrad(x, out_channels);
    const int blocks = SmallConvWgradBlocks(x, out_channels, a.sm_count);
    const size_t shared = static_cast<size_t>(p.rows) * p.lanes * kTapsPerLane * kV * sizeof(float);
    cudaError_t err = Dispatch(dtype, x.numel(), [&](auto tt, auto ti) {
    using T = typename decltype(tt)::type;
    using I = typename decltype(ti)::type;
      medprof_conv3x3_small_wgrad<T, I><<<static_cast<unsigned>(blocks), p.lanes * p.rows, shared, stream>>>(
          static_cast<const T*>(a.x), static_cast<const T*>(a.dy), a.workspace, n, d, h, w, c, outs, p.lanes, p.rows,
          static_cast<I>(x.voxels()));
      return cudaGetLastError();
    });
    if (err != cudaSuccess) return err;
    const int elements = outs * c * 27;
    medprof_conv3x3_small_wgrad_finalize<<<static_cast<unsigned>((elements + kThreads - 1) / kThreads), kThreads, 0,
                                           stream>>>(a.workspace, a.dw, elements, blocks);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace medprof::meddpm::vk
