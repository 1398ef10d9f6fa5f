// The fused GroupNorm kernels on a GPU (label gpu; bench/gpu/fused_check.sh runs it on the
// GPU machine): outputs and gradients against an FP64 reference of GroupNorm+SiLU (with and
// without the embedding add and the SiLU) on fresh random inputs of several shapes, odd ones
// included, both layouts, FP32 and BF16; outputs poisoned first to prove every element is
// written; then the U-Net end to end: opt3's forward against opt1's with the same weights, and
// 50 training steps of opt3 tracking opt1's losses.
//
// Tolerances (the issue's): the fused FP32 path's max error against FP64 at most twice
// LibTorch's own FP32 op's max error against the same reference (plus 1e-7 of the reference's
// magnitude, under one FP32 ulp of the largest value, so only an exactly-zero LibTorch error needs
// it; a looser floor of 1e-6 hid 11 of 252 dgamma/dbeta values 2.0-3.1x LibTorch's error on the
// H200 before the backward statistics used compensated sums); BF16 below
// 1e-2 relative (L2 norm of the error over L2 norm of the reference).
#include <ATen/ATen.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "workloads/meddpm/fused_group_norm.h"
#include "workloads/meddpm/fused_info.h"
#include "workloads/meddpm/fused_volume_ops.h"
#include "workloads/ddpm/torch_compat.h"
#include "workloads/meddpm/unet.h"
#include "workloads/meddpm/workload.h"

namespace medprof::meddpm {
namespace {

using ::medprof::testing::IsOk;
using ::testing::HasSubstr;
namespace compat = ddpm::compat;

constexpr double kEps = 1e-5;

struct Case {
  std::vector<int64_t> shape;  // N, C, spatial...
  int64_t groups;
};

std::string Name(const Case& c, bool channels_last, at::ScalarType dtype, bool emb, bool silu) {
  std::string s;
  for (int64_t d : c.shape) s += std::to_string(d) + "x";
  s.pop_back();
  return s + " G" + std::to_string(c.groups) + (channels_last ? " NSC " : " NCS ") + c10::toString(dtype) +
         (emb ? " +emb" : "") + (silu ? " silu" : "");
}

std::vector<Case> Cases() {
  return {
      {{1, 64, 16, 16, 16}, 32},    // the model's first level at a small volume (Cg 2)
      {{2, 96, 5, 7, 9}, 32},       // odd spatial sizes, batch 2 (Cg 3)
      {{1, 48, 3, 3, 3}, 16},       // S = 27: no vector path, one split
      {{3, 8, 37}, 4},              // 3-D (attention's view), odd S, batch 3
      {{1, 1152, 4, 4, 4}, 16},     // Cg 72: a lane loops over several channels
      {{1, 64, 64, 64, 64}, 32},    // many splits per plane
      {{1, 36, 6, 5, 11}, 4},       // C % 4 != 0 and C % 32 != 0: channels-last tail lanes
  };
}

at::Tensor Layout(const at::Tensor& t, bool channels_last) {
  if (!channels_last) return t.contiguous();
  std::vector<int64_t> order = {0};
  for (int64_t d = 2; d < t.dim(); ++d) order.push_back(d);
  order.push_back(1);
  std::vector<int64_t> back(order.size());
  for (size_t i = 0; i < order.size(); ++i) back[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return t.permute(order).contiguous().permute(back);  // channels-last dense, same logical shape
}

double MaxAbs(const at::Tensor& a) { return a.abs().max().item<double>(); }
double MaxErr(const at::Tensor& got, const at::Tensor& ref) { return MaxAbs(got.to(at::kDouble) - ref); }
double RelErr(const at::Tensor& got, const at::Tensor& ref) {
  return (got.to(at::kDouble) - ref).norm().item<double>() / std::max(ref.norm().item<double>(), 1e-300);
}

struct Grads {
  at::Tensor y, dx, demb, dgamma, dbeta;
};

// y = act(GN(x + emb)) and its gradients for upstream dy, through `fn`.
template <typename Fn>
Grads RunWithGrads(Fn fn, const at::Tensor& x_in, const at::Tensor& emb_in, const at::Tensor& gamma_in,
          const at::Tensor& beta_in, const at::Tensor& dy) {
  at::Tensor x = x_in.detach().requires_grad_(true);
  at::Tensor emb = emb_in.defined() ? emb_in.detach().requires_grad_(true) : at::Tensor();
  at::Tensor gamma = gamma_in.detach().requires_grad_(true), beta = beta_in.detach().requires_grad_(true);
  at::Tensor y = fn(x, emb, gamma, beta);
  y.backward(dy.to(y.scalar_type()));
  return {y.detach(), x.grad(), emb.defined() ? emb.grad() : at::Tensor(), gamma.grad(), beta.grad()};
}

class FusedGroupNormGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    if (!fused::Compiled()) GTEST_SKIP() << fused::NotCompiledReason();
  }
};

TEST_F(FusedGroupNormGpuTest, RefusalsNameTheCause) {
  const auto cuda = [](const at::Tensor& t) { return t.to(at::kCUDA); };
  EXPECT_THAT(fused::FusedUnavailable(cuda(torch::randn({1, 6, 4})), 4), HasSubstr("not divisible by groups 4"));
  EXPECT_THAT(fused::FusedUnavailable(cuda(torch::randn({1, 8})), 4), HasSubstr("at least 3"));
  EXPECT_THAT(fused::FusedUnavailable(cuda(torch::randn({1, 8, 4}, torch::kDouble)), 4), HasSubstr("dtype Double"));
  EXPECT_THAT(fused::FusedUnavailable(torch::randn({1, 8, 4}), 4), HasSubstr("input on cpu"));
}

TEST_F(FusedGroupNormGpuTest, MatchesAnFp64ReferenceInEveryLayoutAndDtype) {
  torch::manual_seed(20261202);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  int checked = 0;
  for (const Case& c : Cases()) {
    const int64_t n = c.shape[0], ch = c.shape[1];
    for (bool channels_last : {false, true}) {
      for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
        for (bool with_emb : {false, true}) {
          for (bool silu : {true, false}) {
            const std::string name = Name(c, channels_last, dtype, with_emb, silu);
            SCOPED_TRACE(name);
            // Fresh inputs with a non-zero mean per channel (the cancellation a shifted sum must survive).
            std::vector<int64_t> bshape(c.shape.size(), 1);  // (1, C, 1, ...) per channel
            bshape[1] = ch;
            std::vector<int64_t> eshape = bshape;             // (N, C, 1, ...) per (n, c)
            eshape[0] = n;
            at::Tensor x = Layout(
                (torch::randn(c.shape, cuda) * 2.0 + torch::randn({ch}, cuda).view(bshape) * 3.0).to(dtype),
                channels_last);
            const at::Tensor emb = with_emb ? torch::randn({n, ch}, cuda) : at::Tensor();
            const at::Tensor gamma = torch::rand({ch}, cuda) + 0.5, beta = torch::randn({ch}, cuda) * 0.5;
            const at::Tensor dy = Layout(torch::randn(c.shape, cuda).to(dtype), channels_last);

            // FP64 reference on the very values the fused op sees.
            auto reference = [&](const at::Tensor& xx, const at::Tensor& e, const at::Tensor& g, const at::Tensor& b) {
              at::Tensor h = e.defined() ? xx + e.view(eshape) : xx;
              at::Tensor y = at::group_norm(h, c.groups, g, b, kEps);
              return silu ? at::silu(y) : y;
            };
            const Grads ref = RunWithGrads(reference, x.to(at::kDouble), with_emb ? emb.to(at::kDouble) : at::Tensor(),
                                  gamma.to(at::kDouble), beta.to(at::kDouble), dy.to(at::kDouble));
            const Grads got = RunWithGrads(
                [&](const at::Tensor& xx, const at::Tensor& e, const at::Tensor& g, const at::Tensor& b) {
                  return fused::GroupNormAct(xx, e, c.groups, g, b, kEps, silu, /*fused=*/true);
                },
                x, emb, gamma, beta, dy);
            ASSERT_EQ(got.y.scalar_type(), dtype) << "the fused path keeps the input dtype";
            ASSERT_EQ(got.y.strides(), x.strides()) << "the fused path keeps the input layout";
            ASSERT_EQ(got.dx.strides(), x.strides());

            if (dtype == at::kFloat) {
              // LibTorch's own FP32 op on the same input.
              const Grads lt = RunWithGrads(reference, x, emb, gamma, beta, dy);
              auto check = [&](const char* what, const at::Tensor& g, const at::Tensor& l, const at::Tensor& r) {
                const double eg = MaxErr(g, r), el = MaxErr(l, r), floor = 1e-7 * MaxAbs(r);
                EXPECT_LE(eg, 2.0 * el + floor) << what << ": fused max error " << eg << ", LibTorch FP32 " << el;
                std::printf("  %-44s %-6s fused %.3e  libtorch %.3e\n", name.c_str(), what, eg, el);
              };
              check("y", got.y, lt.y, ref.y);
              check("dx", got.dx, lt.dx, ref.dx);
              check("dgamma", got.dgamma, lt.dgamma, ref.dgamma);
              check("dbeta", got.dbeta, lt.dbeta, ref.dbeta);
              if (with_emb) check("demb", got.demb, lt.demb, ref.demb);
            } else {
              auto check = [&](const char* what, const at::Tensor& g, const at::Tensor& r) {
                const double rel = RelErr(g, r);
                EXPECT_LT(rel, 1e-2) << what;
                std::printf("  %-44s %-6s relative %.3e\n", name.c_str(), what, rel);
              };
              check("y", got.y, ref.y);
              check("dx", got.dx, ref.dx);
              check("dgamma", got.dgamma, ref.dgamma);
              check("dbeta", got.dbeta, ref.dbeta);
              if (with_emb) check("demb", got.demb, ref.demb);
            }
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, static_cast<int>(Cases().size()) * 16);
  EXPECT_GE(fused::Counts().fused, checked) << "every call went through the kernels";
  EXPECT_EQ(fused::Counts().fallback, 0) << fused::Counts().last_fallback_reason;
}

// Outputs start as NaN: a pass that skipped an element (a tail lane, a last chunk, a channel
// of a partial tile) leaves a NaN behind.
TEST_F(FusedGroupNormGpuTest, PoisonedOutputsAreFullyWritten) {
  torch::manual_seed(7);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const Case& c : Cases()) {
    for (bool channels_last : {false, true}) {
      for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
        SCOPED_TRACE(Name(c, channels_last, dtype, true, true));
        const int64_t n = c.shape[0], ch = c.shape[1];
        const at::Tensor x = Layout(torch::randn(c.shape, cuda).to(dtype), channels_last);
        const at::Tensor emb = torch::randn({n, ch}, cuda);
        const at::Tensor gamma = torch::rand({ch}, cuda) + 0.5, beta = torch::randn({ch}, cuda);
        const at::Tensor dy = Layout(torch::randn(c.shape, cuda).to(dtype), channels_last);
        at::Tensor y = at::full_like(x, nan);
        fused::FusedForwardInto(x, emb, c.groups, gamma, beta, kEps, /*silu=*/true, y);
        EXPECT_TRUE(at::isfinite(y).all().item<bool>()) << "forward left unwritten elements";

        at::Tensor y2 = at::full_like(x, nan), dx = at::full_like(x, nan);
        at::Tensor dgamma = at::full({ch}, nan, cuda), dbeta = at::full({ch}, nan, cuda);
        at::Tensor demb = at::full({n, ch}, nan, cuda);
        fused::FusedForwardBackwardInto(x, emb, c.groups, gamma, beta, kEps, true, dy, y2, dx, dgamma, dbeta, demb);
        EXPECT_TRUE(torch::equal(y2, y)) << "the same kernels give the same output";
        for (const at::Tensor* t : {&dx, &dgamma, &dbeta, &demb}) {
          EXPECT_TRUE(at::isfinite(*t).all().item<bool>()) << "backward left unwritten elements";
        }
        // And they are the autograd path's gradients, bit for bit.
        const Grads g = RunWithGrads(
            [&](const at::Tensor& xx, const at::Tensor& e, const at::Tensor& gg, const at::Tensor& b) {
              return fused::GroupNormAct(xx, e, c.groups, gg, b, kEps, true, /*fused=*/true);
            },
            x, emb, gamma, beta, dy);
        EXPECT_TRUE(torch::equal(g.dx, dx));
        EXPECT_TRUE(torch::equal(g.dgamma, dgamma));
        EXPECT_TRUE(torch::equal(g.dbeta, dbeta));
        EXPECT_TRUE(torch::equal(g.demb, demb));
      }
    }
  }
}

// A tensor that starts one element past an allocation's start is not 16-byte aligned: the
// kernels must take their scalar path and still match LibTorch's FP32 op.
TEST_F(FusedGroupNormGpuTest, MisalignedTensorsTakeTheScalarPath) {
  torch::manual_seed(11);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const std::vector<int64_t> shape = {1, 64, 8, 8, 8};
  const int64_t numel = 64 * 512;
  for (bool channels_last : {false, true}) {
    SCOPED_TRACE(channels_last ? "NSC" : "NCS");
    auto misaligned = [&](const at::Tensor& dense) {
      at::Tensor flat = torch::empty({numel + 1}, cuda);
      at::Tensor view = channels_last ? flat.narrow(0, 1, numel).view({1, 8, 8, 8, 64}).permute({0, 4, 1, 2, 3})
                                      : flat.narrow(0, 1, numel).view(shape);
      view.copy_(dense);
      return view;
    };
    const at::Tensor x = misaligned(torch::randn(shape, cuda) + 1.0);
    ASSERT_NE(reinterpret_cast<uintptr_t>(x.data_ptr()) % 16, 0u);
    const at::Tensor gamma = torch::rand({64}, cuda) + 0.5, beta = torch::randn({64}, cuda);
    const at::Tensor emb = torch::randn({1, 64}, cuda);
    const at::Tensor dy = misaligned(torch::randn(shape, cuda));
    ASSERT_EQ(fused::FusedUnavailable(x, 32), "");
    const Grads got = RunWithGrads(
        [&](const at::Tensor& xx, const at::Tensor& e, const at::Tensor& g, const at::Tensor& b) {
          return fused::GroupNormAct(xx, e, 32, g, b, kEps, true, /*fused=*/true);
        },
        x, emb, gamma, beta, dy);
    const Grads ref = RunWithGrads(
        [&](const at::Tensor& xx, const at::Tensor& e, const at::Tensor& g, const at::Tensor& b) {
          return fused::ReferenceGroupNormAct(xx, e, 32, g, b, kEps, true);
        },
        x, emb, gamma, beta, dy);
    EXPECT_LT(RelErr(got.y, ref.y.to(at::kDouble)), 1e-5);
    EXPECT_LT(RelErr(got.dx, ref.dx.to(at::kDouble)), 1e-4);
    EXPECT_LT(RelErr(got.dgamma, ref.dgamma.to(at::kDouble)), 1e-4);
    EXPECT_LT(RelErr(got.demb, ref.demb.to(at::kDouble)), 1e-4);
  }
}

// ---------------------------------------------------------------- upsample and head conv

// The caching allocator hands a freed block to the next request of the same size: filling a
// same-sized block with NaN and freeing it makes the kernels' freshly allocated outputs start as
// NaN, so an element a kernel skipped shows up.
void PoisonAllocator(const at::Tensor& like) {
  (void)at::full_like(like, std::numeric_limits<double>::quiet_NaN());
}

struct VolumeCase {
  std::vector<int64_t> x;  // N, C, D, H, W
  int64_t outs;            // the conv's output channels
};
std::vector<VolumeCase> VolumeCases() {
  return {
      {{1, 64, 16, 16, 16}, 1},  // the head at a small volume
      {{2, 12, 5, 7, 3}, 3},     // odd sizes, batch 2, 3 outputs
      {{1, 8, 1, 2, 1}, 4},      // sizes 1 and 2: every boundary at once
      {{1, 64, 32, 32, 32}, 1},  // 32^3: the weight gradient sums 32768 voxels
  };
}

// Upsample forward and backward, and the small conv's dx and dW, against FP64 (LibTorch's ops
// in double on the same values): FP32 within twice LibTorch's FP32 error, BF16 below 1e-2.
TEST_F(FusedGroupNormGpuTest, UpsampleAndHeadConvMatchAnFp64Reference) {
  compat::SetTf32(false);  // LibTorch's FP32 conv is the yardstick: true FP32, not TF32
  torch::manual_seed(20261203);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  for (const VolumeCase& c : VolumeCases()) {
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      std::string name;
      for (int64_t d : c.x) name += std::to_string(d) + "x";
      name += std::string(" O") + std::to_string(c.outs) + " " + c10::toString(dtype);
      SCOPED_TRACE(name);
      const at::Tensor x = (torch::randn(c.x, cuda) + 0.5).to(dtype).contiguous(at::MemoryFormat::ChannelsLast3d);
      const std::vector<int64_t> up = {c.x[0], c.x[1], 2 * c.x[2], 2 * c.x[3], 2 * c.x[4]};
      const at::Tensor dy_up = torch::randn(up, cuda).to(dtype).contiguous(at::MemoryFormat::ChannelsLast3d);
      const at::Tensor w = torch::randn({c.outs, c.x[1], 3, 3, 3}, cuda) * 0.1;
      const at::Tensor dy_conv =
          torch::randn({c.x[0], c.outs, c.x[2], c.x[3], c.x[4]}, cuda).to(dtype).contiguous(at::MemoryFormat::ChannelsLast3d);
      ASSERT_EQ(fused::UpsampleUnavailable(x), "");
      ASSERT_EQ(fused::SmallConvUnavailable(x, w, at::Tensor()), "");

      // medprof's kernels, outputs poisoned first.
      PoisonAllocator(dy_up);
      const at::Tensor y = fused::UpsampleTrilinearX2(x, /*fused=*/true);
      EXPECT_TRUE(at::isfinite(y).all().item<bool>()) << "upsample forward left unwritten elements";
      PoisonAllocator(x);
      const at::Tensor dx_up = fused::UpsampleX2BackwardKernel(dy_up, x);
      EXPECT_TRUE(at::isfinite(dx_up).all().item<bool>()) << "upsample backward left unwritten elements";
      PoisonAllocator(x);
      const auto [dx_conv, dw_conv] = fused::SmallConvBackwardKernel(x, w.to(dtype), dy_conv);
      EXPECT_TRUE(at::isfinite(dx_conv).all().item<bool>()) << "conv dgrad left unwritten elements";
      EXPECT_TRUE(at::isfinite(dw_conv).all().item<bool>()) << "conv wgrad left unwritten elements";
      EXPECT_EQ(y.scalar_type(), dtype);
      EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast3d));

      // References: LibTorch's ops with autograd, in FP64 and (for FP32) in FP32.
      auto run = [&](at::ScalarType t) {
        at::Tensor xu = x.to(t).detach().requires_grad_(true);
        at::Tensor yu = at::upsample_trilinear3d(xu, {up[2], up[3], up[4]}, /*align_corners=*/false);
        yu.backward(dy_up.to(t));
        at::Tensor xc = x.to(t).detach().requires_grad_(true);
        at::Tensor wc = w.to(dtype).to(t).detach().requires_grad_(true);
        at::conv3d(xc, wc, at::Tensor(), {1, 1, 1}, {1, 1, 1}).backward(dy_conv.to(t));
        return std::vector<at::Tensor>{yu.detach(), xu.grad(), xc.grad(), wc.grad()};
      };
      const std::vector<at::Tensor> ref = run(at::kDouble);
      const std::vector<at::Tensor> got = {y, dx_up, dx_conv, dw_conv};
      const char* what[] = {"upsample y", "upsample dx", "conv dx", "conv dW"};
      if (dtype == at::kFloat) {
        const std::vector<at::Tensor> lt = run(at::kFloat);
        for (size_t i = 0; i < got.size(); ++i) {
          const double eg = MaxErr(got[i], ref[i]), el = MaxErr(lt[i], ref[i]), floor = 1e-7 * MaxAbs(ref[i]);
          EXPECT_LE(eg, 2.0 * el + floor) << what[i] << ": medprof max error " << eg << ", LibTorch FP32 " << el;
          std::printf("  %-32s %-12s medprof %.3e  libtorch %.3e\n", name.c_str(), what[i], eg, el);
        }
      } else {
        for (size_t i = 0; i < got.size(); ++i) {
          const double rel = RelErr(got[i], ref[i]);
          EXPECT_LT(rel, 1e-2) << what[i];
          std::printf("  %-32s %-12s relative %.3e\n", name.c_str(), what[i], rel);
        }
      }
    }
  }
}

// Through autograd as the model calls them: SmallConv3x3 (bias included) and the upsample give
// LibTorch's gradients for x, weight and bias in FP32, and keep the input's layout.
TEST_F(FusedGroupNormGpuTest, HeadConvAndUpsampleAutogradMatchLibTorch) {
  compat::SetTf32(false);
  torch::manual_seed(5);
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const at::Tensor x0 = torch::randn({2, 64, 9, 10, 11}, cuda).contiguous(at::MemoryFormat::ChannelsLast3d);
  const at::Tensor w0 = torch::randn({1, 64, 3, 3, 3}, cuda) * 0.1, b0 = torch::randn({1}, cuda);
  const at::Tensor dy = torch::randn({2, 1, 18, 20, 22}, cuda);
  auto grads = [&](bool fused) {
    at::Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true);
    at::Tensor b = b0.detach().requires_grad_(true);
    const at::Tensor u = fused::UpsampleTrilinearX2(x, fused);
    EXPECT_TRUE(u.is_contiguous(at::MemoryFormat::ChannelsLast3d) || !fused);
    const at::Tensor y = fused::SmallConv3x3(u.contiguous(at::MemoryFormat::ChannelsLast3d), w, b, fused);
    y.backward(dy);
    return std::vector<at::Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
  };
  const int64_t before = fused::Counts(fused::Op::kSmallConv).fused;
  const std::vector<at::Tensor> got = grads(true), ref = grads(false);
  EXPECT_EQ(fused::Counts(fused::Op::kSmallConv).fused, before + 1);
  const char* what[] = {"y", "dx", "dW", "db"};
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].defined()) << what[i];
    EXPECT_LT(RelErr(got[i], ref[i].to(at::kDouble)), 1e-5) << what[i];
  }
}

// ---------------------------------------------------------------- the model end to end

ModelOptions SmallModel() {
  ModelOptions m;  // the published widths and levels; attention by the 16-wide rule
  return m;
}

TEST_F(FusedGroupNormGpuTest, Opt3ForwardMatchesOpt1WithTheSameWeights) {
  const torch::Device dev(torch::kCUDA, 0);
  UNet net(SmallModel());
  net->InitWeights(3, InitMode::kDense);  // dense: the output depends on every GroupNorm
  net->to(dev);
  torch::manual_seed(11);
  const torch::Tensor x = torch::randn({1, 3, 32, 32, 32}, torch::TensorOptions().device(dev));
  const torch::Tensor t = torch::tensor({123}, torch::TensorOptions().dtype(torch::kLong).device(dev));
  torch::NoGradGuard no_grad;
  compat::SetTf32(true);
  const torch::Tensor opt1 = net->forward(x, t).to(at::kDouble);  // TF32, NCDHW, LibTorch's GroupNorm

  torch::Tensor bf16, opt3;
  {
    compat::AutocastGuard autocast(c10::DeviceType::CUDA, true, at::kBFloat16);
    bf16 = net->forward(x, t).to(at::kDouble);  // bf16 preset: same math, LibTorch's GroupNorm
    net->SetChannelsLast(true);
    net->SetFused(true);
    const int64_t before = fused::Counts().fused;
    opt3 = net->forward(x.contiguous(at::MemoryFormat::ChannelsLast3d), t).to(at::kDouble);
    int64_t group_norms = 0;
    for (const auto& m : net->modules(/*include_self=*/false)) group_norms += m->as<torch::nn::GroupNormImpl>() != nullptr;
    EXPECT_EQ(fused::Counts().fused - before, group_norms) << "every GroupNorm of the model ran fused";
    EXPECT_EQ(fused::Counts(fused::Op::kUpsample).fallback, 0) << fused::Counts(fused::Op::kUpsample).last_fallback_reason;
    EXPECT_EQ(fused::Counts(fused::Op::kSmallConv).fallback, 0) << fused::Counts(fused::Op::kSmallConv).last_fallback_reason;
    EXPECT_GT(fused::Counts(fused::Op::kUpsample).fused, 0) << "the upsample layers ran medprof's kernel";
    EXPECT_GT(fused::Counts(fused::Op::kSmallConv).fused, 0) << "the head conv ran medprof's kernels";
  }
  net->SetFused(false);
  net->SetChannelsLast(false);
  compat::SetTf32(false);
  const double rel_opt3 = RelErr(opt3, opt1), rel_bf16 = RelErr(bf16, opt1);
  std::printf("forward 32^3: opt3 vs opt1 relative L2 %.3e; bf16 (unfused) vs opt1 %.3e\n", rel_opt3, rel_bf16);
  EXPECT_LT(rel_opt3, 5e-2) << "BF16 tolerance";
  EXPECT_LT(rel_opt3, 2.0 * rel_bf16 + 1e-3) << "the fused kernels add no error of their own beyond BF16's";
}

class LossRecorder : public PhaseObserver {
 public:
  void OnStepEnd(const StepReport& r) override {
    if (r.measured) losses.push_back(r.loss);
  }
  std::vector<double> losses;
};

std::vector<double> TrainLosses(bool opt3) {
  WorkloadOptions o;
  o.phase = Phase::kTrain;
  o.depth = o.height = o.width = 32;
  o.steps = 50;
  o.warmup = 0;
  o.grad_accum = 1;
  o.learning_rate = 1e-4;  // enough to move the losses within 50 steps
  o.seed = 5;
  o.device = Device::kCuda;
  o.tf32 = true;
  o.channels_last = opt3;
  o.bf16 = opt3;
  o.fused = opt3;
  auto w = Workload::Create(o);
  EXPECT_THAT(w.status(), IsOk());
  if (!w.ok()) return {};
  EXPECT_EQ((*w)->flags().fused, opt3) << (*w)->flags().note;
  LossRecorder rec;
  EXPECT_THAT((*w)->Run(&rec), IsOk());
  return rec.losses;
}

TEST_F(FusedGroupNormGpuTest, FiftyTrainingStepsTrackOpt1Within5Percent) {
  const std::vector<double> opt1 = TrainLosses(false);
  const std::vector<double> opt3 = TrainLosses(true);
  ASSERT_EQ(opt1.size(), 50u);
  ASSERT_EQ(opt3.size(), 50u);
  // Same seed, so the same t and noise every step: the losses differ only by arithmetic. Each
  // step's loss within 5 % of opt1's, and the mean of every 10-step window too.
  double worst = 0.0;
  for (size_t i = 0; i < opt1.size(); ++i) {
    const double rel = std::abs(opt3[i] - opt1[i]) / std::abs(opt1[i]);
    worst = std::max(worst, rel);
    EXPECT_LT(rel, 0.05) << "step " << i << ": opt1 " << opt1[i] << ", opt3 " << opt3[i];
  }
  for (size_t w = 0; w < 5; ++w) {
    double a = 0, b = 0;
    for (size_t i = 10 * w; i < 10 * w + 10; ++i) a += opt1[i], b += opt3[i];
    std::printf("steps %2zu-%2zu: opt1 mean loss %.5f, opt3 %.5f (%+.2f %%)\n", 10 * w, 10 * w + 9, a / 10, b / 10,
                100.0 * (b - a) / a);
  }
  std::printf("worst step: %.2f %%\n", 100.0 * worst);
}

}  // namespace
}  // namespace medprof::meddpm
