// The fused GroupNorm kernels' arithmetic (workloads/meddpm/cuda/group_norm_math.h) on the CPU:
// the split plan, and a host replay of the kernels' algorithm — per-(n, c, chunk) shifted sums
// in FP32, the FP64 finalize with the embedding folded into the channel means, scale/shift,
// the backward's per-chunk sums and its alpha/betap/kappa and d e — against LibTorch's autograd
// in FP64. The GPU test (tests/gpu/fused_group_norm_test.cc) checks the kernels themselves;
// this one pins the formulas on every CI run, where no GPU is.
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "workloads/meddpm/cuda/group_norm_math.h"

namespace medprof::meddpm::gn {
namespace {

TEST(GroupNormPlanTest, ChunksCoverEveryPlaneExactlyAndStayInBounds) {
  for (int64_t s : {1, 3, 27, 2047, 2048, 4096, 32768, 262144, 2097152, 16777217, 50000000}) {
    for (int64_t c : {8, 36, 64, 1152}) {
      for (int64_t n : {1, 3}) {
        for (Layout layout : {Layout::kNCS, Layout::kNSC}) {
          for (int sm : {0, 80, 132}) {
            Shape shape;
            shape.n = n, shape.c = c, shape.s = s, shape.groups = 4, shape.layout = layout;
            const Plan p = MakePlan(shape, sm);
            SCOPED_TRACE(testing::Message() << "S " << s << " C " << c << " N " << n << " sm " << sm);
            ASSERT_GE(p.splits, 1);
            ASSERT_LE(p.splits, kMaxSplits);
            EXPECT_EQ(p.chunk % 4, 0);
            EXPECT_LE(static_cast<int64_t>(p.splits - 1) * p.chunk, s - 1) << "no empty chunk";
            EXPECT_GE(static_cast<int64_t>(p.splits) * p.chunk, s) << "the chunks cover the plane";
            EXPECT_LE(p.chunk, kMaxExactCount + 3) << "counts stay exact in FP32";
            int64_t covered = 0;
            for (int k = 0; k < p.splits; ++k) covered += ChunkCount(s, p.chunk, k);
            EXPECT_EQ(covered, s);
            if (s >= 2 * kMinChunk) EXPECT_GE(p.chunk, kMinChunk);
          }
        }
      }
    }
  }
  // A batch-1 first-level activation (64 channels, 128^3) on 132 SMs: several blocks per SM.
  Shape first;
  first.n = 1, first.c = 64, first.s = 128 * 128 * 128, first.groups = 32;
  const Plan p = MakePlan(first, 132);
  EXPECT_GE(64 * p.splits, 4 * 132);
}

TEST(GroupNormMathTest, CombineIsTheWholeSetsStatistics) {
  std::vector<double> v = {3.0, -1.0, 4.0, 1.5, 9.0, -2.6, 5.0};
  Welford<double> all{0, 0, 0}, left{0, 0, 0}, right{0, 0, 0};
  for (size_t i = 0; i < v.size(); ++i) {
    Welford<double>& side = i < 3 ? left : right;
    side = Combine(side, Welford<double>{1.0, v[i], 0.0});
    all = Combine(all, Welford<double>{1.0, v[i], 0.0});
  }
  const Welford<double> both = Combine(left, right);
  double mean = 0, m2 = 0;
  for (double x : v) mean += x / v.size();
  for (double x : v) m2 += (x - mean) * (x - mean);
  EXPECT_NEAR(both.mean, mean, 1e-12);
  EXPECT_NEAR(both.m2, m2, 1e-12);
  EXPECT_NEAR(all.m2, m2, 1e-12);
  const Welford<double> empty{0, 0, 0};
  EXPECT_EQ(Combine(empty, both).m2, both.m2);
  EXPECT_EQ(Combine(both, empty).mean, both.mean);
  // Shifted sums around a large offset keep the variance.
  float s1 = 0, s2 = 0;
  const float shift = 1000.25f;
  for (float x : {1000.5f, 1001.0f, 999.75f, 1000.0f}) s1 += x - shift, s2 += (x - shift) * (x - shift);
  const Welford<float> w = FromShifted(4.f, shift, s1, s2);
  EXPECT_NEAR(w.mean, 1000.3125, 1e-4);
  EXPECT_NEAR(w.m2, 0.921875, 1e-5);  // deviations 0.1875 0.6875 -0.5625 -0.3125
}

TEST(GroupNormMathTest, SiluGradIsTheDerivative) {
  for (float z : {-8.f, -2.f, -0.3f, 0.f, 0.7f, 3.f, 12.f}) {
    const float h = 1e-3f;
    EXPECT_NEAR(SiluGrad(z), (Silu(z + h) - Silu(z - h)) / (2 * h), 2e-3) << z;
  }
}

struct Replayed {
  at::Tensor y, dx, dgamma, dbeta, demb;
};

// The kernels' algorithm, step by step, on NCS-ordered float data (the layout only changes the
// plan's block count, which `layout` selects).
Replayed Replay(const at::Tensor& x64, const at::Tensor& emb64, const at::Tensor& gamma64, const at::Tensor& beta64,
                const at::Tensor& dy64, int64_t groups, bool silu, Layout layout, double eps) {
  const int64_t N = x64.size(0), C = x64.size(1), S = x64.numel() / (N * C), G = groups, cg = C / G;
  const at::Tensor xf = x64.to(at::kFloat).contiguous().view({N, C, S});
  const at::Tensor dyf = dy64.to(at::kFloat).contiguous().view({N, C, S});
  const auto x = xf.accessor<float, 3>();
  const auto dy = dyf.accessor<float, 3>();
  auto emb = [&](int64_t n, int64_t c) -> float { return emb64.defined() ? emb64[n][c].item<float>() : 0.f; };
  std::vector<float> gamma(C), beta(C);
  for (int64_t c = 0; c < C; ++c) gamma[c] = gamma64[c].item<float>(), beta[c] = beta64[c].item<float>();
  Shape shape;
  shape.n = N, shape.c = C, shape.s = S, shape.groups = G, shape.layout = layout;
  const Plan plan = MakePlan(shape, 132);

  // Forward statistics: one state per (n, c, chunk), shifted FP32 sums like a kernel thread.
  std::vector<Welford<float>> part(static_cast<size_t>(N * C * plan.splits));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      for (int k = 0; k < plan.splits; ++k) {
        const int64_t begin = k * plan.chunk, end = std::min(S, begin + plan.chunk);
        const float shift = x[n][c][begin];
        float s1 = 0, s2 = 0;
        for (int64_t i = begin; i < end; ++i) s1 += x[n][c][i] - shift, s2 += (x[n][c][i] - shift) * (x[n][c][i] - shift);
        part[(n * C + c) * plan.splits + k] = FromShifted(static_cast<float>(end - begin), shift, s1, s2);
      }
    }
  }
  // Finalize: FP64 combine, the embedding shifts each channel's mean.
  std::vector<float> mean(N * G), rstd(N * G), scale(N * C), shift(N * C), chan_mean(N * C);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < G; ++g) {
      Welford<double> group{0, 0, 0};
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c) {
        Welford<double> chan{0, 0, 0};
        for (int k = 0; k < plan.splits; ++k) {
          const Welford<float>& p = part[(n * C + c) * plan.splits + k];
          chan = Combine(chan, Welford<double>{static_cast<double>(ChunkCount(S, plan.chunk, k)), p.mean, p.m2});
        }
        chan.mean += emb(n, c);
        chan_mean[n * C + c] = static_cast<float>(chan.mean);
        group = Combine(group, chan);
      }
      const double r = Rstd(group.m2, static_cast<double>(cg * S), eps);
      mean[n * G + g] = static_cast<float>(group.mean);
      rstd[n * G + g] = static_cast<float>(r);
      for (int64_t c = g * cg; c < (g + 1) * cg; ++c) {
        const ForwardCoef k = ForwardCoefficients(group.mean, r, gamma[c], beta[c], emb(n, c));
        scale[n * C + c] = static_cast<float>(k.scale), shift[n * C + c] = static_cast<float>(k.shift);
      }
    }
  }
  at::Tensor y = at::empty({N, C, S}, at::kDouble), dx = at::empty({N, C, S}, at::kDouble);
  auto ya = y.accessor<double, 3>();
  auto dxa = dx.accessor<double, 3>();
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t i = 0; i < S; ++i) {
        const float z = std::fma(x[n][c][i], scale[n * C + c], shift[n * C + c]);
        ya[n][c][i] = silu ? Silu(z) : z;
      }
    }
  }
  // Backward sums per (n, c, chunk): (sum dz * xhat, sum dz) in FP32.
  std::vector<double> s1(N * C * plan.splits), s2(N * C * plan.splits);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t nc = n * C + c, ng = n * G + c / cg;
      const float r = rstd[ng], h = (emb(n, c) - mean[ng]) * r;
      for (int k = 0; k < plan.splits; ++k) {
        float a = 0, b = 0;
        for (int64_t i = k * plan.chunk; i < std::min(S, (k + 1) * plan.chunk); ++i) {
          const float z = std::fma(scale[nc], x[n][c][i], shift[nc]);
          const float dz = silu ? dy[n][c][i] * SiluGrad(z) : dy[n][c][i];
          a = std::fma(dz, std::fma(x[n][c][i], r, h), a);
          b += dz;
        }
        s1[nc * plan.splits + k] = a, s2[nc * plan.splits + k] = b;
      }
    }
  }
  at::Tensor dgamma = at::zeros({C}, at::kDouble), dbeta = at::zeros({C}, at::kDouble);
  at::Tensor demb = at::zeros({N, C}, at::kDouble);
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t n = 0; n < N; ++n) {
      double A = 0, B = 0;
      std::vector<double> c1(cg), c2(cg);
      for (int64_t j = 0; j < cg; ++j) {
        const int64_t c = g * cg + j;
        for (int k = 0; k < plan.splits; ++k) c1[j] += s1[(n * C + c) * plan.splits + k], c2[j] += s2[(n * C + c) * plan.splits + k];
        A += gamma[c] * c1[j], B += gamma[c] * c2[j];
        dgamma[c] += c1[j], dbeta[c] += c2[j];
      }
      for (int64_t j = 0; j < cg; ++j) {
        const int64_t c = g * cg + j, nc = n * C + c;
        const BackwardCoef k =
            BackwardCoefficients(rstd[n * G + g], mean[n * G + g], gamma[c], emb(n, c), A, B, static_cast<double>(cg * S));
        demb[n][c] = EmbGrad(k, c2[j], chan_mean[nc], emb(n, c), static_cast<double>(S));
        for (int64_t i = 0; i < S; ++i) {
          const float z = std::fma(scale[nc], x[n][c][i], shift[nc]);
          const float dz = silu ? dy[n][c][i] * SiluGrad(z) : dy[n][c][i];
          dxa[n][c][i] = std::fma(static_cast<float>(k.alpha), dz,
                                  std::fma(static_cast<float>(k.betap), x[n][c][i], static_cast<float>(k.kappa)));
        }
      }
    }
  }
  return {y.view(x64.sizes()), dx.view(x64.sizes()), dgamma, dbeta, demb};
}

double RelMax(const at::Tensor& got, const at::Tensor& ref) {
  return (got - ref).abs().max().item<double>() / std::max(ref.abs().max().item<double>(), 1e-300);
}

TEST(GroupNormMathTest, ReplayOfTheKernelsMatchesLibTorchAutogradInFp64) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t groups;
  };
  const std::vector<Case> cases = {
      {{1, 8, 40, 40, 40}, 4},  // 64,000 per plane: ~31 chunks, the last one shorter
      {{2, 12, 5, 6, 7}, 4},    // one chunk, batch 2, Cg 3
      {{3, 6, 37}, 3},          // 3-D, odd S
  };
  torch::manual_seed(3);
  for (const Case& c : cases) {
    for (Layout layout : {Layout::kNCS, Layout::kNSC}) {
      for (bool with_emb : {false, true}) {
        for (bool silu : {true, false}) {
          SCOPED_TRACE(testing::Message() << c.shape[1] << " channels, S " << c.shape.back() << ", layout "
                                          << static_cast<int>(layout) << (with_emb ? " +emb" : "") << (silu ? " silu" : ""));
          const int64_t n = c.shape[0], ch = c.shape[1];
          std::vector<int64_t> bshape(c.shape.size(), 1);  // (1, C, 1, ...) per channel
          bshape[1] = ch;
          std::vector<int64_t> eshape = bshape;             // (N, C, 1, ...) per (n, c)
          eshape[0] = n;
          const at::Tensor x = torch::randn(c.shape, at::kDouble) * 2 + torch::randn({ch}, at::kDouble).view(bshape) * 5;
          const at::Tensor emb = with_emb ? torch::randn({n, ch}, at::kDouble) : at::Tensor();
          const at::Tensor gamma = torch::rand({ch}, at::kDouble) + 0.5, beta = torch::randn({ch}, at::kDouble);
          const at::Tensor dy = torch::randn(c.shape, at::kDouble);
          // What the kernels see is FP32: the reference takes the same rounded values.
          const at::Tensor xr = x.to(at::kFloat).to(at::kDouble).requires_grad_(true);
          const at::Tensor er = with_emb ? emb.to(at::kFloat).to(at::kDouble).requires_grad_(true) : at::Tensor();
          const at::Tensor gr = gamma.to(at::kFloat).to(at::kDouble).requires_grad_(true);
          const at::Tensor br = beta.to(at::kFloat).to(at::kDouble).requires_grad_(true);
          const at::Tensor dyr = dy.to(at::kFloat).to(at::kDouble);
          at::Tensor ref = at::group_norm(with_emb ? xr + er.view(eshape) : xr, c.groups, gr, br, 1e-5);
          if (silu) ref = at::silu(ref);
          ref.backward(dyr);
          const Replayed got = Replay(xr.detach(), with_emb ? er.detach() : at::Tensor(), gr.detach(), br.detach(), dyr,
                                      c.groups, silu, layout, 1e-5);
          EXPECT_LT(RelMax(got.y, ref.detach()), 1e-5);
          EXPECT_LT(RelMax(got.dx, xr.grad()), 1e-4);
          EXPECT_LT(RelMax(got.dgamma, gr.grad()), 1e-4);
          EXPECT_LT(RelMax(got.dbeta, br.grad()), 1e-4);
          if (with_emb) EXPECT_LT(RelMax(got.demb, er.grad()), 1e-4);
        }
      }
    }
  }
}

}  // namespace
}  // namespace medprof::meddpm::gn
