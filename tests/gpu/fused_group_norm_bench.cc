// Micro-benchmark of the fused GroupNorm kernels on the GPU (a program that prints figures, not
// a test): for the U-Net's activation shapes at 128^3, both layouts, FP32 and BF16, the median
// time of
//   eager    LibTorch as the unfused model runs it: silu(group_norm(x.float())) (+ backward)
//   fused    medprof's kernels through fused::GroupNormAct (+ backward)
//   silu     at::silu(x) alone: one read and one write, the bandwidth yardstick
// with CUDA events, 5 warm-up and 20 timed calls each. The spec's H200 figures for (1,64,128^3)
// FP32 forward: native GroupNorm 3.80 ms, torch.compile's 0.45 ms, SiLU 0.26 ms.
//
// Then the other fused ops at the U-Net's shapes (BF16, channels last): the trilinear x2 upsample
// (LibTorch's op as autocast runs it: FP32, with the casts) and the head conv's backward
// (64 -> 1 channels at 128^3: cuDNN's BF16 dgrad + wgrad vs medprof's kernels).
//
//   fused_group_norm_bench [--quick]      (bench/gpu/fused_check.sh runs it in its test stage)
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "workloads/meddpm/fused_group_norm.h"
#include "workloads/meddpm/fused_info.h"
#include "workloads/meddpm/fused_volume_ops.h"

namespace {

using medprof::meddpm::fused::GroupNormAct;

double MedianMs(const std::function<void()>& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
    const auto stream = c10::cuda::getCurrentCUDAStream();
    start.record(stream);
    fn();
    stop.record(stream);
    stop.synchronize();
    ms.push_back(start.elapsed_time(stop));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "fused_group_norm_bench: no CUDA device\n");
    return 2;
  }
  if (!medprof::meddpm::fused::Compiled()) {
    std::fprintf(stderr, "fused_group_norm_bench: %s\n", medprof::meddpm::fused::NotCompiledReason().c_str());
    return 2;
  }
  struct Shape {
    int64_t c, edge;
  };
  std::vector<Shape> shapes = {{64, 128}, {128, 64}, {256, 32}, {192, 128}};
  if (quick) shapes.resize(1);
  const int warmup = 5, reps = quick ? 5 : 20;
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  std::printf("| shape | dtype | layout | pass | eager ms | fused ms | speedup | silu ms | fused GB/s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const Shape& s : shapes) {
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      for (bool channels_last : {false, true}) {
        torch::manual_seed(1);
        at::Tensor x = torch::randn({1, s.c, s.edge, s.edge, s.edge}, cuda).to(dtype);
        if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast3d);
        const at::Tensor emb = torch::randn({1, s.c}, cuda);
        const at::Tensor gamma = torch::ones({s.c}, cuda).requires_grad_(true);
        const at::Tensor beta = torch::zeros({s.c}, cuda).requires_grad_(true);
        const double bytes = static_cast<double>(x.numel()) * x.element_size();
        const std::string shape = "1x" + std::to_string(s.c) + "x" + std::to_string(s.edge) + "^3";
        const char* layout = channels_last ? "NDHWC" : "NCDHW";
        {
          torch::NoGradGuard no_grad;
          const double eager = MedianMs(
              [&] { GroupNormAct(x, emb, 32, gamma, beta, 1e-5, true, /*fused=*/false); }, warmup, reps);
          const double fused = MedianMs(
              [&] { GroupNormAct(x, emb, 32, gamma, beta, 1e-5, true, /*fused=*/true); }, warmup, reps);
          const double silu = MedianMs([&] { at::silu(x); }, warmup, reps);
          // Forward traffic: x read twice (statistics, apply), y written once.
          std::printf("| %s | %s | %s | forward | %.3f | %.3f | %.1fx | %.3f | %.0f |\n", shape.c_str(),
                      c10::toString(dtype), layout, eager, fused, eager / fused, silu, 3 * bytes / fused / 1e6);
        }
        {
          const at::Tensor xr = x.detach().requires_grad_(true);
          // Upstream gradients made once in each path's output dtype (the eager path returns FP32),
          // and autograd::grad rather than backward(): no conversion or .grad accumulation timed.
          const at::Tensor dy_fused = at::ones_like(x), dy_eager = at::ones_like(x, at::kFloat);
          auto step = [&](bool fused) {
            const at::Tensor y = GroupNormAct(xr, emb, 32, gamma, beta, 1e-5, true, fused);
            torch::autograd::grad({y}, {xr, gamma, beta}, {fused ? dy_fused : dy_eager});
          };
          const double eager = MedianMs([&] { step(false); }, warmup, reps);
          const double fused = MedianMs([&] { step(true); }, warmup, reps);
          // Backward traffic on top: x and dy read twice each, dx written once.
          std::printf("| %s | %s | %s | fwd+bwd | %.3f | %.3f | %.1fx | - | %.0f |\n", shape.c_str(),
                      c10::toString(dtype), layout, eager, fused, eager / fused, 8 * bytes / fused / 1e6);
        }
      }
    }
  }
  namespace fused = medprof::meddpm::fused;
  std::printf("\n| op | shape | LibTorch ms | medprof ms | speedup |\n|---|---|---|---|---|\n");
  const auto cl = at::MemoryFormat::ChannelsLast3d;
  struct Up {
    int64_t c, edge;  // input; output 2 x edge
  };
  std::vector<Up> ups = {{128, 64}, {256, 32}, {256, 16}};
  if (quick) ups.resize(1);
  for (const Up& u : ups) {
    torch::manual_seed(2);
    const at::Tensor x = torch::randn({1, u.c, u.edge, u.edge, u.edge}, cuda).to(at::kBFloat16).contiguous(cl);
    const std::vector<int64_t> size = {2 * u.edge, 2 * u.edge, 2 * u.edge};
    const std::string shape = "1x" + std::to_string(u.c) + "x" + std::to_string(u.edge) + "^3 bf16";
    {
      torch::NoGradGuard no_grad;
      // Autocast's version: FP32 in (a cast), FP32 out, cast back to BF16 for the next conv.
      const double lt = MedianMs(
          [&] { at::upsample_trilinear3d(x.to(at::kFloat), size, false).to(at::kBFloat16); }, warmup, reps);
      const double mp = MedianMs([&] { fused::UpsampleTrilinearX2(x, /*fused=*/true); }, warmup, reps);
      std::printf("| upsample fwd | %s | %.3f | %.3f | %.1fx |\n", shape.c_str(), lt, mp, lt / mp);
    }
    {
      const at::Tensor xr = x.detach().requires_grad_(true);
      const at::Tensor dy16 = torch::randn({1, u.c, 2 * u.edge, 2 * u.edge, 2 * u.edge}, cuda).to(at::kBFloat16).contiguous(cl);
      const at::Tensor dy32 = dy16.to(at::kFloat);
      const double lt = MedianMs(
          [&] {
            const at::Tensor y = at::upsample_trilinear3d(xr.to(at::kFloat), size, false);
            torch::autograd::grad({y}, {xr}, {dy32});
          },
          warmup, reps);
      const double mp = MedianMs(
          [&] { torch::autograd::grad({fused::UpsampleTrilinearX2(xr, true)}, {xr}, {dy16}); }, warmup, reps);
      std::printf("| upsample fwd+bwd | %s | %.3f | %.3f | %.1fx |\n", shape.c_str(), lt, mp, lt / mp);
    }
  }
  {
    const int64_t edge = quick ? 64 : 128;
    torch::manual_seed(3);
    const at::Tensor h = torch::randn({1, 64, edge, edge, edge}, cuda).to(at::kBFloat16).contiguous(cl).requires_grad_(true);
    const at::Tensor w = (torch::randn({1, 64, 3, 3, 3}, cuda) * 0.05).requires_grad_(true);
    const at::Tensor b = torch::zeros({1}, cuda).requires_grad_(true);
    const at::Tensor dy = torch::randn({1, 1, edge, edge, edge}, cuda).to(at::kBFloat16);
    const std::string shape = "1x64x" + std::to_string(edge) + "^3 -> 1, bf16";
    auto step = [&](bool use_fused) {
      const at::Tensor y = use_fused ? fused::SmallConv3x3(h, w, b, true)
                                     : at::conv3d(h, w.to(at::kBFloat16).contiguous(cl), b.to(at::kBFloat16),
                                                  {1, 1, 1}, {1, 1, 1});
      torch::autograd::grad({y}, {h, w, b}, {dy});
    };
    const double lt = MedianMs([&] { step(false); }, 2, quick ? 3 : 5);
    const double mp = MedianMs([&] { step(true); }, 2, quick ? 3 : 5);
    std::printf("| head conv fwd+bwd | %s | %.3f | %.3f | %.1fx |\n", shape.c_str(), lt, mp, lt / mp);
  }
  for (const fused::Op op : {fused::Op::kUpsample, fused::Op::kSmallConv}) {
    const auto n = fused::Counts(op);
    if (n.fallback > 0) {
      std::printf("%s: %lld fallbacks: %s\n", fused::OpName(op), static_cast<long long>(n.fallback),
                  n.last_fallback_reason.c_str());
      return 1;
    }
  }

  const auto counts = medprof::meddpm::fused::Counts();
  std::printf("\nfused calls %lld, fallbacks %lld%s%s\n", static_cast<long long>(counts.fused),
              static_cast<long long>(counts.fallback), counts.fallback > 0 ? ": " : "",
              counts.last_fallback_reason.c_str());
  return counts.fallback > 0 ? 1 : 0;
}
