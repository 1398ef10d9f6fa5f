// Fused GroupNorm (+ SiLU, + embedding add) kernels: see group_norm_kernels.h for the math.
//
// Launch shapes (B = batch n, C channels, S spatial, P = splits per (n, c)):
//   stats / bwd stats, kNCS   grid (B*C, P), 256 threads over one contiguous chunk of a plane
//   stats / bwd stats, kNSC   grid (B*ceil(C/32), P), 32 channel lanes x 8 spatial rows
//   finalize                  grid (B*G), one warp: FP64 combine of the P*Cg partial states
//   bwd finalize              grid (G), one warp looping over the batch (no atomics)
//   apply / bwd apply         grid-stride elementwise, 4 elements per thread where aligned
// Per-thread statistics are shifted sums (shift = the chunk's first element) turned into a
// Welford state, then combined with Chan's formula: as accurate as a per-element Welford loop
// at the cost of two FMAs per element.
#include "workloads/meddpm/cuda/group_norm_kernels.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "workloads/meddpm/cuda/element_access.cuh"

namespace medprof::meddpm::gn {
namespace {

using access::FromF;
using access::Load;
using access::Store;
using access::ToF;

constexpr int kRows = kThreads / kLanes;  // kNSC statistics: spatial rows per block

// ---- reductions --------------------------------------------------------------------------

// Compensated (Kahan) FP32 sum: a lane of the channels-last backward statistics adds hundreds of
// terms in a row, and a plain FP32 running sum made dgamma/dbeta up to 3x less accurate than
// LibTorch's tree reduction on the H200 (bench/results/h200-fused-2026-12-03). Memory-bound
// kernels, so the three extra adds are free. nvcc keeps FP32 adds unreassociated without
// --use_fast_math.
struct Kahan {
  float sum = 0.f, comp = 0.f;
  __device__ __forceinline__ void Add(float v) {
    const float y = v - comp;
    const float t = sum + y;
    comp = (t - sum) - y;
    sum = t;
  }
};

template <typename F>
__device__ __forceinline__ Welford<F> WarpCombine(Welford<F> w) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    Welford<F> o;
    o.n = __shfl_down_sync(0xffffffffu, w.n, offset);
    o.mean = __shfl_down_sync(0xffffffffu, w.mean, offset);
    o.m2 = __shfl_down_sync(0xffffffffu, w.m2, offset);
    w = Combine(w, o);
  }
  return w;
}

__device__ __forceinline__ float2 WarpSum(float2 v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    v.x += __shfl_down_sync(0xffffffffu, v.x, offset);
    v.y += __shfl_down_sync(0xffffffffu, v.y, offset);
  }
  return v;
}

__device__ __forceinline__ double WarpSumD(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// Whole-block combine of a 1-D block of kThreads; the result is valid in thread 0.
__device__ Welford<float> BlockCombine(Welford<float> w) {
  __shared__ Welford<float> warps[kThreads / 32];
  w = WarpCombine(w);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warps[warp] = w;
  __syncthreads();
  if (warp == 0) {
    w = lane < kThreads / 32 ? warps[lane] : Welford<float>{0.f, 0.f, 0.f};
    w = WarpCombine(w);
  }
  return w;
}

__device__ float2 BlockSum(float2 v) {
  __shared__ float2 warps[kThreads / 32];
  v = WarpSum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warps[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? warps[lane] : make_float2(0.f, 0.f);
    v = WarpSum(v);
  }
  return v;
}

// ---- forward -----------------------------------------------------------------------------

// part[(n*C + c) * splits + split] = (mean, m2) of chunk `split` of plane (n, c).
template <typename T, int V>
__global__ void __launch_bounds__(kThreads)
    medprof_group_norm_stats_ncs(const T* __restrict__ x, int64_t S, int64_t chunk, float2* __restrict__ part) {
  const int64_t nc = blockIdx.x;
  const int split = blockIdx.y;
  const int64_t begin = split * chunk, end = min(S, begin + chunk);
  const T* p = x + nc * S;
  const float shift = ToF(p[begin]);
  float s1 = 0.f, s2 = 0.f, count = 0.f;
  for (int64_t i = begin + V * threadIdx.x; i < end; i += V * kThreads) {
    float v[V];
    Load<T, V>(p + i, v);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float d = v[k] - shift;
      s1 += d;
      s2 = fmaf(d, d, s2);
    }
    count += V;
  }
  const Welford<float> w = BlockCombine(FromShifted(count, shift, s1, s2));
  if (threadIdx.x == 0) part[nc * gridDim.y + split] = make_float2(w.mean, w.m2);
}

// Channels last: lane = channel within a 32-channel tile, row = spatial position modulo 8.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    medprof_group_norm_stats_nsc(const T* __restrict__ x, int64_t S, int64_t C, int64_t chunk,
                                 float2* __restrict__ part) {
  __shared__ Welford<float> rows[kRows][kLanes + 1];
  const int lane = threadIdx.x % kLanes, row = threadIdx.x / kLanes;
  const int64_t tiles = (C + kLanes - 1) / kLanes;
  const int64_t n = blockIdx.x / tiles, c = (blockIdx.x % tiles) * kLanes + lane;
  const int split = blockIdx.y;
  const int64_t begin = split * chunk, end = min(S, begin + chunk);
  Welford<float> w{0.f, 0.f, 0.f};
  if (c < C) {
    const T* p = x + n * S * C + c;
    const float shift = ToF(p[begin * C]);
    float s1 = 0.f, s2 = 0.f, count = 0.f;
    int64_t s = begin + row;
    // Four rows' loads in flight per lane (a warp's load is only 32 channels wide).
    for (; s + 3 * kRows < end; s += 4 * kRows) {
      float v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = ToF(p[(s + k * kRows) * C]);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float d = v[k] - shift;
        s1 += d;
        s2 = fmaf(d, d, s2);
      }
      count += 4.f;
    }
    for (; s < end; s += kRows) {
      const float d = ToF(p[s * C]) - shift;
      s1 += d;
      s2 = fmaf(d, d, s2);
      count += 1.f;
    }
    w = FromShifted(count, shift, s1, s2);
  }
  rows[row][lane] = w;
  __syncthreads();
  if (row == 0 && c < C) {
#pragma unroll
    for (int r = 1; r < kRows; ++r) w = Combine(w, rows[r][lane]);
    part[(n * C + c) * gridDim.y + split] = make_float2(w.mean, w.m2);
  }
}

// One warp per (n, g): FP64 combine of the partials of the group's channels.
__global__ void __launch_bounds__(32)
    medprof_group_norm_finalize(const float2* __restrict__ part, int64_t S, int64_t C, int64_t G, int64_t chunk,
                                int splits, const float* __restrict__ gamma, const float* __restrict__ beta,
                                const float* __restrict__ emb, float eps, float* __restrict__ mean,
                                float* __restrict__ rstd, float* __restrict__ scale, float* __restrict__ shift,
                                float* __restrict__ chan_mean) {
  const int64_t ng = blockIdx.x, n = ng / G, g = ng % G, cg = C / G;
  const int lane = threadIdx.x;
  Welford<double> group{0.0, 0.0, 0.0};
  for (int64_t j = lane; j < cg; j += 32) {
    const int64_t c = g * cg + j;
    Welford<double> chan{0.0, 0.0, 0.0};
    for (int k = 0; k < splits; ++k) {
      const float2 pk = part[(n * C + c) * splits + k];
      chan = Combine(chan, Welford<double>{static_cast<double>(ChunkCount(S, chunk, k)), pk.x, pk.y});
    }
    chan.mean += emb != nullptr ? emb[n * C + c] : 0.0;  // a constant per channel: m2 unchanged
    chan_mean[n * C + c] = static_cast<float>(chan.mean);
    group = Combine(group, chan);
  }
  group = WarpCombine(group);
  const double mu = __shfl_sync(0xffffffffu, group.mean, 0);
  const double m2 = __shfl_sync(0xffffffffu, group.m2, 0);
  const double r = Rstd(m2, static_cast<double>(cg) * static_cast<double>(S), static_cast<double>(eps));
  if (lane == 0) {
    mean[ng] = static_cast<float>(mu);
    rstd[ng] = static_cast<float>(r);
  }
  for (int64_t j = lane; j < cg; j += 32) {
    const int64_t c = g * cg + j;
    const ForwardCoef k = ForwardCoefficients(mu, r, gamma != nullptr ? gamma[c] : 1.0f,
                                              beta != nullptr ? beta[c] : 0.0f, emb != nullptr ? emb[n * C + c] : 0.0f);
    scale[n * C + c] = static_cast<float>(k.scale);
    shift[n * C + c] = static_cast<float>(k.shift);
  }
}

// Index of the (n, c) coefficient of element i; for kNSC with V == 4, C % 4 == 0 so the V
// elements are V consecutive channels of one position.
template <bool NSC, typename I>
__device__ __forceinline__ I CoefIndex(I i, I S, I C) {
  if (NSC) return (i / (S * C)) * C + i % C;
  return i / S;
}

template <typename T, bool SILU, bool NSC, int V, typename I>
__global__ void __launch_bounds__(kThreads)
    medprof_group_norm_silu_apply(const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ scale,
                                  const float* __restrict__ shift, I total, I S, I C) {
  const I vectors = total / V;
  for (I v = blockIdx.x * static_cast<I>(kThreads) + threadIdx.x; v < vectors;
       v += static_cast<I>(gridDim.x) * kThreads) {
    const I i = v * V;
    const I k = CoefIndex<NSC>(i, S, C);
    float val[V];
    Load<T, V>(x + i, val);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const I kj = NSC ? k + j : k;
      const float z = fmaf(val[j], scale[kj], shift[kj]);
      val[j] = SILU ? Silu(z) : z;
    }
    Store<T, V>(y + i, val);
  }
}

// ---- backward ----------------------------------------------------------------------------

// part[(n*C + c) * splits + split] = (sum dz * xhat, sum dz) over the chunk.
template <typename T, bool SILU, int V>
__global__ void __launch_bounds__(kThreads)
    medprof_group_norm_bwd_stats_ncs(const T* __restrict__ dy, const T* __restrict__ x, int64_t S, int64_t C,
                                     int64_t G, int64_t chunk, const float* __restrict__ scale,
                                     const float* __restrict__ shift, const float* __restrict__ mean,
                                     const float* __restrict__ rstd, const float* __restrict__ emb,
                                     float2* __restrict__ part) {
  const int64_t nc = blockIdx.x, n = nc / C, c = nc % C, ng = n * G + c / (C / G);
  const int split = blockIdx.y;
  const int64_t begin = split * chunk, end = min(S, begin + chunk);
  const float a = scale[nc], b = shift[nc], r = rstd[ng];
  const float h = ((emb != nullptr ? emb[nc] : 0.f) - mean[ng]) * r;  // xhat = x * r + h
  const T* px = x + nc * S;
  const T* pdy = dy + nc * S;
  Kahan sx, sy;
  for (int64_t i = begin + V * threadIdx.x; i < end; i += V * kThreads) {
    float xv[V], gv[V];
    Load<T, V>(px + i, xv);
    Load<T, V>(pdy + i, gv);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float dz = SILU ? gv[k] * SiluGrad(fmaf(a, xv[k], b)) : gv[k];
      sx.Add(dz * fmaf(xv[k], r, h));
      sy.Add(dz);
    }
  }
  const float2 acc = BlockSum(make_float2(sx.sum, sy.sum));
  if (threadIdx.x == 0) part[nc * gridDim.y + split] = acc;
}

template <typename T, bool SILU>
__global__ void __launch_bounds__(kThreads)
    medprof_group_norm_bwd_stats_nsc(const T* __restrict__ dy, const T* __restrict__ x, int64_t S, int64_t C,
                                     int64_t G, int64_t chunk, const float* __restrict__ scale,
                                     const float* __restrict__ shift, const float* __restrict__ mean,
                                     const float* __restrict__ rstd, const float* __restrict__ emb,
                                     float2* __restrict__ part) {
  __shared__ float2 rows[kRows][kLanes + 1];
  const int lane = threadIdx.x % kLanes, row = threadIdx.x / kLanes;
  const int64_t tiles = (C + kLanes - 1) / kLanes;
  const int64_t n = blockIdx.x / tiles, c = (blockIdx.x % tiles) * kLanes + lane;
  const int split = blockIdx.y;
  const int64_t begin = split * chunk, end = min(S, begin + chunk);
  float2 acc = make_float2(0.f, 0.f);
  if (c < C) {
    const int64_t nc = n * C + c, ng = n * G + c / (C / G);
    const float a = scale[nc], b = shift[nc], r = rstd[ng];
    const float h = ((emb != nullptr ? emb[nc] : 0.f) - mean[ng]) * r;
    const T* px = x + n * S * C + c;
    const T* pdy = dy + n * S * C + c;
    Kahan sx, sy;
    int64_t s = begin + row;
    for (; s + kRows < end; s += 2 * kRows) {  // two rows of x and dy in flight per lane
      float xv[2], gv[2];
#pragma unroll
      for (int k = 0; k < 2; ++k) xv[k] = ToF(px[(s + k * kRows) * C]), gv[k] = ToF(pdy[(s + k * kRows) * C]);
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const float dz = SILU ? gv[k] * SiluGrad(fmaf(a, xv[k], b)) : gv[k];
        sx.Add(dz * fmaf(xv[k], r, h));
        sy.Add(dz);
      }
    }
    for (; s < end; s += kRows) {
      const float xv = ToF(px[s * C]), gv = ToF(pdy[s * C]);
      const float dz = SILU ? gv * SiluGrad(fmaf(a, xv, b)) : gv;
      sx.Add(dz * fmaf(xv, r, h));
      sy.Add(dz);
    }
    acc = make_float2(sx.sum, sy.sum);
  }
  rows[row][lane] = acc;
  __syncthreads();
  if (row == 0 && c < C) {
#pragma unroll
    for (int r = 1; r < kRows; ++r) acc.x += rows[r][lane].x, acc.y += rows[r][lane].y;
    part[(n * C + c) * gridDim.y + split] = acc;
  }
}

// One warp per group, looping over the batch: dx = alpha*dz + betap*x + kappa per (n, c), and
// dgamma, dbeta, d e. With M = Cg*S, A = sum_c gamma_c sum(dz xhat), B = sum_c gamma_c sum(dz):
//   dx = r gamma dz - r B/M - r^2 (A/M) (x + e - mean)
__global__ void __launch_bounds__(32)
    medprof_group_norm_bwd_finalize(const float2* __restrict__ part, int64_t N, int64_t S, int64_t C, int64_t G,
                                    int splits, const float* __restrict__ gamma, const float* __restrict__ emb,
                                    const float* __restrict__ mean, const float* __restrict__ rstd,
                                    const float* __restrict__ chan_mean, float* __restrict__ alpha,
                                    float* __restrict__ betap, float* __restrict__ kappa, float* __restrict__ dgamma,
                                    float* __restrict__ dbeta, float* __restrict__ demb) {
  const int64_t g = blockIdx.x, cg = C / G;
  const int lane = threadIdx.x;
  const double m = static_cast<double>(cg) * static_cast<double>(S);
  auto sums = [&](int64_t n, int64_t c, double* s1, double* s2) {
    *s1 = 0.0, *s2 = 0.0;
    for (int k = 0; k < splits; ++k) {
      const float2 pk = part[(n * C + c) * splits + k];
      *s1 += pk.x, *s2 += pk.y;
    }
  };
  for (int64_t n = 0; n < N; ++n) {
    double A = 0.0, B = 0.0;
    for (int64_t j = lane; j < cg; j += 32) {
      const int64_t c = g * cg + j;
      double s1, s2;
      sums(n, c, &s1, &s2);
      const double gam = gamma != nullptr ? gamma[c] : 1.0f;
      A += gam * s1, B += gam * s2;
      // The same lane owns channel c for every n: accumulating here is race-free.
      if (dgamma != nullptr) dgamma[c] = static_cast<float>((n == 0 ? 0.0 : dgamma[c]) + s1);
      if (dbeta != nullptr) dbeta[c] = static_cast<float>((n == 0 ? 0.0 : dbeta[c]) + s2);
    }
    A = __shfl_sync(0xffffffffu, WarpSumD(A), 0);
    B = __shfl_sync(0xffffffffu, WarpSumD(B), 0);
    const double r = rstd[n * G + g], mu = mean[n * G + g];
    for (int64_t j = lane; j < cg; j += 32) {
      const int64_t c = g * cg + j, nc = n * C + c;
      const double e = emb != nullptr ? emb[nc] : 0.0;
      const BackwardCoef k = BackwardCoefficients(r, mu, gamma != nullptr ? gamma[c] : 1.0f, e, A, B, m);
      alpha[nc] = static_cast<float>(k.alpha);
      betap[nc] = static_cast<float>(k.betap);
      kappa[nc] = static_cast<float>(k.kappa);
      if (demb != nullptr) {
        double s1, s2;
        sums(n, c, &s1, &s2);
        demb[nc] = static_cast<float>(EmbGrad(k, s2, chan_mean[nc], e, static_cast<double>(S)));
      }
    }
  }
}

template <typename T, bool SILU, bool NSC, int V, typename I>
__global__ void __launch_bounds__(kThreads)
    medprof_group_norm_silu_bwd_apply(const T* dy, const T* __restrict__ x, T* dx, const float* __restrict__ scale,
                                      const float* __restrict__ shift, const float* __restrict__ alpha,
                                      const float* __restrict__ betap, const float* __restrict__ kappa, I total,
                                      I S, I C) {
  const I vectors = total / V;
  for (I v = blockIdx.x * static_cast<I>(kThreads) + threadIdx.x; v < vectors;
       v += static_cast<I>(gridDim.x) * kThreads) {
    const I i = v * V;
    const I k = CoefIndex<NSC>(i, S, C);
    float xv[V], gv[V];
    Load<T, V>(x + i, xv);
    Load<T, V>(dy + i, gv);  // dx may alias dy: read everything before writing
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const I kj = NSC ? k + j : k;
      const float dz = SILU ? gv[j] * SiluGrad(fmaf(scale[kj], xv[j], shift[kj])) : gv[j];
      gv[j] = fmaf(alpha[kj], dz, fmaf(betap[kj], xv[j], kappa[kj]));
    }
    Store<T, V>(dx + i, gv);
  }
}

// ---- host side ---------------------------------------------------------------------------

bool Aligned(const void* p, DType t) {
  const uintptr_t bytes = t == DType::kF32 ? 16 : 8;
  return p == nullptr || reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

int ApplyBlocks(int64_t vectors, int sm_count) {
  const int64_t need = (vectors + kThreads - 1) / kThreads;
  return static_cast<int>(std::clamp<int64_t>(need, 1, 16 * static_cast<int64_t>(std::max(sm_count, 1))));
}

template <typename T, bool SILU, bool NSC, int V, typename I>
void LaunchApply(const Shape& s, const ForwardArgs& a, int sm, cudaStream_t stream) {
  const I total = static_cast<I>(s.n * s.c * s.s);
  medprof_group_norm_silu_apply<T, SILU, NSC, V, I><<<ApplyBlocks(total / V, sm), kThreads, 0, stream>>>(
      static_cast<const T*>(a.x), static_cast<T*>(a.y), a.scale, a.shift, total, static_cast<I>(s.s),
      static_cast<I>(s.c));
}

template <typename T, bool SILU, bool NSC, int V, typename I>
void LaunchBwdApply(const Shape& s, const BackwardArgs& a, const float* alpha, const float* betap, const float* kappa,
                    int sm, cudaStream_t stream) {
  const I total = static_cast<I>(s.n * s.c * s.s);
  medprof_group_norm_silu_bwd_apply<T, SILU, NSC, V, I><<<ApplyBlocks(total / V, sm), kThreads, 0, stream>>>(
      static_cast<const T*>(a.dy), static_cast<const T*>(a.x), static_cast<T*>(a.dx), a.scale, a.shift, alpha, betap,
      kappa, total, static_cast<I>(s.s), static_cast<I>(s.c));
}

// Picks the vector width and index type for the elementwise passes.
template <typename T, bool SILU, bool NSC, typename Fn4u, typename Fn4l, typename Fn1u, typename Fn1l>
void Dispatch(const Shape& s, bool aligned, Fn4u f4u, Fn4l f4l, Fn1u f1u, Fn1l f1l) {
  const bool vec = aligned && (NSC ? s.c % 4 == 0 : s.s % 4 == 0);
  // 32-bit indices only while a grid-stride step past the end cannot wrap: total + stride stays
  // below 2^32 because both are below 2^31 (the grid is far smaller than 2^31 threads).
  const bool small = s.n * s.c * s.s < (int64_t{1} << 31);
  if (vec && small) f4u();
  else if (vec) f4l();
  else if (small) f1u();
  else f1l();
}

template <typename T, bool SILU, bool NSC>
cudaError_t ForwardT(const Shape& s, const ForwardArgs& a, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  const int sm = CurrentDeviceSmCount(&err);
  if (err != cudaSuccess) return err;
  const Plan plan = MakePlan(s, sm);
  auto* part = reinterpret_cast<float2*>(a.workspace);
  const T* x = static_cast<const T*>(a.x);
  const bool aligned = Aligned(a.x, s.dtype) && Aligned(a.y, s.dtype);
  if (NSC) {
    const dim3 grid(static_cast<unsigned>(s.n * ((s.c + kLanes - 1) / kLanes)), plan.splits);
    medprof_group_norm_stats_nsc<T><<<grid, kThreads, 0, stream>>>(x, s.s, s.c, plan.chunk, part);
  } else {
    const dim3 grid(static_cast<unsigned>(s.n * s.c), plan.splits);
    if (aligned && s.s % 4 == 0) {
      medprof_group_norm_stats_ncs<T, 4><<<grid, kThreads, 0, stream>>>(x, s.s, plan.chunk, part);
    } else {
      medprof_group_norm_stats_ncs<T, 1><<<grid, kThreads, 0, stream>>>(x, s.s, plan.chunk, part);
    }
  }
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  medprof_group_norm_finalize<<<static_cast<unsigned>(s.n * s.groups), 32, 0, stream>>>(
      part, s.s, s.c, s.groups, plan.chunk, plan.splits, a.gamma, a.beta, a.emb, a.eps, a.mean, a.rstd, a.scale,
      a.shift, a.chan_mean);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  Dispatch<T, SILU, NSC>(
      s, aligned, [&] { LaunchApply<T, SILU, NSC, 4, uint32_t>(s, a, sm, stream); },
      [&] { LaunchApply<T, SILU, NSC, 4, int64_t>(s, a, sm, stream); },
      [&] { LaunchApply<T, SILU, NSC, 1, uint32_t>(s, a, sm, stream); },
      [&] { LaunchApply<T, SILU, NSC, 1, int64_t>(s, a, sm, stream); });
  return cudaGetLastError();
}

template <typename T, bool SILU, bool NSC>
cudaError_t BackwardT(const Shape& s, const BackwardArgs& a, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  const int sm = CurrentDeviceSmCount(&err);
  if (err != cudaSuccess) return err;
  const Plan plan = MakePlan(s, sm);
  auto* part = reinterpret_cast<float2*>(a.workspace);
  float* alpha = a.workspace + WorkspaceFloats(s, sm);
  float* betap = alpha + s.n * s.c;
  float* kappa = betap + s.n * s.c;
  const T* x = static_cast<const T*>(a.x);
  const T* dy = static_cast<const T*>(a.dy);
  const bool aligned = Aligned(a.x, s.dtype) && Aligned(a.dy, s.dtype) && Aligned(a.dx, s.dtype);
  if (NSC) {
    const dim3 grid(static_cast<unsigned>(s.n * ((s.c + kLanes - 1) / kLanes)), plan.splits);
    medprof_group_norm_bwd_stats_nsc<T, SILU><<<grid, kThreads, 0, stream>>>(
        dy, x, s.s, s.c, s.groups, plan.chunk, a.scale, a.shift, a.mean, a.rstd, a.emb, part);
  } else {
    const dim3 grid(static_cast<unsigned>(s.n * s.c), plan.splits);
    if (aligned && s.s % 4 == 0) {
      medprof_group_norm_bwd_stats_ncs<T, SILU, 4><<<grid, kThreads, 0, stream>>>(
          dy, x, s.s, s.c, s.groups, plan.chunk, a.scale, a.shift, a.mean, a.rstd, a.emb, part);
    } else {
      medprof_group_norm_bwd_stats_ncs<T, SILU, 1><<<grid, kThreads, 0, stream>>>(
          dy, x, s.s, s.c, s.groups, plan.chunk, a.scale, a.shift, a.mean, a.rstd, a.emb, part);
    }
  }
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  medprof_group_norm_bwd_finalize<<<static_cast<unsigned>(s.groups), 32, 0, stream>>>(
      part, s.n, s.s, s.c, s.groups, plan.splits, a.gamma, a.emb, a.mean, a.rstd, a.chan_mean, alpha, betap, kappa,
      a.dgamma, a.dbeta, a.demb);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  Dispatch<T, SILU, NSC>(
      s, aligned, [&] { LaunchBwdApply<T, SILU, NSC, 4, uint32_t>(s, a, alpha, betap, kappa, sm, stream); },
      [&] { LaunchBwdApply<T, SILU, NSC, 4, int64_t>(s, a, alpha, betap, kappa, sm, stream); },
      [&] { LaunchBwdApply<T, SILU, NSC, 1, uint32_t>(s, a, alpha, betap, kappa, sm, stream); },
      [&] { LaunchBwdApply<T, SILU, NSC, 1, int64_t>(s, a, alpha, betap, kappa, sm, stream); });
  return cudaGetLastError();
}

template <template <typename, bool, bool> class Op, typename Args>
cudaError_t Select(const Shape& s, const Args& a, cudaStream_t stream) {
  const bool nsc = s.layout == Layout::kNSC;
  if (s.dtype == DType::kF32) {
    if (a.silu) return nsc ? Op<float, true, true>::Run(s, a, stream) : Op<float, true, false>::Run(s, a, stream);
    return nsc ? Op<float, false, true>::Run(s, a, stream) : Op<float, false, false>::Run(s, a, stream);
  }
  if (a.silu) {
    return nsc ? Op<__nv_bfloat16, true, true>::Run(s, a, stream) : Op<__nv_bfloat16, true, false>::Run(s, a, stream);
  }
  return nsc ? Op<__nv_bfloat16, false, true>::Run(s, a, stream) : Op<__nv_bfloat16, false, false>::Run(s, a, stream);
}

template <typename T, bool SILU, bool NSC>
struct ForwardOp {
  static cudaError_t Run(const Shape& s, const ForwardArgs& a, cudaStream_t st) { return ForwardT<T, SILU, NSC>(s, a, st); }
};
template <typename T, bool SILU, bool NSC>
struct BackwardOp {
  static cudaError_t Run(const Shape& s, const BackwardArgs& a, cudaStream_t st) {
    return BackwardT<T, SILU, NSC>(s, a, st);
  }
};

}  // namespace

std::string Unsupported(const Shape& s) {
  if (s.n < 1 || s.c < 1 || s.s < 1) return "empty tensor";
  if (s.groups < 1 || s.c % s.groups != 0) return "channels not divisible by groups";
  if (s.n * s.groups > 0x7fffffff) return "batch x groups above 2^31";
  const int64_t blocks = s.layout == Layout::kNCS ? s.n * s.c : s.n * ((s.c + kLanes - 1) / kLanes);
  if (blocks > 0x7fffffff) return "batch x channels above 2^31";
  return "";
}

int Splits(const Shape& shape, int sm_count) { return MakePlan(shape, sm_count).splits; }

int64_t WorkspaceFloats(const Shape& shape, int sm_count) {
  return 2 * shape.n * shape.c * static_cast<int64_t>(MakePlan(shape, sm_count).splits);
}

int CurrentDeviceSmCount(cudaError_t* error) {
  static std::atomic<int> cache[64] = {};
  int device = 0;
  *error = cudaGetDevice(&device);
  if (*error != cudaSuccess) return 0;
  if (device >= 0 && device < 64) {
    if (const int v = cache[device].load(std::memory_order_relaxed); v > 0) return v;
  }
  int count = 0;
  *error = cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device);
  if (*error != cudaSuccess) return 0;
  if (device >= 0 && device < 64) cache[device].store(count, std::memory_order_relaxed);
  return count;
}

cudaError_t Forward(const Shape& shape, const ForwardArgs& args, cudaStream_t stream) {
  if (!Unsupported(shape).empty() || args.x == nullptr || args.y == nullptr || args.workspace == nullptr) {
    return cudaErrorInvalidValue;
  }
  return Select<ForwardOp>(shape, args, stream);
}

cudaError_t Backward(const Shape& shape, const BackwardArgs& args, cudaStream_t stream) {
  if (!Unsupported(shape).empty() || args.x == nullptr || args.dy == nullptr || args.dx == nullptr ||
      args.workspace == nullptr) {
    return cudaErrorInvalidValue;
  }
  return Select<BackwardOp>(shape, args, stream);
}

}  // namespace medprof::meddpm::gn
