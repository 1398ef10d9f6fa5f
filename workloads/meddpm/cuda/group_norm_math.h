// The arithmetic of the fused GroupNorm kernels (group_norm_kernels.h), shared by the CUDA
// kernels and by host code: the split plan, Welford states and their combination, the SiLU
// derivative, and the per-channel coefficients of the forward and backward passes. Compiled by
// nvcc for the device and by the host compiler for the CPU unit test that replays the kernels'
// algorithm against LibTorch's autograd (tests/unit/workloads/group_norm_math_test.cc).
//
// No CUDA or LibTorch include. Pure functions; thread-safe.
//
// Notation: a group (n, g) holds Cg = C / G channels of S elements, M = Cg * S elements in all;
// h = x + e[n, c]; mean and rstd = 1 / sqrt(var + eps) of h over the group (biased variance);
// xhat = (h - mean) * rstd; z = gamma[c] * xhat + beta[c]; y = silu(z) or z.
//   forward:  z = scale * x + shift, scale = rstd * gamma, shift = beta + (e - mean) * scale
//   backward: with dz = dy * silu'(z) (or dy), A = sum_c gamma_c sum_s dz xhat,
//             B = sum_c gamma_c sum_s dz over the group,
//             dx = alpha * dz + betap * x + kappa, alpha = rstd * gamma,
//             betap = -rstd^2 A / M, kappa = -rstd B / M + betap * (e - mean);
//             d e = sum_s dx; dgamma_c = sum_{n,s} dz xhat; dbeta_c = sum_{n,s} dz.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define MEDPROF_HD __host__ __device__ __forceinline__
#else
#define MEDPROF_HD inline
#endif

namespace medprof::meddpm::gn {

enum class Layout { kNCS, kNSC };
enum class DType { kF32, kBF16 };

struct Shape {
  int64_t n = 0;       // batch
  int64_t c = 0;       // channels
  int64_t s = 0;       // spatial elements per (n, c)
  int64_t groups = 0;  // divides c
  Layout layout = Layout::kNCS;
  DType dtype = DType::kF32;
};

inline constexpr int kThreads = 256;                 // statistics and elementwise blocks
inline constexpr int kLanes = 32;                    // kNSC statistics: channels per block
inline constexpr int64_t kMinChunk = 2048;           // elements per (n, c, split), at least
inline constexpr int64_t kMaxExactCount = 1LL << 24; // a block's count stays exact in FP32
inline constexpr int kMaxSplits = 65535;             // grid.y

// Each (n, c) plane is cut into `splits` chunks of `chunk` elements (the last may be shorter;
// none is empty). Chunks are multiples of 4 so the channels-first passes can load 4 at a time.
struct Plan {
  int splits = 1;
  int64_t chunk = 0;
};

// About 4 statistics blocks per SM, at least kMinChunk elements per chunk, at most 2^24.
inline Plan MakePlan(const Shape& s, int sm_count) {
  const int64_t per_split_blocks = s.layout == Layout::kNCS ? s.n * s.c : s.n * ((s.c + kLanes - 1) / kLanes);
  const int64_t target = 4 * static_cast<int64_t>(std::max(sm_count, 1));
  int64_t splits = (target + per_split_blocks - 1) / std::max<int64_t>(per_split_blocks, 1);
  splits = std::min(splits, std::max<int64_t>(1, s.s / kMinChunk));
  splits = std::max(splits, (s.s + kMaxExactCount - 1) / kMaxExactCount);
  splits = std::clamp<int64_t>(splits, 1, kMaxSplits);
  Plan p;
  p.chunk = ((s.s + splits - 1) / splits + 3) / 4 * 4;
  p.splits = static_cast<int>((s.s + p.chunk - 1) / p.chunk);
  return p;
}

// Elements of chunk k.
MEDPROF_HD int64_t ChunkCount(int64_t s, int64_t chunk, int k) {
  const int64_t rest = s - static_cast<int64_t>(k) * chunk;
  return rest < chunk ? rest : chunk;
}

template <typename F>
struct Welford {
  F n, mean, m2;
};

// Chan et al.'s parallel combination; an empty side returns the other.
template <typename F>
MEDPROF_HD Welford<F> Combine(Welford<F> a, Welford<F> b) {
  const F n = a.n + b.n;
  if (n == F(0)) return a;
  const F delta = b.mean - a.mean;
  const F wb = b.n / n;
  return {n, a.mean + delta * wb, a.m2 + b.m2 + delta * delta * a.n * wb};
}

// Shifted sums of `count` elements (s1 = sum (v - shift), s2 = sum (v - shift)^2) -> a state.
MEDPROF_HD Welford<float> FromShifted(float count, float shift, float s1, float s2) {
  if (count == 0.f) return {0.f, 0.f, 0.f};
  const float m2 = s2 - s1 * s1 / count;
  return {count, shift + s1 / count, m2 > 0.f ? m2 : 0.f};
}

MEDPROF_HD float Sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }
MEDPROF_HD float Silu(float z) { return z / (1.0f + expf(-z)); }
// d silu / dz = s (1 + z (1 - s)), s = sigmoid(z)
MEDPROF_HD float SiluGrad(float z) {
  const float s = Sigmoid(z);
  return s * (1.0f + z * (1.0f - s));
}

MEDPROF_HD double Rstd(double m2, double count, double eps) { return 1.0 / sqrt(m2 / count + eps); }

struct ForwardCoef {
  double scale, shift;
};
MEDPROF_HD ForwardCoef ForwardCoefficients(double mean, double rstd, double gamma, double beta, double e) {
  const double a = rstd * gamma;
  return {a, beta + (e - mean) * a};
}

struct BackwardCoef {
  double alpha, betap, kappa;
};
// A, B: the group's sums (above); m = Cg * S.
MEDPROF_HD BackwardCoef BackwardCoefficients(double rstd, double mean, double gamma, double e, double A, double B,
                                             double m) {
  const double betap = -rstd * rstd * A / m;
  return {rstd * gamma, betap, -rstd * B / m + betap * (e - mean)};
}

// d e for one (n, c): sum over S of dx, from the channel's sum of dz and its mean of h = x + e.
MEDPROF_HD double EmbGrad(const BackwardCoef& k, double sum_dz, double chan_mean_h, double e, double s) {
  return k.alpha * sum_dz + k.betap * s * (chan_mean_h - e) + s * k.kappa;
}

}  // namespace medprof::meddpm::gn
